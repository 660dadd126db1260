// HttpClient::Get for listings: the answer's fields and body, its bound, retries on 429 and
// 5xx, and the errors a caller sees for each status.
#include <gtest/gtest.h>

#include <chrono>

#include "sources/transfer/http_client.h"
#include "sources/transfer/http_error.h"
#include "tests/sources/transfer/fault_server.h"
#include "tests/sources/transfer/transfer_test_util.h"

namespace anisoscope::transfer::testing {
namespace {

TEST(GetTest, ReturnsTheBodyAndTheFieldsCallersNeed) {
  FaultServer server([](FaultServer& self, httplib::Server& http) {
    http.Get("/api/models/org/name/tree/main", [&self](const httplib::Request&,
                                                       httplib::Response& response) {
      response.set_header(
          "Link", "<" + self.Url("/api/models/org/name/tree/main?cursor=abc") + ">; rel=\"next\"");
      response.set_header("ETag", "\"etag-1\"");
      response.set_header("X-Repo-Commit", "0123456789abcdef0123456789abcdef01234567");
      response.set_content("[{\"path\":\"config.json\"}]", "application/json");
    });
  });
  std::unique_ptr<HttpClient> client = MakeClient(FastOptions());
  GetRequest request;
  request.url = server.Url("/api/models/org/name/tree/main");
  request.headers = {"Accept: application/json"};
  const absl::StatusOr<HttpResponse> response = client->Get(request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "[{\"path\":\"config.json\"}]");
  EXPECT_EQ(response->headers.Get("link"),
            "<" + server.Url("/api/models/org/name/tree/main?cursor=abc") + ">; rel=\"next\"");
  EXPECT_EQ(response->headers.Get("ETAG"), "\"etag-1\"");
  EXPECT_EQ(response->headers.Get("X-Repo-Commit"), "0123456789abcdef0123456789abcdef01234567");
  EXPECT_EQ(server.requests()[0].Header("Accept"), "application/json");
}

TEST(GetTest, AHeadNotFollowingAnswersWithTheRedirectsFields) {
  // The Hub answers HEAD resolve/... of an LFS file with a 302 to its CDN, carrying the
  // file's sha256 and size: what a caller reads without downloading.
  FaultServer server([](FaultServer&, httplib::Server& http) {
    http.Get("/org/name/resolve/main/model.safetensors",
             [](const httplib::Request&, httplib::Response& response) {
               response.status = 302;
               response.set_header("Location", "https://cdn.example/blob?X-Amz-Signature=s");
               response.set_header("X-Linked-Etag", "\"abc123\"");
               response.set_header("X-Linked-Size", "123456789");
               response.set_header("X-Repo-Commit", "feedface");
             });
  });
  std::unique_ptr<HttpClient> client = MakeClient(FastOptions());
  GetRequest request;
  request.url = server.Url("/org/name/resolve/main/model.safetensors");
  request.head = true;
  request.follow_redirects = false;
  const absl::StatusOr<HttpResponse> response = client->Get(request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 302);
  EXPECT_EQ(response->headers.Get("X-Linked-Size"), "123456789");
  EXPECT_EQ(response->headers.Get("X-Linked-Etag"), "\"abc123\"");
  EXPECT_EQ(response->headers.Get("Location"), "https://cdn.example/blob?X-Amz-Signature=s");
  EXPECT_EQ(server.requests()[0].method, "HEAD");
}

TEST(GetTest, RefusesABodyPastItsBound) {
  FaultServer server([](FaultServer&, httplib::Server& http) {
    http.Get("/big", [](const httplib::Request&, httplib::Response& response) {
      response.set_content(std::string(100000, 'x'), "application/json");
    });
  });
  std::unique_ptr<HttpClient> client = MakeClient(FastOptions());
  GetRequest request;
  request.url = server.Url("/big");
  request.max_body_bytes = 1000;
  const absl::StatusOr<HttpResponse> response = client->Get(request);
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(Contains(std::string(response.status().message()), "1000 bytes (max_body_bytes)"))
      << response.status();
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST(GetTest, A429IsRetriedAfterItsRetryAfter) {
  std::atomic<int> calls{0};
  FaultServer server([&](FaultServer&, httplib::Server& http) {
    http.Get("/refs", [&](const httplib::Request&, httplib::Response& response) {
      if (calls++ == 0) {
        response.status = 429;
        response.set_header("Retry-After", "1");
        response.set_content("slow down", "text/plain");
        return;
      }
      response.set_content("{}", "application/json");
    });
  });
  std::unique_ptr<HttpClient> client = MakeClient(FastOptions());
  const auto start = std::chrono::steady_clock::now();
  const absl::StatusOr<HttpResponse> response = client->Get({.url = server.Url("/refs")});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->body, "{}");
  // The backoff alone would be 2 ms: the wait was the server's.
  EXPECT_GE(seconds, 0.95);
  EXPECT_LT(seconds, 5.0);  // generous: the machine may be busy
  EXPECT_EQ(client->counters().attempts, 2);
  EXPECT_EQ(client->counters().retries, 1);
}

TEST(GetTest, A503StormFailsAfterTheAttemptBoundNamingIt) {
  FaultServer server([](FaultServer&, httplib::Server& http) {
    http.Get("/refs", [](const httplib::Request&, httplib::Response& response) {
      response.status = 503;
      response.set_content("<html>overloaded</html>", "text/html");
    });
  });
  TransferOptions options = FastOptions();
  options.max_attempts = 3;
  std::unique_ptr<HttpClient> client = MakeClient(options);
  const absl::StatusOr<HttpResponse> response = client->Get({.url = server.Url("/refs?page=2")});
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kUnavailable);
  const std::string message(response.status().message());
  EXPECT_TRUE(Contains(message, "GET " + server.Url("/refs") + ": HTTP 503 Service Unavailable"))
      << message;
  EXPECT_TRUE(Contains(message, "after 3 attempts (max_attempts)")) << message;
  EXPECT_FALSE(Contains(message, "overloaded")) << "a body is never quoted";
  EXPECT_FALSE(Contains(message, "page=2")) << "nor the query";
  EXPECT_EQ(server.requests().size(), 3u);
  EXPECT_EQ(HttpStatusOf(response.status()), 503);
}

TEST(GetTest, StatusesAndHubErrorCodesBecomeDistinctErrors) {
  FaultServer server([](FaultServer&, httplib::Server& http) {
    http.Get(R"(/(\d+)/(\w*))", [](const httplib::Request& request, httplib::Response& response) {
      response.status = std::stoi(request.matches[1]);
      if (!request.matches[2].str().empty()) {
        response.set_header("X-Error-Code", request.matches[2].str());
        response.set_header("X-Error-Message", "Access to model org/name is restricted");
      }
      response.set_content("{\"error\":\"body text\"}", "application/json");
    });
  });
  const struct {
    const char* path;
    absl::StatusCode code;
    const char* says;
  } cases[] = {
      {"/401/", absl::StatusCode::kUnauthenticated, "HTTP 401 Unauthorized: the credentials"},
      {"/403/", absl::StatusCode::kPermissionDenied, "HTTP 403 Forbidden"},
      {"/404/", absl::StatusCode::kNotFound, "HTTP 404 Not Found: nothing at this URL"},
      {"/401/GatedRepo", absl::StatusCode::kPermissionDenied,
       "HTTP 401 Unauthorized (X-Error-Code GatedRepo): the repository is gated"},
      {"/404/RepoNotFound", absl::StatusCode::kNotFound,
       "(X-Error-Code RepoNotFound): no such repository"},
      {"/404/RevisionNotFound", absl::StatusCode::kNotFound,
       "(X-Error-Code RevisionNotFound): no such revision"},
      {"/404/EntryNotFound", absl::StatusCode::kNotFound,
       "(X-Error-Code EntryNotFound): no such file at this revision"},
  };
  std::unique_ptr<HttpClient> client = MakeClient(FastOptions());
  for (const auto& c : cases) {
    const absl::StatusOr<HttpResponse> response = client->Get({.url = server.Url(c.path)});
    ASSERT_FALSE(response.ok()) << c.path;
    EXPECT_EQ(response.status().code(), c.code) << response.status();
    const std::string message(response.status().message());
    EXPECT_TRUE(Contains(message, c.says)) << message;
    EXPECT_FALSE(Contains(message, "body text")) << message;
    EXPECT_FALSE(Contains(message, "restricted")) << message;
    EXPECT_FALSE(Contains(message, "attempt")) << "not retried: " << message;
    const std::string code = std::string(c.path).substr(5);
    if (!code.empty()) {
      EXPECT_EQ(HubErrorCodeOf(response.status()), code) << c.path;
    }
  }
  EXPECT_EQ(server.requests().size(), std::size(cases));
}

TEST(GetTest, AClosedPortIsRetriedThenNamed) {
  int port = 0;
  {
    FaultServer gone([](FaultServer&, httplib::Server&) {});
    port = gone.port();
  }
  TransferOptions options = FastOptions();
  options.max_attempts = 2;
  std::unique_ptr<HttpClient> client = MakeClient(options);
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/refs";
  const absl::StatusOr<HttpResponse> response = client->Get({.url = url});
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kUnavailable) << response.status();
  EXPECT_TRUE(Contains(std::string(response.status().message()), "GET " + url + ": "))
      << response.status();
  EXPECT_TRUE(Contains(std::string(response.status().message()), "after 2 attempts"))
      << response.status();
}

TEST(GetTest, RefusesFieldsThatCarrySecretsOrLineBreaks) {
  std::unique_ptr<HttpClient> client = MakeClient(FastOptions());
  for (const char* field : {"Authorization: Bearer x", "cookie: a=b", "Host: evil",
                            "X-Ok: a\r\nX-Evil: b", "NoColon"}) {
    const absl::StatusOr<HttpResponse> response =
        client->Get({.url = "http://127.0.0.1:1/", .headers = {field}});
    ASSERT_FALSE(response.ok()) << field;
    EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_FALSE(Contains(std::string(response.status().message()), "evil")) << response.status();
  }
}

}  // namespace
}  // namespace anisoscope::transfer::testing
