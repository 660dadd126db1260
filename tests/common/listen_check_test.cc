#include "common/listen_check.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace anisoscope {
namespace {

// A socket listening on 127.0.0.1 at a free port; its port.
int ListenOnLoopback(int* fd) {
  *fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(*fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) return 0;
  if (::listen(*fd, 1) != 0) return 0;
  socklen_t size = sizeof(address);
  ::getsockname(*fd, reinterpret_cast<sockaddr*>(&address), &size);
  return ntohs(address.sin_port);
}

TEST(ListenCheckTest, AListeningPortIsInUseAndNamedWithItsFlag) {
  int fd = -1;
  const int port = ListenOnLoopback(&fd);
  ASSERT_GT(port, 0);
  const absl::Status status = CheckAddressFree({"127.0.0.1", port}, "--listen");
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status.message(),
            "--listen 127.0.0.1:" + std::to_string(port) +
                ": address already in use: is another anisoscope-server running?");
  ::close(fd);
  EXPECT_TRUE(CheckAddressFree({"127.0.0.1", port}, "--listen").ok());
}

TEST(ListenCheckTest, PortZeroIsAlwaysFree) {
  EXPECT_TRUE(CheckAddressFree({"127.0.0.1", 0}, "--http-listen").ok());
}

}  // namespace
}  // namespace anisoscope
