#include "sources/transfer/http_client.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "sources/transfer/fetch_loop.h"
#include "sources/transfer/file_sink.h"
#include "sources/transfer/sha256_stream.h"

namespace anisoscope::transfer {
namespace {

// A listing's body, kept in memory up to its bound. Each attempt starts it afresh.
class StringSink : public BodySink {
 public:
  explicit StringSink(int64_t max_bytes) : max_bytes_(max_bytes) {}

  absl::Status Begin(int, const ResponseHeaders&) override {
    body_.clear();
    return absl::OkStatus();
  }
  absl::Status Write(absl::string_view bytes) override {
    if (static_cast<int64_t>(body_.size() + bytes.size()) > max_bytes_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the body runs past ", max_bytes_, " bytes (max_body_bytes)"));
    }
    body_.append(bytes.data(), bytes.size());
    return absl::OkStatus();
  }
  std::string Take() { return std::move(body_); }

 private:
  const int64_t max_bytes_;
  std::string body_;
};

// Extra request fields: "Name: value", one line each, none that carries a secret or
// decides where a request goes (`refused`, lower case).
absl::Status CheckHeaders(const std::vector<std::string>& headers,
                          std::initializer_list<absl::string_view> refused) {
  for (const std::string& line : headers) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos || colon == 0 ||
        line.find_first_of(std::string("\r\n\0", 3)) != std::string::npos) {
      return absl::InvalidArgumentError(
          "a request header is not one \"Name: value\" line (its text is not shown)");
    }
    const std::string name = absl::AsciiStrToLower(absl::string_view(line).substr(0, colon));
    for (absl::string_view refuse : refused) {
      if (name == refuse) {
        return absl::InvalidArgumentError(absl::StrCat(
            "request header ", name, " is not allowed here (credentials go in Credentials)"));
      }
    }
  }
  return absl::OkStatus();
}

bool IsHexSha256(absl::string_view text) {
  if (text.size() != 64) return false;
  for (char c : text) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpClient>> HttpClient::Create(TransferOptions options,
                                                               Credentials credentials) {
  if (options.max_attempts < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_attempts must be at least 1, not ", options.max_attempts));
  }
  if (options.max_redirects < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_redirects must not be negative, not ", options.max_redirects));
  }
  if (options.connect_timeout <= absl::ZeroDuration() ||
      options.stall_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("connect_timeout and stall_timeout must be positive");
  }
  if (options.initial_backoff < absl::ZeroDuration() ||
      options.max_backoff < options.initial_backoff ||
      options.max_retry_after < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "initial_backoff, max_backoff and max_retry_after must be non-negative, "
        "max_backoff at least initial_backoff");
  }
  if (!credentials.bearer_token.empty() && credentials.aws.has_value()) {
    return absl::InvalidArgumentError("credentials hold both a bearer token and AWS keys");
  }
  std::optional<UrlOrigin> origin;
  if (!credentials.bearer_token.empty() || credentials.aws.has_value()) {
    absl::StatusOr<UrlOrigin> parsed = OriginOf(credentials.endpoint);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the credentials' endpoint: ", parsed.status().message()));
    }
    origin = *std::move(parsed);
  }
  // Checked once here rather than on each request: a bad credential fails at start-up.
  RETURN_IF_ERROR(CurlExchange::Create(options, credentials).status());
  return std::unique_ptr<HttpClient>(
      new HttpClient(std::move(options), std::move(credentials), std::move(origin)));
}

HttpClient::HttpClient(TransferOptions options, Credentials credentials,
                       std::optional<UrlOrigin> credentials_origin)
    : options_(std::move(options)),
      credentials_(std::move(credentials)),
      credentials_origin_(std::move(credentials_origin)) {}

void HttpClient::Count(const TransferCounters& call) {
  attempts_ += call.attempts;
  retries_ += call.retries;
  redirects_ += call.redirects;
  bytes_fetched_ += call.bytes_fetched;
}

TransferCounters HttpClient::counters() const {
  TransferCounters sum;
  sum.attempts = attempts_.load();
  sum.retries = retries_.load();
  sum.redirects = redirects_.load();
  sum.bytes_fetched = bytes_fetched_.load();
  return sum;
}

