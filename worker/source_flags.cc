#include "worker/source_flags.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace anisoscope::worker {
namespace {

const char* NonEmptyEnv(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

std::string Home() {
  if (const char* home = NonEmptyEnv("HOME")) return home;
  const passwd* entry = getpwuid(getuid());
  return entry != nullptr && entry->pw_dir != nullptr ? entry->pw_dir : "/";
}

}  // namespace

std::vector<CLI::Option*> AddSourceFlags(CLI::App& app, SourceOptions& options) {
  std::vector<CLI::Option*> added;
  added.push_back(app.add_option("--hub-endpoint", options.endpoints.hub_endpoint,
                                 "the Hugging Face Hub (or a mirror) remote steps are read from "
                                 "(default: $HF_ENDPOINT, else https://huggingface.co)"));
  added.push_back(app.add_option("--hub-token-file", options.endpoints.hub_token_file,
                                 "file holding the Hub token sent to --hub-endpoint only "
                                 "(default: $HF_TOKEN, else none: public repos)"));
  added.push_back(
      app.add_option("--s3-endpoint", options.endpoints.s3_endpoint,
                     "S3 or an S3-compatible store (MinIO, Ceph, R2), path-style "
                     "(default: $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, else "
                     "https://s3.REGION.amazonaws.com); keys from $AWS_ACCESS_KEY_ID "
                     "and $AWS_SECRET_ACCESS_KEY or ~/.aws/credentials, else unsigned"));
  added.push_back(app.add_option("--s3-region", options.endpoints.s3_region,
                                 "the region S3 requests are signed for (default: $AWS_REGION, "
                                 "$AWS_DEFAULT_REGION, else us-east-1)"));
  added.push_back(app.add_option("--cache-dir", options.cache_dir,
                                 "the node's cache of fetched checkpoint files, shared by its "
                                 "workers, in the Hugging Face cache layout (default: "
                                 "$HF_HUB_CACHE, else $HF_HOME/hub, else "
                                 "~/.cache/huggingface/hub: an existing Hugging Face cache is "
                                 "reused); made at the first remote step"));
  added.push_back(app.add_option("--cache-max-bytes", options.cache_max_bytes,
                                 "bound on --cache-dir's files (e.g. 200GiB); least recently "
                                 "used steps not in use are evicted to stay under it")
                      ->default_str("50GiB")
                      ->transform(CLI::AsSizeValue(/*kb_is_1000=*/false))
                      ->check(CLI::PositiveNumber));
  added.push_back(app.add_option("--fetch-stall-timeout", options.fetch_stall_timeout_seconds,
                                 "seconds a download may receive no byte before it is "
                                 "abandoned and tried again (with Range, from where it stopped)")
                      ->capture_default_str()
                      ->check(CLI::Range(0.1, 86400.0)));
  return added;
}

std::vector<std::string> WorkerSourceArgs(const SourceOptions& options) {
  std::vector<std::string> args;
  const auto add = [&args](const char* flag, const std::string& value) {
    if (value.empty()) return;
    args.push_back(flag);
    args.push_back(value);
  };
  add("--hub-endpoint", options.endpoints.hub_endpoint);
  add("--hub-token-file", options.endpoints.hub_token_file);
  add("--s3-endpoint", options.endpoints.s3_endpoint);
  add("--s3-region", options.endpoints.s3_region);
  add("--cache-dir", options.cache_dir);
  add("--cache-max-bytes", std::to_string(options.cache_max_bytes));
  add("--fetch-stall-timeout", absl::StrCat(options.fetch_stall_timeout_seconds));
  return args;
}

std::string DefaultCacheDir() {
  if (const char* hub_cache = NonEmptyEnv("HF_HUB_CACHE")) return hub_cache;
  if (const char* hf_home = NonEmptyEnv("HF_HOME")) return absl::StrCat(hf_home, "/hub");
  if (const char* xdg = NonEmptyEnv("XDG_CACHE_HOME")) {
    return absl::StrCat(xdg, "/huggingface/hub");
  }
  return absl::StrCat(Home(), "/.cache/huggingface/hub");
}

std::string CacheDirOf(const SourceOptions& options) {
  return options.cache_dir.empty() ? DefaultCacheDir() : options.cache_dir;
}

}  // namespace anisoscope::worker
