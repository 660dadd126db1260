// The flags of remote sources (issue 38): where the Hub and S3 are (--hub-endpoint,
// --hub-token-file, --s3-endpoint, --s3-region) and the node's cache of fetched files
// (--cache-dir, --cache-max-bytes), and how long a download may stall (--fetch-stall-timeout).
// Declared once, for anisoscope-worker and for
// anisoscope-server (which lists with the endpoints and passes every one of these flags on to
// its embedded worker processes). Plain functions; not thread-safe against setenv.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "sources/endpoints/source_endpoints.h"

namespace anisoscope::worker {

// --cache-max-bytes' default: 50 GiB, a few steps of a 7B model or a whole small series.
inline constexpr uint64_t kDefaultCacheMaxBytes = uint64_t{50} << 30;

struct SourceOptions {
  // --hub-endpoint, --hub-token-file, --s3-endpoint, --s3-region (resolved against the
  // environment by sources::ResolveSourceEndpoints).
  sources::SourceEndpointFlags endpoints;
  // --cache-dir: the node's cache of fetched checkpoint files (the Hugging Face cache layout,
  // shared by the node's workers); empty: DefaultCacheDir(), when the first remote step comes.
  std::string cache_dir;
  // --cache-max-bytes: the bound on the cache's files (blobs plus downloads in progress).
  uint64_t cache_max_bytes = kDefaultCacheMaxBytes;
  // --fetch-stall-timeout: seconds a download may receive no byte before it is abandoned and
  // tried again (transfer::TransferOptions::stall_timeout).
  double fetch_stall_timeout_seconds = 60;
};

// Adds the flags onto `options` (which must outlive `app`) and returns them.
std::vector<CLI::Option*> AddSourceFlags(CLI::App& app, SourceOptions& options);

// The anisoscope-worker arguments that give a child worker the same flags (those given; an
// unset one lets the child resolve it from the same environment).
std::vector<std::string> WorkerSourceArgs(const SourceOptions& options);

// The Hugging Face cache a user already has, as huggingface_hub finds it: $HF_HUB_CACHE, else
// $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
std::string DefaultCacheDir();

// options.cache_dir, or DefaultCacheDir() when it is empty.
std::string CacheDirOf(const SourceOptions& options);

}  // namespace anisoscope::worker
