// The parts under HttpClient, without a server: SigV4's canonical URL, URL origins and their
// printable form, the streaming SHA-256, the response fields, the error table, the backoff.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "sources/transfer/http_client.h"
#include "sources/transfer/http_error.h"
#include "sources/transfer/response_headers.h"
#include "sources/transfer/retry_policy.h"
#include "sources/transfer/sha256_stream.h"
#include "sources/transfer/sigv4_canonical_url.h"
#include "sources/transfer/url_parts.h"
#include "tests/common/test_temp_dir.h"
#include "tests/sources/transfer/transfer_test_util.h"

namespace anisoscope::transfer::testing {
namespace {

TEST(CanonicalUrlTest, SortsPairsAndEncodesAsAwsSigns) {
  const struct {
    const char* url;
    const char* canonical;
  } cases[] = {
      {"http://h/?b=2&a=1", "http://h/?a=1&b=2"},
      {"http://h/?Param=Value2&Param-3=Value3", "http://h/?Param=Value2&Param-3=Value3"},
      {"http://h/?a=2&a=1", "http://h/?a=1&a=2"},
      {"http://h/?list-type=2&prefix=run/step%201/&continuation-token=1+/x=",
       "http://h/?continuation-token=1%2B%2Fx%3D&list-type=2&prefix=run%2Fstep%201%2F"},
      {"http://h/b/k%2fey%7e%41", "http://h/b/k%2Fey~A"},
      {"http://h/b/a%2Fb/c?flag", "http://h/b/a%2Fb/c?flag="},
      {"http://h:9000/bucket", "http://h:9000/bucket"},
  };
  for (const auto& c : cases) {
    const absl::StatusOr<std::string> canonical = CanonicalUrlForSigV4(c.url);
    ASSERT_TRUE(canonical.ok()) << c.url << ": " << canonical.status();
    EXPECT_EQ(*canonical, c.canonical) << c.url;
    // Canonical is a fixed point.
    EXPECT_EQ(CanonicalUrlForSigV4(*canonical).value_or(""), *canonical);
  }
}

TEST(UrlPartsTest, OriginsCompareSchemeHostAndPort) {
  EXPECT_EQ(OriginOf("https://HuggingFace.co/org/x").value(),
            OriginOf("https://huggingface.co:443/y").value());
  EXPECT_NE(OriginOf("https://huggingface.co/").value(),
            OriginOf("http://huggingface.co/").value());
  EXPECT_NE(OriginOf("http://127.0.0.1:80/").value(), OriginOf("http://localhost:80/").value());
  EXPECT_NE(OriginOf("http://h:8080/").value(), OriginOf("http://h:8081/").value());
  for (const char* url : {"ftp://h/x", "file:///etc/passwd", "/relative", ""}) {
    EXPECT_EQ(OriginOf(url).status().code(), absl::StatusCode::kInvalidArgument) << url;
  }
}

TEST(UrlPartsTest, MessagesShowNoQueryNoFragmentNoUserInfo) {
  EXPECT_EQ(UrlForMessages("https://user:pass@cdn.example:8443/a/b?X-Amz-Signature=s#f"),
            "https://cdn.example:8443/a/b");
  EXPECT_EQ(UrlForMessages("not a url"), "(unparsable URL)");
}

TEST(Sha256StreamTest, MatchesTheStandardVectorsInAnyPieces) {
  Sha256Stream empty;
  EXPECT_EQ(empty.HexDigest(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  Sha256Stream abc;
  abc.Update("a");
  abc.Update("bc");
  EXPECT_EQ(abc.HexDigest(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(abc.HexDigest(), abc.HexDigest()) << "reading the digest does not end the stream";
}

TEST(Sha256StreamTest, HashesAFilesPrefix) {
  TestTempDir dir;
  const std::string path = dir.File("prefix");
  {
    std::ofstream out(path, std::ios::binary);
    out << "abcdef";
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  Sha256Stream hasher;
  ASSERT_TRUE(hasher.UpdateFromFile(fd, 3, path).ok());
  EXPECT_EQ(hasher.HexDigest(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hasher.UpdateFromFile(fd, 100, path).code(), absl::StatusCode::kDataLoss);
  ::close(fd);
}

TEST(ResponseHeadersTest, FindsFieldsInAnyCaseAndForgetsA100Continue) {
  ResponseHeaders headers;
  EXPECT_TRUE(headers.AddLine("HTTP/1.1 100 Continue\r\n"));
  EXPECT_TRUE(headers.AddLine("X-Early: 1\r\n"));
  EXPECT_TRUE(headers.AddLine("HTTP/1.1 200 OK\r\n"));
  EXPECT_TRUE(headers.AddLine("Link: <a>; rel=\"next\"\r\n"));
  EXPECT_TRUE(headers.AddLine("link:  <b>; rel=\"last\" \r\n"));
  EXPECT_TRUE(headers.AddLine("\r\n"));
  EXPECT_EQ(headers.Get("LINK"), "<a>; rel=\"next\"");
  EXPECT_EQ(headers.GetAll("Link").size(), 2u);
  EXPECT_EQ(headers.Get("X-Early"), std::nullopt);
  ResponseHeaders flood;
  bool accepted = true;
  for (int i = 0; i < 10000 && accepted; ++i) {
    accepted = flood.AddLine("X-Flood: " + std::string(100, 'x') + "\r\n");
  }
  EXPECT_FALSE(accepted) << "a flood of fields is refused";
}

TEST(HttpErrorTest, KeepsTheErrorCodeShortAndPlain) {
  const absl::Status status = HttpStatusError("GET", "https://h/x?sig=1", 404,
                                              "Entry\nNotFound<script>" + std::string(200, 'a'));
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  const std::optional<std::string> code = HubErrorCodeOf(status);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(code->substr(0, 20), "EntryNotFoundscripta");
  EXPECT_LE(code->size(), 64u);
  EXPECT_FALSE(Contains(std::string(status.message()), "sig=1"));
  EXPECT_EQ(HttpStatusOf(status), 404);
  EXPECT_EQ(HttpStatusOf(absl::NotFoundError("x")), std::nullopt);
}

TEST(RetryPolicyTest, BacksOffExponentiallyWithJitterAndHonoursRetryAfter) {
  TransferOptions options;
  options.initial_backoff = absl::Milliseconds(100);
  options.max_backoff = absl::Seconds(1);
  options.max_retry_after = absl::Seconds(10);
  for (int i = 0; i < 50; ++i) {
    const absl::Duration first = BackoffBeforeRetry(options, 1, absl::ZeroDuration());
    EXPECT_GE(first, absl::Milliseconds(50));
    EXPECT_LE(first, absl::Milliseconds(100));
    const absl::Duration third = BackoffBeforeRetry(options, 3, absl::ZeroDuration());
    EXPECT_GE(third, absl::Milliseconds(200));
    EXPECT_LE(third, absl::Milliseconds(400));
    EXPECT_LE(BackoffBeforeRetry(options, 30, absl::ZeroDuration()), absl::Seconds(1));
    EXPECT_GE(BackoffBeforeRetry(options, 1, absl::Seconds(5)), absl::Seconds(5));
    EXPECT_EQ(BackoffBeforeRetry(options, 1, absl::Hours(1)), absl::Seconds(10));
  }
  EXPECT_TRUE(IsRetryableHttpStatus(429));
  EXPECT_TRUE(IsRetryableHttpStatus(503));
  EXPECT_FALSE(IsRetryableHttpStatus(501));
  EXPECT_FALSE(IsRetryableHttpStatus(404));
  EXPECT_TRUE(IsRetryableCurlCode(CURLE_PARTIAL_FILE));
  EXPECT_FALSE(IsRetryableCurlCode(CURLE_URL_MALFORMAT));
}

TEST(HttpClientTest, RefusesOptionsAndCredentialsItCannotUse) {
  TransferOptions no_attempts = FastOptions();
  no_attempts.max_attempts = 0;
  EXPECT_EQ(HttpClient::Create(no_attempts).status().code(), absl::StatusCode::kInvalidArgument);
  Credentials no_endpoint;
  no_endpoint.bearer_token = "hf_x";
  EXPECT_EQ(HttpClient::Create(FastOptions(), no_endpoint).status().code(),
            absl::StatusCode::kInvalidArgument);
  Credentials both;
  both.endpoint = "https://h";
  both.bearer_token = "hf_x";
  both.aws = AwsSigV4Keys{"a", "b"};
  EXPECT_EQ(HttpClient::Create(FastOptions(), both).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace anisoscope::transfer::testing
