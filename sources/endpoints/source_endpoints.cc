#include "sources/endpoints/source_endpoints.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/file_gate.h"
#include "common/status_macros.h"
#include "sources/transfer/url_parts.h"

namespace anisoscope::sources {
namespace {

constexpr char kDefaultHubEndpoint[] = "https://huggingface.co";
constexpr char kDefaultRegion[] = "us-east-1";

// The variable's value, or nullopt when unset or empty.
std::optional<std::string> Env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

// `value` from the flag, else from the first variable set, else `fallback`; `origin` says
// which it was, for errors.
std::string Pick(const std::string& flag_value, absl::string_view flag,
                 std::initializer_list<const char*> variables, std::string fallback,
                 std::string* origin) {
  if (!flag_value.empty()) {
    *origin = std::string(flag);
    return flag_value;
  }
  for (const char* variable : variables) {
    if (std::optional<std::string> value = Env(variable)) {
      *origin = absl::StrCat("$", variable);
      return *std::move(value);
    }
  }
  *origin = absl::StrCat(flag, "'s default");
  return fallback;
}

// An endpoint without its trailing '/': an absolute http(s) URL without user info, query or
// fragment.
absl::StatusOr<std::string> CheckEndpoint(std::string url, absl::string_view origin) {
  while (absl::EndsWith(url, "/")) url.pop_back();
  const absl::StatusOr<transfer::UrlOrigin> parsed = transfer::OriginOf(url);
  if (!parsed.ok() || absl::StrContains(url, '?') || absl::StrContains(url, '#') ||
      absl::StrContains(url, '@')) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": '", transfer::UrlForMessages(url),
                     "' is not an http(s) URL without user, query or fragment"));
  }
  return url;
}

// A secret as it may go into a header: printable ASCII without spaces. Never quoted.
absl::Status CheckSecret(absl::string_view secret, absl::string_view origin) {
  if (secret.empty()) return absl::InvalidArgumentError(absl::StrCat(origin, " is empty"));
  for (const char c : secret) {
    if (c <= ' ' || c > '~') {
      return absl::InvalidArgumentError(
          absl::StrCat(origin, " holds a space or a byte outside printable ASCII"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  absl::StatusOr<std::string> text = FileGate::Host().ReadFile(path, kMaxTokenFileBytes);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--hub-token-file: ", path,
                                                   ": cannot be read (a regular file of at most ",
                                                   kMaxTokenFileBytes, " bytes)"));
  }
  std::string token(absl::StripAsciiWhitespace(*text));
  RETURN_IF_ERROR(CheckSecret(token, absl::StrCat("--hub-token-file ", path)));
  return token;
}

absl::Status CheckRegion(absl::string_view region, absl::string_view origin) {
  bool ok = !region.empty() && region.size() <= 64;
  for (const char c : region)
    ok = ok && (absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-');
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": a region is 1-64 of [a-z0-9-], e.g. us-east-1"));
  }
  return absl::OkStatus();
}

std::string HomeDirectory() {
  if (std::optional<std::string> home = Env("HOME")) return *home;
  if (const passwd* entry = getpwuid(getuid()); entry != nullptr && entry->pw_dir != nullptr) {
    return entry->pw_dir;
  }
  return "";
}

// The keys of the environment, else of the shared credentials file, else nullopt.
absl::StatusOr<std::optional<transfer::AwsSigV4Keys>> AwsKeys(const std::string& region) {
  const std::optional<std::string> id = Env("AWS_ACCESS_KEY_ID");
  const std::optional<std::string> secret = Env("AWS_SECRET_ACCESS_KEY");
  if (id.has_value() != secret.has_value()) {
    return absl::InvalidArgumentError(
        "$AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY must be set together");
  }
  std::optional<transfer::AwsSigV4Keys> keys;
  if (id.has_value()) {
    keys.emplace();
    keys->access_key_id = *id;
    keys->secret_access_key = *secret;
    keys->session_token = Env("AWS_SESSION_TOKEN").value_or("");
    RETURN_IF_ERROR(CheckSecret(keys->access_key_id, "$AWS_ACCESS_KEY_ID"));
    RETURN_IF_ERROR(CheckSecret(keys->secret_access_key, "$AWS_SECRET_ACCESS_KEY"));
    if (!keys->session_token.empty()) {
      RETURN_IF_ERROR(CheckSecret(keys->session_token, "$AWS_SESSION_TOKEN"));
    }
  } else {
    std::string path;
    if (std::optional<std::string> file = Env("AWS_SHARED_CREDENTIALS_FILE")) {
      path = *file;
    } else if (const std::string home = HomeDirectory(); !home.empty()) {
      path = absl::StrCat(home, "/.aws/credentials");
    }
    std::error_code error;
    if (path.empty() || !std::filesystem::exists(path, error)) return keys;
    const std::optional<std::string> named_profile = Env("AWS_PROFILE");
    const std::string profile = named_profile.value_or("default");
    absl::StatusOr<std::string> text = FileGate::Host().ReadFile(path, kMaxAwsCredentialsFileBytes);
    if (!text.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("the AWS credentials file ", path,
                                                     " cannot be read (a regular file of at most ",
                                                     kMaxAwsCredentialsFileBytes, " bytes)"));
    }
    ASSIGN_OR_RETURN(
        keys, ParseAwsCredentials(*text, profile, absl::StrCat("the AWS credentials file ", path)));
    if (!keys.has_value() && named_profile.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat("$AWS_PROFILE: the AWS credentials file ",
                                                     path, " holds no keys for profile '",
                                                     absl::CHexEscape(profile), "'"));
    }
  }
  if (keys.has_value()) keys->region = region;
  return keys;
}

}  // namespace

