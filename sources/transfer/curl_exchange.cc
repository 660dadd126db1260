#include "sources/transfer/curl_exchange.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/version.h"

namespace anisoscope::transfer {
namespace {

// The most of a non-2xx answer's body read (and dropped) before the connection is closed.
constexpr int64_t kMaxDroppedBody = 64 << 10;

// SHA-256 of an empty payload: what libcurl 7.88 signs as a GET's payload hash, and what S3
// wants in x-amz-content-sha256 (curl 7.88 does not send that field itself).
constexpr char kEmptyPayloadSha256[] =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

bool HasLineBreakOrNul(absl::string_view text) {
  return text.find_first_of(absl::string_view("\r\n\0", 3)) != absl::string_view::npos;
}

bool IsSigningName(absl::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!absl::ascii_islower(static_cast<unsigned char>(c)) &&
        !absl::ascii_isdigit(static_cast<unsigned char>(c)) && c != '-') {
      return false;
    }
  }
  return true;
}

struct HeaderList {
  curl_slist* list = nullptr;
  ~HeaderList() { curl_slist_free_all(list); }
  void Add(const std::string& line) { list = curl_slist_append(list, line.c_str()); }
};

long Milliseconds(absl::Duration duration) {
  return static_cast<long>(std::max<int64_t>(1, absl::ToInt64Milliseconds(duration)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<CurlExchange>> CurlExchange::Create(const TransferOptions& options,
                                                                   const Credentials& credentials) {
  static const CURLcode initialized = curl_global_init(CURL_GLOBAL_DEFAULT);
  if (initialized != CURLE_OK) return absl::InternalError("libcurl failed to initialise");
  if (HasLineBreakOrNul(credentials.bearer_token)) {
    return absl::InvalidArgumentError("the bearer token holds a line break or NUL");
  }
  if (credentials.aws.has_value()) {
    const AwsSigV4Keys& aws = *credentials.aws;
    if (aws.access_key_id.empty() || aws.secret_access_key.empty()) {
      return absl::InvalidArgumentError("the AWS access key id or secret key is empty");
    }
    if (HasLineBreakOrNul(aws.access_key_id) || HasLineBreakOrNul(aws.secret_access_key) ||
        HasLineBreakOrNul(aws.session_token)) {
      return absl::InvalidArgumentError("an AWS key or session token holds a line break or NUL");
    }
    if (!IsSigningName(aws.region) || !IsSigningName(aws.service)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the AWS region and service must be lower-case letters, digits and '-' (region \"",
          absl::CHexEscape(aws.region), "\", service \"", absl::CHexEscape(aws.service), "\")"));
    }
  }
  CURLM* multi = curl_multi_init();
  CURL* easy = multi != nullptr ? curl_easy_init() : nullptr;
  if (easy == nullptr) {
    if (multi != nullptr) curl_multi_cleanup(multi);
    return absl::ResourceExhaustedError("libcurl could not make a handle");
  }
  return std::unique_ptr<CurlExchange>(new CurlExchange(options, credentials, multi, easy));
}

CurlExchange::CurlExchange(const TransferOptions& options, const Credentials& credentials,
                           CURLM* multi, CURL* easy)
    : options_(options), credentials_(credentials), multi_(multi), easy_(easy) {}

CurlExchange::~CurlExchange() {
  curl_multi_cleanup(multi_);
  curl_easy_cleanup(easy_);
}

size_t CurlExchange::OnHeader(char* data, size_t size, size_t count, void* self_pointer) {
  auto* self = static_cast<CurlExchange*>(self_pointer);
  const size_t bytes = size * count;
  self->last_byte_ = Clock::now();
  ExchangeOutcome& outcome = *self->outcome_;
  const absl::string_view line(data, bytes);
  if (!outcome.headers.AddLine(line)) {
    outcome.sink_status = absl::ResourceExhaustedError(
        absl::StrCat("the answer's header fields run past ", ResponseHeaders::kMaxBytes, " bytes"));
    return 0;
  }
  // Only the blank line after the answer's fields matters here; a chunked body's trailers
  // end with one too, after the body has begun.
  if ((line != "\r\n" && line != "\n") || outcome.fields_complete) return bytes;
  // A 1xx is followed by the real answer; so is a proxy's answer to CONNECT (no response
  // code yet).
  long status = 0;
  curl_easy_getinfo(self->easy_, CURLINFO_RESPONSE_CODE, &status);
  if (status < 200) return bytes;
  outcome.http_status = static_cast<int>(status);
  outcome.fields_complete = true;
  if (status >= 200 && status < 300 && self->sink_ != nullptr) {
    outcome.sink_status = self->sink_->Begin(outcome.http_status, outcome.headers);
    if (!outcome.sink_status.ok()) return 0;
  }
  return bytes;
}

size_t CurlExchange::OnBody(char* data, size_t size, size_t count, void* self_pointer) {
  auto* self = static_cast<CurlExchange*>(self_pointer);
  const size_t bytes = size * count;
  self->last_byte_ = Clock::now();
  ExchangeOutcome& outcome = *self->outcome_;
  outcome.body_bytes += static_cast<int64_t>(bytes);
  if (self->Cancelled()) {
    outcome.cancelled = true;
    return 0;
  }
  if (outcome.http_status >= 200 && outcome.http_status < 300) {
    if (self->sink_ == nullptr) return bytes;
    outcome.sink_status = self->sink_->Write(absl::string_view(data, bytes));
    return outcome.sink_status.ok() ? bytes : 0;
  }
  // An error page or a redirect's note: never shown, so read only a little of it.
  self->dropped_bytes_ += static_cast<int64_t>(bytes);
  return self->dropped_bytes_ <= kMaxDroppedBody ? bytes : 0;
}

int CurlExchange::OnProgress(void* self_pointer, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* self = static_cast<CurlExchange*>(self_pointer);
  if (self->Cancelled()) {
    self->outcome_->cancelled = true;
    return 1;
  }
  if (Clock::now() - self->last_byte_ < absl::ToChronoNanoseconds(self->options_.stall_timeout)) {
    return 0;
  }
  self->outcome_->stalled = true;
  return 1;
}

CURLcode CurlExchange::Perform() {
  if (curl_multi_add_handle(multi_, easy_) != CURLM_OK) return CURLE_FAILED_INIT;
  CURLcode code = CURLE_OK;
  bool done = false;
  while (!done) {
    int running = 0;
    if (curl_multi_perform(multi_, &running) != CURLM_OK) {
      code = CURLE_OUT_OF_MEMORY;
      break;
    }
    int queued = 0;
    while (CURLMsg* message = curl_multi_info_read(multi_, &queued)) {
      if (message->msg == CURLMSG_DONE && message->easy_handle == easy_) {
        code = message->data.result;
        done = true;
      }
    }
    if (done) break;
    if (running == 0) {  // ended without a result: not expected of libcurl
      code = CURLE_GOT_NOTHING;
      break;
    }
    // Between callbacks (a quiet server, a slow resolve) the flag is read here.
    if (Cancelled()) {
      outcome_->cancelled = true;
      code = CURLE_ABORTED_BY_CALLBACK;
      break;
    }
    if (curl_multi_poll(multi_, nullptr, 0, static_cast<int>(Milliseconds(kCancelPoll)), nullptr) !=
        CURLM_OK) {
      code = CURLE_OUT_OF_MEMORY;
      break;
    }
  }
  // Mid-transfer, this closes the connection rather than returning it to the cache.
  curl_multi_remove_handle(multi_, easy_);
  return code;
}

ExchangeOutcome CurlExchange::Run(const ExchangeRequest& request, BodySink* sink) {
  ExchangeOutcome outcome;
  cancel_ = request.cancel;
  sink_ = sink;
  outcome_ = &outcome;
  dropped_bytes_ = 0;
  last_byte_ = Clock::now();

  // A fresh set of options for every request (the connection cache survives a reset), so
  // that nothing of one hop's credentials carries into the next.
  curl_easy_reset(easy_);
  curl_easy_setopt(easy_, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(easy_, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(easy_, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(easy_, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy_, CURLOPT_TCP_KEEPALIVE, 1L);
  const std::string user_agent = absl::StrCat("anisoscope/", std::string(ProjectVersion()));
  curl_easy_setopt(easy_, CURLOPT_USERAGENT, user_agent.c_str());
  curl_easy_setopt(easy_, CURLOPT_CONNECTTIMEOUT_MS, Milliseconds(options_.connect_timeout));
  curl_easy_setopt(easy_, CURLOPT_BUFFERSIZE, 256L << 10);
  if (!options_.ca_file.empty()) curl_easy_setopt(easy_, CURLOPT_CAINFO, options_.ca_file.c_str());
  curl_slist* connect_to = nullptr;
  for (const std::string& entry : options_.connect_to) {
    connect_to = curl_slist_append(connect_to, entry.c_str());
  }
  curl_easy_setopt(easy_, CURLOPT_CONNECT_TO, connect_to);
  if (request.head) curl_easy_setopt(easy_, CURLOPT_NOBODY, 1L);

  HeaderList headers;
  for (const std::string& line : request.headers) headers.Add(line);
  // As a field of our own rather than CURLOPT_RANGE, so that SigV4 signs it too.
  if (request.range_start > 0) headers.Add(absl::StrCat("Range: bytes=", request.range_start, "-"));
  if (request.with_credentials) {
    if (!credentials_.bearer_token.empty()) {
      headers.Add(absl::StrCat("Authorization: Bearer ", credentials_.bearer_token));
    }
    if (credentials_.aws.has_value()) {
      const AwsSigV4Keys& aws = *credentials_.aws;
      const std::string provider = absl::StrCat("aws:amz:", aws.region, ":", aws.service);
      curl_easy_setopt(easy_, CURLOPT_AWS_SIGV4, provider.c_str());
      curl_easy_setopt(easy_, CURLOPT_USERNAME, aws.access_key_id.c_str());
      curl_easy_setopt(easy_, CURLOPT_PASSWORD, aws.secret_access_key.c_str());
      if (!aws.session_token.empty()) {
        headers.Add(absl::StrCat("x-amz-security-token: ", aws.session_token));
      }
      if (aws.service == "s3") {
        headers.Add(absl::StrCat("x-amz-content-sha256: ", kEmptyPayloadSha256));
      }
    }
  }
  curl_easy_setopt(easy_, CURLOPT_HTTPHEADER, headers.list);

  curl_easy_setopt(easy_, CURLOPT_HEADERFUNCTION, &CurlExchange::OnHeader);
  curl_easy_setopt(easy_, CURLOPT_HEADERDATA, this);
  curl_easy_setopt(easy_, CURLOPT_WRITEFUNCTION, &CurlExchange::OnBody);
  curl_easy_setopt(easy_, CURLOPT_WRITEDATA, this);
  curl_easy_setopt(easy_, CURLOPT_XFERINFOFUNCTION, &CurlExchange::OnProgress);
  curl_easy_setopt(easy_, CURLOPT_XFERINFODATA, this);
  curl_easy_setopt(easy_, CURLOPT_NOPROGRESS, 0L);

  outcome.code = Perform();

  char* location = nullptr;
  if (curl_easy_getinfo(easy_, CURLINFO_REDIRECT_URL, &location) == CURLE_OK &&
      location != nullptr) {
    outcome.redirect_url = location;
  }
  curl_off_t retry_after = 0;
  if (curl_easy_getinfo(easy_, CURLINFO_RETRY_AFTER, &retry_after) == CURLE_OK && retry_after > 0) {
    outcome.retry_after = absl::Seconds(retry_after);
  }
  // Nothing set above may outlive this call: the next Run sets its own.
  curl_easy_setopt(easy_, CURLOPT_HTTPHEADER, nullptr);
  curl_easy_setopt(easy_, CURLOPT_CONNECT_TO, nullptr);
  curl_slist_free_all(connect_to);
  cancel_ = nullptr;
  sink_ = nullptr;
  outcome_ = nullptr;
  return outcome;
}

}  // namespace anisoscope::transfer
