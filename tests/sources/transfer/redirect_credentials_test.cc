// Credentials stay with their origin: a redirect to another host (the Hub's CDN) gets no
// token, a redirect within the origin keeps it, and no secret reaches a log line or an
// error message whatever fails.
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <sstream>

#include "sources/transfer/http_client.h"
#include "tests/common/test_temp_dir.h"
#include "tests/sources/transfer/fault_server.h"
#include "tests/sources/transfer/transfer_test_util.h"

namespace anisoscope::transfer::testing {
namespace {

constexpr char kToken[] = "hf_SECRETtokenNEVERshown0123456789";
constexpr char kAwsSecret[] = "AWSsecretKEYneverSHOWN/abcdefghij0123";
constexpr int64_t kSize = 200000;

// The Hub ("127.0.0.1:A") sends resolve/... to its CDN ("localhost:B") with a signed URL;
// resolve-local/... to a path of its own.
struct HubAndCdn {
  HubAndCdn()
      : cdn([this](FaultServer& self, httplib::Server& http) {
          http.Get("/blob",
                   [this, &self](const httplib::Request& request, httplib::Response& response) {
                     self.ServeBlob(request, response, BlobPlan{.size = kSize}, &cdn_served);
                   });
        }),
        hub([this](FaultServer& self, httplib::Server& http) {
          http.Get("/org/name/resolve/main/model.bin", [this](const httplib::Request&,
                                                              httplib::Response& response) {
            response.status = 302;
            response.set_header("Location", "http://localhost:" + std::to_string(cdn.port()) +
                                                "/blob?X-Amz-Signature=cdnsig123");
          });
          http.Get("/org/name/resolve-local/main/model.bin",
                   [](const httplib::Request&, httplib::Response& response) {
                     response.status = 307;
                     response.set_header("Location", "../../local-blob");
                   });
          http.Get("/org/name/local-blob",
                   [this, &self](const httplib::Request& request, httplib::Response& response) {
                     self.ServeBlob(request, response, BlobPlan{.size = kSize}, &hub_served);
                   });
          http.Get("/loop", [](const httplib::Request&, httplib::Response& response) {
            response.status = 302;
            response.set_header("Location", "/loop");
          });
          http.Get("/unauthorized", [](const httplib::Request&, httplib::Response& response) {
            response.status = 401;
          });
          http.Get("/busy", [](const httplib::Request&, httplib::Response& response) {
            response.status = 503;
          });
        }) {}

  Credentials HubToken() const {
    Credentials credentials;
    credentials.endpoint = hub.Url("");
    credentials.bearer_token = kToken;
    return credentials;
  }

  std::atomic<int> cdn_served{0};
  std::atomic<int> hub_served{0};
  FaultServer cdn;
  FaultServer hub;
};

TEST(RedirectCredentialsTest, ARedirectToAnotherHostDropsTheToken) {
  HubAndCdn servers;
  std::unique_ptr<HttpClient> client = MakeClient(FastOptions(), servers.HubToken());
  TestTempDir dir;
  DownloadRequest request;
  request.url = servers.hub.Url("/org/name/resolve/main/model.bin");
  request.path = dir.File("model.bin.incomplete");
  request.expected_size = kSize;
  request.expected_sha256 = BlobSha256(kSize);
  const absl::StatusOr<DownloadResult> result = client->DownloadToFile(request);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->counters.redirects, 1);

  ASSERT_EQ(servers.hub.requests().size(), 1u);
  EXPECT_EQ(servers.hub.requests()[0].Header("Authorization"), std::string("Bearer ") + kToken);
  const std::vector<RecordedRequest> cdn_requests = servers.cdn.requests();
  ASSERT_EQ(cdn_requests.size(), 1u);
  EXPECT_FALSE(cdn_requests[0].Has("Authorization"));
  EXPECT_EQ(cdn_requests[0].Header("Host"), "localhost:" + std::to_string(servers.cdn.port()));
  EXPECT_EQ(cdn_requests[0].path, "/blob");
  for (const auto& [name, value] : cdn_requests[0].headers) {
    EXPECT_FALSE(Contains(value, kToken)) << name;
  }
}

TEST(RedirectCredentialsTest, ARelativeRedirectWithinTheOriginKeepsTheToken) {
  HubAndCdn servers;
  std::unique_ptr<HttpClient> client = MakeClient(FastOptions(), servers.HubToken());
  const absl::StatusOr<HttpResponse> response =
      client->Get({.url = servers.hub.Url("/org/name/resolve-local/main/model.bin")});
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->body, BlobBytes(0, kSize));
  EXPECT_EQ(response->url, servers.hub.Url("/org/name/local-blob"));
  const std::vector<RecordedRequest> requests = servers.hub.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[1].path, "/org/name/local-blob");
  EXPECT_EQ(requests[1].Header("Authorization"), std::string("Bearer ") + kToken);
}

