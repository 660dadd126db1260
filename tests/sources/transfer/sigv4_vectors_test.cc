// SigV4 as libcurl 7.88 signs it (CURLOPT_AWS_SIGV4), through HttpClient, against AWS's
// published Signature Version 4 test suite ("aws-sig-v4-test-suite": service "service",
// region us-east-1, 20150830T123600Z, key AKIDEXAMPLE). The request lines and expected
// Authorization values are copied from the suite as awslabs/aws-c-auth keeps it
// (tests/aws-signing-test-suite/v4/<name>/header-signed-request.txt); only GET vectors that
// libcurl can express are here. The request goes to a local server that records what
// arrives; curl takes its date from our X-Amz-Date field and its region and service from
// the provider string "aws:amz:us-east-1:service".
#include <gtest/gtest.h>

#include "sources/transfer/http_client.h"
#include "tests/common/test_temp_dir.h"
#include "tests/sources/transfer/fault_server.h"
#include "tests/sources/transfer/transfer_test_util.h"

namespace anisoscope::transfer::testing {
namespace {

constexpr char kAccessKeyId[] = "AKIDEXAMPLE";
constexpr char kSecretKey[] = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
constexpr char kScope[] =
    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, ";

struct Vector {
  const char* name;
  const char* target;  // the request line's target, as the suite writes it (UTF-8 raw)
  const char* session_token;
  const char* signed_headers_and_signature;
};

const Vector kVectors[] = {
    {"get-vanilla", "/", "",
     "SignedHeaders=host;x-amz-date, "
     "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
    {"get-unreserved", "/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", "",
     "SignedHeaders=host;x-amz-date, "
     "Signature=07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f"},
    {"get-utf8", "/\xE1\x88\xB4", "",
     "SignedHeaders=host;x-amz-date, "
     "Signature=8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85"},
    {"get-vanilla-empty-query-key", "/?Param1=value1", "",
     "SignedHeaders=host;x-amz-date, "
     "Signature=a67d582fa61cc504c4bae71f336f98b97f1ea3c7a6bfe1b6e45aec72011b9aeb"},
    {"get-vanilla-query-order-key-case", "/?Param2=value2&Param1=value1", "",
     "SignedHeaders=host;x-amz-date, "
     "Signature=b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"},
    {"get-vanilla-query-order-encoded", "/?Param-3=Value3&Param=Value2&%E1%88%B4=Value1", "",
     "SignedHeaders=host;x-amz-date, "
     "Signature=371d3713e185cc334048618a97f809c9ffe339c62934c032af5a0e595648fcac"},
    {"get-vanilla-query-unreserved",
     "/?-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz="
     "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
     "",
     "SignedHeaders=host;x-amz-date, "
     "Signature=9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197"},
    {"get-vanilla-utf8-query", "/?\xE1\x88\xB4=bar", "",
     "SignedHeaders=host;x-amz-date, "
     "Signature=2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04"},
    {"get-vanilla-with-session-token", "/",
     "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267",
     "SignedHeaders=host;x-amz-date;x-amz-security-token, "
     "Signature=07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8"},
};

TEST(SigV4VectorsTest, CurlSignsAsAwsPublished) {
  FaultServer server([](FaultServer&, httplib::Server& http) {
    http.Get(".*", [](const httplib::Request&, httplib::Response& response) {
      response.set_content("", "text/plain");
    });
  });
  // The suite's host, with no port in the Host field, reached at the local server.
  TransferOptions options = FastOptions();
  options.connect_to = {"example.amazonaws.com:80:127.0.0.1:" + std::to_string(server.port())};
  for (const Vector& vector : kVectors) {
    Credentials credentials;
    credentials.endpoint = "http://example.amazonaws.com";
    credentials.aws =
        AwsSigV4Keys{kAccessKeyId, kSecretKey, vector.session_token, "us-east-1", "service"};
    std::unique_ptr<HttpClient> client = MakeClient(options, credentials);
    ASSERT_NE(client, nullptr);
    GetRequest request;
    request.url = std::string("http://example.amazonaws.com") + vector.target;
    request.headers = {"X-Amz-Date: 20150830T123600Z"};
    const absl::StatusOr<HttpResponse> response = client->Get(request);
    ASSERT_TRUE(response.ok()) << vector.name << ": " << response.status();
    const RecordedRequest recorded = server.requests().back();
    EXPECT_EQ(recorded.Header("Host"), "example.amazonaws.com") << vector.name;
    EXPECT_EQ(recorded.Header("Authorization"),
              std::string(kScope) + vector.signed_headers_and_signature)
        << vector.name << " (sent " << recorded.path << ")";
    for (const auto& [name, value] : recorded.headers) {
      EXPECT_FALSE(Contains(value, kSecretKey))
          << vector.name << ": the secret went out in " << name;
    }
  }
}

TEST(SigV4VectorsTest, S3RequestsCarryThePayloadHashAndSignTheRange) {
  std::atomic<int> served{0};
  FaultServer server([&](FaultServer& self, httplib::Server& http) {
    http.Get("/bucket/step1/model.safetensors", [&](const httplib::Request& request,
                                                    httplib::Response& response) {
      self.ServeBlob(request, response, BlobPlan{.size = 300000, .cut_after = 100000}, &served);
    });
  });
  Credentials credentials;
  credentials.endpoint = server.Url("/");
  credentials.aws = AwsSigV4Keys{kAccessKeyId, kSecretKey, "session-token-1", "eu-west-3", "s3"};
  std::unique_ptr<HttpClient> client = MakeClient(FastOptions(), credentials);
  TestTempDir dir;
  DownloadRequest request;
  request.url = server.Url("/bucket/step1/model.safetensors");
  request.path = dir.File("model.safetensors.incomplete");
  request.expected_size = 300000;
  const absl::StatusOr<DownloadResult> result = client->DownloadToFile(request);
  ASSERT_TRUE(result.ok()) << result.status();
  const std::vector<RecordedRequest> requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  for (const RecordedRequest& recorded : requests) {
    EXPECT_EQ(recorded.Header("x-amz-content-sha256"),
              "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(recorded.Header("x-amz-security-token"), "session-token-1");
    EXPECT_TRUE(Contains(recorded.Header("Authorization"), "Credential=AKIDEXAMPLE/"))
        << recorded.Header("Authorization");
    EXPECT_TRUE(Contains(recorded.Header("Authorization"), "/eu-west-3/s3/aws4_request"));
  }
  EXPECT_EQ(requests[1].Header("Range"), "bytes=100000-");
  EXPECT_TRUE(Contains(requests[1].Header("Authorization"),
                       "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date;"
                       "x-amz-security-token"))
      << requests[1].Header("Authorization");
}

}  // namespace
}  // namespace anisoscope::transfer::testing
