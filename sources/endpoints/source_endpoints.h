// Where a node reads remote checkpoints from, and with what credentials: the operator's
// flags (--hub-endpoint, --hub-token-file, --s3-endpoint, --s3-region), declared by the
// server and the worker alike, resolved against the usual environment (HF_ENDPOINT,
// HF_TOKEN, AWS_*) and ~/.aws/credentials, then made into the Hub's and S3's HttpClients.
// The endpoints are always the operator's: nothing a caller or the server sends changes them.
//
// Errors name the flag, variable or file, never a secret. Files are read with a size bound.
// ResolveSourceEndpoints reads the environment and blocks on small file reads; call it at
// start-up (getenv is not safe against a concurrent setenv). Plain data otherwise.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sources/transfer/http_client.h"
#include "sources/transfer/transfer_options.h"

namespace anisoscope::sources {

// The flags of both the server and the worker, as given (empty: not given).
struct SourceEndpointFlags {
  std::string hub_endpoint;    // --hub-endpoint; empty: $HF_ENDPOINT, else https://huggingface.co
  std::string hub_token_file;  // --hub-token-file; empty: $HF_TOKEN if set (else no token)
  // --s3-endpoint; empty: $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, else
  // https://s3.REGION.amazonaws.com
  std::string s3_endpoint;
  std::string s3_region;  // --s3-region; empty: $AWS_REGION, $AWS_DEFAULT_REGION, else us-east-1
};

// The flags resolved.
struct SourceEndpoints {
  std::string hub_endpoint;  // http(s)://HOST[:PORT][/PATH], without trailing '/'
  std::string s3_endpoint;   // likewise
  std::string s3_region;     // what S3 requests are signed for
  // endpoint = hub_endpoint; bearer_token when a token is known.
  transfer::Credentials hub;
  // endpoint = s3_endpoint; aws keys from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY /
  // AWS_SESSION_TOKEN, else the shared credentials file ($AWS_SHARED_CREDENTIALS_FILE, else
  // ~/.aws/credentials; profile $AWS_PROFILE, else "default"); none: unsigned requests.
  transfer::Credentials s3;
};

// Bounds on the files read for credentials.
inline constexpr uint64_t kMaxTokenFileBytes = 64 << 10;
inline constexpr uint64_t kMaxAwsCredentialsFileBytes = 1 << 20;

// INVALID_ARGUMENT naming the flag or variable for an endpoint that is not an absolute
// http(s) URL without query or fragment, an unreadable, oversized or empty token file, a
// region that is not a region name, half a key pair; the credentials file's errors name it.
absl::StatusOr<SourceEndpoints> ResolveSourceEndpoints(const SourceEndpointFlags& flags);

// One profile of an AWS shared credentials file (INI: "[name]" sections, "key = value"
// lines, '#' or ';' comments): aws_access_key_id, aws_secret_access_key and
// aws_session_token. nullopt when the profile is absent or holds no key id; INVALID_ARGUMENT
// naming `where` and the profile when it holds only half a key pair. Exposed for tests.
absl::StatusOr<std::optional<transfer::AwsSigV4Keys>> ParseAwsCredentials(absl::string_view text,
                                                                          absl::string_view profile,
                                                                          absl::string_view where);

// The Hub's and S3's clients, each sending its credentials only to its endpoint's origin.
struct SourceClients {
  std::unique_ptr<transfer::HttpClient> hub;
  std::unique_ptr<transfer::HttpClient> s3;
};

// INVALID_ARGUMENT (HttpClient::Create's, prefixed with which client) for options out of range.
absl::StatusOr<SourceClients> MakeSourceClients(const SourceEndpoints& endpoints,
                                                const transfer::TransferOptions& options);

}  // namespace anisoscope::sources