TEST(RedirectCredentialsTest, AUrlOffTheEndpointGetsNoToken) {
  // A listing's next link or a caller's URL naming another host: no token goes there.
  HubAndCdn servers;
  std::unique_ptr<HttpClient> client = MakeClient(FastOptions(), servers.HubToken());
  ASSERT_TRUE(
      client->Get({.url = "http://localhost:" + std::to_string(servers.cdn.port()) + "/blob"})
          .ok());
  EXPECT_FALSE(servers.cdn.requests()[0].Has("Authorization"));
}

TEST(RedirectCredentialsTest, ARedirectLoopStopsAtMaxRedirects) {
  HubAndCdn servers;
  TransferOptions options = FastOptions();
  options.max_redirects = 3;
  std::unique_ptr<HttpClient> client = MakeClient(options, servers.HubToken());
  const absl::StatusOr<HttpResponse> response = client->Get({.url = servers.hub.Url("/loop")});
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(
      Contains(std::string(response.status().message()), "more than 3 redirects (max_redirects)"))
      << response.status();
  EXPECT_EQ(servers.hub.requests().size(), 4u);
}

TEST(RedirectCredentialsTest, NoSecretInALogLineOrAnErrorMessage) {
  std::ostringstream log;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log);
  spdlog::default_logger()->sinks().push_back(sink);
  HubAndCdn servers;
  std::vector<std::string> messages;
  {
    std::unique_ptr<HttpClient> client = MakeClient(FastOptions(), servers.HubToken());
    for (const char* path : {"/unauthorized", "/busy", "/loop"}) {
      messages.emplace_back(
          client->Get({.url = servers.hub.Url(path) + "?token=" + kToken}).status().ToString());
    }
    // A redirect to the CDN whose answer disagrees with the listing: the error names the
    // signed URL, without its signature.
    TestTempDir dir;
    DownloadRequest request;
    request.url = servers.hub.Url("/org/name/resolve/main/model.bin");
    request.path = dir.File("x.incomplete");
    request.expected_size = kSize + 1;
    messages.emplace_back(client->DownloadToFile(request).status().ToString());
  }
  {
    Credentials aws;
    aws.endpoint = servers.hub.Url("");
    aws.aws = AwsSigV4Keys{"AKIDTEST", kAwsSecret, "SESSIONtokenSECRET", "us-east-1", "s3"};
    std::unique_ptr<HttpClient> client = MakeClient(FastOptions(), aws);
    for (const char* path : {"/unauthorized", "/busy"}) {
      messages.emplace_back(client->Get({.url = servers.hub.Url(path)}).status().ToString());
    }
  }
  {
    // A credential that cannot be used is refused without being quoted.
    Credentials bad;
    bad.endpoint = servers.hub.Url("");
    bad.bearer_token = std::string(kToken) + "\r\nX-Evil: 1";
    messages.emplace_back(HttpClient::Create(FastOptions(), bad).status().ToString());
  }
  spdlog::default_logger()->flush();
  auto& sinks = spdlog::default_logger()->sinks();
  sinks.erase(std::remove(sinks.begin(), sinks.end(), sink), sinks.end());

  EXPECT_TRUE(Contains(log.str(), "HTTP 503")) << "the retries were logged: " << log.str();
  for (const std::string& secret : {std::string(kToken), std::string(kAwsSecret),
                                    std::string("SESSIONtokenSECRET"), std::string("cdnsig123")}) {
    EXPECT_FALSE(Contains(log.str(), secret)) << log.str();
    for (const std::string& message : messages) {
      EXPECT_FALSE(Contains(message, secret)) << message;
    }
  }
  EXPECT_TRUE(Contains(messages[3], "redirected to http://localhost:")) << messages[3];
}

}  // namespace
}  // namespace anisoscope::transfer::testing
