// A checkpoint's content fingerprint: XXH3-128 (Debian's libxxhash) over the bytes of its
// weight files in order, each followed by its length, so that two step names serving the
// same weights (EleutherAI/pythia issues 205 and 206) are recognised whatever the files are
// called. Cheap enough to take on every step: 4 to 5 GB/s from the page cache here, 0.1 s
// alone or 0.1 to 0.2 s inside a 3.6 s BERT-base CPU step (extract_bench prints it). Pure
// function of the files; thread-safe.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/file_gate.h"

namespace anisoscope::analysis {

// "xxh3-128:" and 32 lowercase hex digits, each file opened through `gate`. Errors name the
// file that cannot be read.
absl::StatusOr<std::string> FingerprintFiles(const std::vector<std::filesystem::path>& files,
                                             const FileGate& gate);

// Whether `text` has the form FingerprintFiles gives (an upload's check).
bool IsFingerprint(std::string_view text);

}  // namespace anisoscope::analysis
