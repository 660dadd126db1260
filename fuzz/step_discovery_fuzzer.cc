// Step discovery over a directory tree the input describes, one entry per line:
//   d PATH           a directory (parents made as needed)
//   f PATH<TAB>TEXT  a regular file holding TEXT (a Hugging Face cache ref: a commit)
//   l PATH<TAB>DEST  a symbolic link to DEST, relative to the link's directory
// PATH and DEST are relative, without "." or ".." components; other lines are ignored.
// Both layouts (named step directories, a cache repository's refs/ and snapshots/) are
// reached. An answer must list distinct steps in increasing order, each a directory under
// the tree, or the target aborts.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "analysis/checkpoint/step_discovery.h"
#include "fuzz/amplification_guard.h"
#include "fuzz/fuzz_input.h"

namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxEntries = 64;

// `text` as a relative path that stays inside the tree; empty when it would not.
fs::path InsidePath(std::string_view text) {
  if (text.empty() || text.size() > 200 || text.find('\0') != std::string_view::npos) return {};
  const fs::path path(text);
  if (path.is_absolute()) return {};
  for (const fs::path& part : path) {
    if (part == "." || part == ".." || part.empty()) return {};
  }
  return path;
}

void MakeEntry(const fs::path& root, std::string_view line) {
  if (line.size() < 3 || line[1] != ' ') return;
  const char kind = line[0];
  std::string_view rest = line.substr(2), argument;
  if (const size_t tab = rest.find('\t'); tab != std::string_view::npos) {
    argument = rest.substr(tab + 1);
    rest = rest.substr(0, tab);
  }
  const fs::path relative = InsidePath(rest);
  if (relative.empty()) return;
  const fs::path path = root / relative;
  std::error_code ignored;
  if (kind == 'd') {
    fs::create_directories(path, ignored);
  } else if (kind == 'f' || kind == 'l') {
    fs::create_directories(path.parent_path(), ignored);
    if (kind == 'f') {
      std::ofstream(path, std::ios::binary | std::ios::trunc)
          .write(argument.data(), static_cast<std::streamsize>(argument.size()));
    } else if (const fs::path destination = InsidePath(argument); !destination.empty()) {
      fs::create_symlink(destination, path, ignored);
    }
  }
}

void Check(bool condition) {
  if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const anisoscope::fuzz::AmplificationGuard guard("step_discovery_fuzzer", size);
  using namespace anisoscope;
  const fs::path root = fuzz::InputDirectory() / "steps";
  std::error_code ignored;
  fs::remove_all(root, ignored);
  fs::create_directories(root);
  std::string_view input = fuzz::AsText(data, size);
  for (size_t entries = 0; !input.empty() && entries < kMaxEntries; ++entries) {
    const size_t end = input.find('\n');
    MakeEntry(root, input.substr(0, end));
    input = end == std::string_view::npos ? std::string_view() : input.substr(end + 1);
  }
  // Through a gate beneath the tree, as the server reads a caller's folder.
  const absl::StatusOr<FileGate> gate = FileGate::Beneath({root.string()});
  Check(gate.ok());
  const auto steps = analysis::DiscoverSteps(root, *gate);
  if (!steps.ok()) return 0;
  Check(!steps->empty());
  const std::string inside = root.string() + "/";
  for (size_t i = 0; i < steps->size(); ++i) {
    const analysis::DiscoveredStep& found = (*steps)[i];
    Check(found.step >= 0);
    Check(i == 0 || (*steps)[i - 1].step < found.step);
    Check(found.path.string().rfind(inside, 0) == 0);
    Check(fs::is_directory(found.path, ignored));
  }
  return 0;
}
