#include "common/listen_check.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "absl/strings/str_cat.h"

namespace anisoscope {
namespace {

// Whether binding `info`'s address fails with EADDRINUSE. SO_REUSEADDR as the listeners
// set it (a port in TIME_WAIT is free), and no SO_REUSEPORT.
bool InUse(const addrinfo& info) {
  const int fd = ::socket(info.ai_family, info.ai_socktype | SOCK_CLOEXEC, info.ai_protocol);
  if (fd < 0) return false;
  const int yes = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  const bool in_use = ::bind(fd, info.ai_addr, info.ai_addrlen) != 0 && errno == EADDRINUSE;
  ::close(fd);
  return in_use;
}

}  // namespace

absl::Status CheckAddressFree(const HostPort& address, absl::string_view flag) {
  if (address.port == 0) return absl::OkStatus();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(address.port);
  if (::getaddrinfo(address.host.c_str(), port.c_str(), &hints, &found) != 0) {
    return absl::OkStatus();
  }
  bool in_use = false;
  for (const addrinfo* info = found; info != nullptr && !in_use; info = info->ai_next) {
    in_use = InUse(*info);
  }
  ::freeaddrinfo(found);
  if (!in_use) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat(flag, " ", FormatHostPort(address.host, address.port),
                   ": address already in use: is another anisoscope-server running?"));
}

}  // namespace anisoscope
