#include "common/host_port.h"

#include <gtest/gtest.h>

namespace anisoscope {
namespace {

TEST(HostPortTest, SplitsHostAndPort) {
  const struct {
    const char* address;
    const char* host;
    int port;
  } cases[] = {{"127.0.0.1:50051", "127.0.0.1", 50051},
               {"localhost:0", "localhost", 0},
               {"0.0.0.0:65535", "0.0.0.0", 65535},
               {"[::1]:8080", "::1", 8080},
               {"[::]:0", "::", 0},
               {"node-7.cluster.local:443", "node-7.cluster.local", 443}};
  for (const auto& c : cases) {
    const absl::StatusOr<HostPort> parsed = ParseHostPort(c.address);
    ASSERT_TRUE(parsed.ok()) << c.address << ": " << parsed.status();
    EXPECT_EQ(parsed->host, c.host) << c.address;
    EXPECT_EQ(parsed->port, c.port) << c.address;
  }
}

TEST(HostPortTest, RefusesWhatIsNotHostPort) {
  for (const char* address :
       {"", "localhost", "127.0.0.1", ":50051", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:123456",
        "127.0.0.1:-1", "127.0.0.1:+80", "127.0.0.1:8o", "127.0.0.1: 80", "::1:50051", "::1",
        "[::1]", "[::1]80", "[::1", "[]:80", "[::1]:", "[::1]:x"}) {
    const absl::StatusOr<HostPort> parsed = ParseHostPort(address);
    ASSERT_FALSE(parsed.ok()) << address;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << address;
    EXPECT_NE(parsed.status().message().find("is not HOST:PORT"), absl::string_view::npos)
        << parsed.status();
  }
}

TEST(HostPortTest, FormatsIpv6InBrackets) {
  EXPECT_EQ(FormatHostPort("127.0.0.1", 80), "127.0.0.1:80");
  EXPECT_EQ(FormatHostPort("localhost", 0), "localhost:0");
  EXPECT_EQ(FormatHostPort("::1", 8080), "[::1]:8080");
}

}  // namespace
}  // namespace anisoscope