absl::StatusOr<HttpResponse> HttpClient::Get(const GetRequest& request) {
  RETURN_IF_ERROR(
      CheckHeaders(request.headers, {"authorization", "proxy-authorization", "cookie", "host"}));
  if (request.max_body_bytes < 0) {
    return absl::InvalidArgumentError("max_body_bytes must not be negative");
  }
  FetchSpec spec;
  spec.url = request.url;
  spec.head = request.head;
  spec.follow_redirects = request.follow_redirects;
  spec.headers = request.headers;
  spec.cancel = request.cancel;
  StringSink sink(request.max_body_bytes);
  TransferCounters call;
  absl::StatusOr<FetchAnswer> answer =
      FetchWithRetries(options_, credentials_, credentials_origin_, spec, &sink, &call);
  Count(call);
  if (!answer.ok()) return answer.status();
  HttpResponse response;
  response.status = answer->status;
  response.headers = std::move(answer->headers);
  response.url = std::move(answer->url);
  // A 3xx's note is not the body asked for.
  if (response.status < 300) response.body = sink.Take();
  return response;
}

absl::StatusOr<DownloadResult> HttpClient::DownloadToFile(const DownloadRequest& request) {
  RETURN_IF_ERROR(CheckHeaders(
      request.headers, {"authorization", "proxy-authorization", "cookie", "host", "range"}));
  if (request.path.empty()) return absl::InvalidArgumentError("no path to download into");
  if (request.expected_size.has_value() && *request.expected_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected size ", *request.expected_size, " is negative"));
  }
  if (!request.expected_sha256.empty() && !IsHexSha256(request.expected_sha256)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the expected sha256 of ", request.path, " is not 64 hex digits"));
  }
  const std::string expected_sha256 = absl::AsciiStrToLower(request.expected_sha256);

  const int fd =
      ::open(request.path.c_str(),
             O_RDWR | O_CREAT | O_CLOEXEC | (request.resume_existing_file ? 0 : O_TRUNC), 0644);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open ", request.path, " for writing: ", std::strerror(errno)));
  }
  TransferCounters call;
  DownloadResult result;
  const absl::Status status = [&]() -> absl::Status {
    Sha256Stream hasher;
    int64_t start = 0;
    if (request.resume_existing_file) {
      struct stat info {};
      if (::fstat(fd, &info) != 0) {
        return absl::InternalError(
            absl::StrCat("cannot stat ", request.path, ": ", std::strerror(errno)));
      }
      start = info.st_size;
      if (request.expected_size.has_value() && start > *request.expected_size) {
        if (::ftruncate(fd, 0) != 0) {
          return absl::InternalError(
              absl::StrCat("cannot truncate ", request.path, ": ", std::strerror(errno)));
        }
        start = 0;
      }
      RETURN_IF_ERROR(hasher.UpdateFromFile(fd, start, request.path));
    }
    result.resumed_from = start;
    FileSink sink(fd, request.path, start, request.expected_size, &hasher,
                  options_.progress_interval, request.on_progress);
    // A resumed file that is already whole needs no request (a range past the end is a 416).
    if (!(request.expected_size.has_value() && start == *request.expected_size && start > 0)) {
      FetchSpec spec;
      spec.url = request.url;
      spec.headers = request.headers;
      spec.cancel = request.cancel;
      const absl::StatusOr<FetchAnswer> answer =
          FetchWithRetries(options_, credentials_, credentials_origin_, spec, &sink, &call);
      if (!answer.ok()) return answer.status();
    }
    if (absl::Status finished = sink.Finish(); !finished.ok()) {
      return absl::Status(finished.code(), absl::StrCat("GET ", UrlForMessages(request.url), ": ",
                                                        finished.message()));
    }
    result.bytes = sink.written();
    result.sha256 = hasher.HexDigest();
    if (!expected_sha256.empty() && result.sha256 != expected_sha256) {
      return absl::DataLossError(absl::StrCat("GET ", UrlForMessages(request.url), ": sha256 ",
                                              result.sha256, " differs from the listing's ",
                                              expected_sha256));
    }
    return absl::OkStatus();
  }();
  Count(call);
  result.counters = call;
  const bool closed = ::close(fd) == 0;
  if (status.ok() && !closed) {
    ::unlink(request.path.c_str());
    return absl::InternalError(
        absl::StrCat("cannot close ", request.path, ": ", std::strerror(errno)));
  }
  if (!status.ok()) {
    if (!request.keep_partial_file) ::unlink(request.path.c_str());
    return status;
  }
  return result;
}

}  // namespace anisoscope::transfer
