// How an HttpClient fetches: retry, timeout and redirect bounds, and the credentials it
// may send (to one origin only). Plain data; the worker's and server's flags map onto it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace anisoscope::transfer {

struct TransferOptions {
  // Tries of one Get or DownloadToFile, the first included; a 429, a 5xx, a reset, a cut
  // body or a timeout is tried again until this many attempts have failed.
  int max_attempts = 6;
  // The pause before the first retry; each later one doubles it, up to max_backoff. The
  // pause is drawn uniformly from [half, all] of that (jitter, so that workers spread).
  absl::Duration initial_backoff = absl::Milliseconds(500);
  absl::Duration max_backoff = absl::Seconds(30);
  // A server's Retry-After is honoured (the pause is at least that long) up to this.
  absl::Duration max_retry_after = absl::Seconds(120);
  // Bound on opening a connection (DNS, TCP and TLS).
  absl::Duration connect_timeout = absl::Seconds(30);
  // An attempt that receives no byte (header or body) for this long is abandoned and
  // retried: a server that stalls never holds a worker.
  absl::Duration stall_timeout = absl::Seconds(60);
  // Redirects followed within one attempt (the Hub sends LFS files to a CDN: one hop).
  int max_redirects = 5;
  // curl's CURLOPT_CONNECT_TO entries, "HOST:PORT:CONNECT-TO-HOST:CONNECT-TO-PORT": pin an
  // endpoint to an address (and let tests send a real host name to 127.0.0.1).
  std::vector<std::string> connect_to;
  // TLS: a CA bundle file in place of the system's (empty: the system's).
  std::string ca_file;
  // How often a download's progress callback runs at most.
  absl::Duration progress_interval = absl::Milliseconds(500);
};

// AWS Signature V4 keys (S3 and S3-compatible stores), signed by libcurl
// (CURLOPT_AWS_SIGV4).
struct AwsSigV4Keys {
  std::string access_key_id;
  std::string secret_access_key;
  // A temporary credential's session token (AWS_SESSION_TOKEN), sent as
  // x-amz-security-token; empty for long-term keys.
  std::string session_token;
  std::string region = "us-east-1";
  // The signing name: "s3" for buckets; AWS's published test vectors use "service".
  std::string service = "s3";
};

// What a client may prove itself with. The secrets are sent only to `endpoint`'s origin
// (scheme, host and port): never to a host a redirect or a listing names, never into a log
// line or an error message.
struct Credentials {
  // The URL whose origin receives the secrets, e.g. "https://huggingface.co". Required when
  // a secret is set.
  std::string endpoint;
  // Sent as "Authorization: Bearer ..." (the Hub's HF_TOKEN).
  std::string bearer_token;
  // Every request to the endpoint is signed with these.
  std::optional<AwsSigV4Keys> aws;
};

// What a client has done: callers add these into their metrics.
struct TransferCounters {
  int64_t attempts = 0;       // requests started (each redirect hop counts once)
  int64_t retries = 0;        // attempts that followed a failed one
  int64_t redirects = 0;      // redirects followed
  int64_t bytes_fetched = 0;  // bytes received in answers' bodies (every status)

  void Add(const TransferCounters& other) {
    attempts += other.attempts;
    retries += other.retries;
    redirects += other.redirects;
    bytes_fetched += other.bytes_fetched;
  }
};

}  // namespace anisoscope::transfer
