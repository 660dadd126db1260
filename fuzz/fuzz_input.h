// Helpers of the fuzz targets: the parsers under test read files, so each input is written
// to a file in a per-process directory on /dev/shm (tmpfs) first.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace anisoscope::fuzz {

// A directory of this process, made once, on tmpfs when there is one; removed at exit.
inline const std::filesystem::path& InputDirectory() {
  // Never destroyed: the exit handler still needs it after static destructors ran.
  static const std::filesystem::path* const dir = [] {
    const std::filesystem::path base = std::filesystem::exists("/dev/shm")
                                           ? std::filesystem::path("/dev/shm")
                                           : std::filesystem::temp_directory_path();
    auto* path = new std::filesystem::path(base /
                                           ("anisoscope_fuzz_" + std::to_string(::getpid())));
    std::filesystem::create_directories(*path);
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(InputDirectory(), ignored);
    });
    return path;
  }();
  return *dir;
}

// `bytes` written to InputDirectory() / name; returns the path.
inline std::filesystem::path WriteInput(std::string_view bytes, const std::string& name) {
  const std::filesystem::path path = InputDirectory() / name;
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
  return path;
}

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Where the repository's tokenizer files are (set by fuzz/CMakeLists.txt).
inline std::filesystem::path RepoTokenizers() { return ANISOSCOPE_REPO_TOKENIZERS; }

}  // namespace anisoscope::fuzz