absl::StatusOr<std::optional<transfer::AwsSigV4Keys>> ParseAwsCredentials(absl::string_view text,
                                                                          absl::string_view profile,
                                                                          absl::string_view where) {
  transfer::AwsSigV4Keys keys;
  bool in_profile = false;
  bool seen = false;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[') {
      if (!absl::ConsumeSuffix(&line, "]")) {
        in_profile = false;
        continue;
      }
      line.remove_prefix(1);
      in_profile = absl::StripAsciiWhitespace(line) == profile;
      seen = seen || in_profile;
      continue;
    }
    if (!in_profile) continue;
    const size_t equals = line.find('=');
    if (equals == absl::string_view::npos) continue;
    const std::string key =
        absl::AsciiStrToLower(absl::StripAsciiWhitespace(line.substr(0, equals)));
    const std::string value(absl::StripAsciiWhitespace(line.substr(equals + 1)));
    if (key == "aws_access_key_id") keys.access_key_id = value;
    if (key == "aws_secret_access_key") keys.secret_access_key = value;
    if (key == "aws_session_token") keys.session_token = value;
  }
  if (!seen || (keys.access_key_id.empty() && keys.secret_access_key.empty())) {
    return std::optional<transfer::AwsSigV4Keys>();
  }
  const std::string named = absl::StrCat(where, ", profile '", absl::CHexEscape(profile), "'");
  if (keys.access_key_id.empty() || keys.secret_access_key.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(named, ": aws_access_key_id and aws_secret_access_key go together"));
  }
  RETURN_IF_ERROR(CheckSecret(keys.access_key_id, absl::StrCat(named, ": aws_access_key_id")));
  RETURN_IF_ERROR(
      CheckSecret(keys.secret_access_key, absl::StrCat(named, ": aws_secret_access_key")));
  if (!keys.session_token.empty()) {
    RETURN_IF_ERROR(CheckSecret(keys.session_token, absl::StrCat(named, ": aws_session_token")));
  }
  return std::optional<transfer::AwsSigV4Keys>(std::move(keys));
}

absl::StatusOr<SourceEndpoints> ResolveSourceEndpoints(const SourceEndpointFlags& flags) {
  SourceEndpoints out;
  std::string origin;  // the flag or variable each value came from, for errors
  std::string hub =
      Pick(flags.hub_endpoint, "--hub-endpoint", {"HF_ENDPOINT"}, kDefaultHubEndpoint, &origin);
  ASSIGN_OR_RETURN(out.hub_endpoint, CheckEndpoint(std::move(hub), origin));
  out.s3_region = Pick(flags.s3_region, "--s3-region", {"AWS_REGION", "AWS_DEFAULT_REGION"},
                       kDefaultRegion, &origin);
  RETURN_IF_ERROR(CheckRegion(out.s3_region, origin));
  std::string s3 =
      Pick(flags.s3_endpoint, "--s3-endpoint", {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"},
           absl::StrCat("https://s3.", out.s3_region, ".amazonaws.com"), &origin);
  ASSIGN_OR_RETURN(out.s3_endpoint, CheckEndpoint(std::move(s3), origin));

  out.hub.endpoint = out.hub_endpoint;
  if (!flags.hub_token_file.empty()) {
    ASSIGN_OR_RETURN(out.hub.bearer_token, ReadTokenFile(flags.hub_token_file));
  } else if (std::optional<std::string> token = Env("HF_TOKEN")) {
    out.hub.bearer_token = std::string(absl::StripAsciiWhitespace(*token));
    RETURN_IF_ERROR(CheckSecret(out.hub.bearer_token, "$HF_TOKEN"));
  }
  out.s3.endpoint = out.s3_endpoint;
  ASSIGN_OR_RETURN(out.s3.aws, AwsKeys(out.s3_region));
  return out;
}

absl::StatusOr<SourceClients> MakeSourceClients(const SourceEndpoints& endpoints,
                                                const transfer::TransferOptions& options) {
  SourceClients clients;
  absl::StatusOr<std::unique_ptr<transfer::HttpClient>> hub =
      transfer::HttpClient::Create(options, endpoints.hub);
  if (!hub.ok()) {
    return absl::Status(hub.status().code(),
                        absl::StrCat("the Hub's client: ", hub.status().message()));
  }
  absl::StatusOr<std::unique_ptr<transfer::HttpClient>> s3 =
      transfer::HttpClient::Create(options, endpoints.s3);
  if (!s3.ok()) {
    return absl::Status(s3.status().code(), absl::StrCat("the S3 client: ", s3.status().message()));
  }
  clients.hub = *std::move(hub);
  clients.s3 = *std::move(s3);
  return clients;
}

}  // namespace anisoscope::sources
