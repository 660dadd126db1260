// The stored (uncompressed) entries of a zip archive in a mapped file, as torch.save writes
// them: found through the central directory (zip64 included), each entry's bytes viewed in
// place, never copied.
//
// Every offset and size is checked against the file before use: a truncated, corrupt or
// lying archive is an INVALID_ARGUMENT naming the file and the entry, never a read outside
// the mapping. Compressed entries are refused (torch.save never compresses). CRCs are not
// checked. Immutable after Open; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/checkpoint/mapped_file.h"

namespace anisoscope::analysis {

// One entry's bytes inside the mapping.
struct ZipEntryView {
  uint8_t* data = nullptr;  // nullptr when size is 0
  uint64_t size = 0;
};

class ZipArchive {
 public:
  // Reads the central directory of `file`; `label` (the path) starts every error message.
  static absl::StatusOr<ZipArchive> Open(std::shared_ptr<MappedFile> file, std::string label);

  // The bytes of entry `name` (its full name in the archive); NOT_FOUND when absent,
  // INVALID_ARGUMENT when its local header or extent is corrupt or it is compressed.
  absl::StatusOr<ZipEntryView> Entry(const std::string& name) const;

  // Every entry name, in name order.
  std::vector<std::string> Names() const;

  const std::shared_ptr<MappedFile>& file() const { return file_; }

 private:
  struct Record {
    uint64_t local_header = 0;
    uint64_t compressed_size = 0;
    uint64_t size = 0;
    uint16_t method = 0;
  };

  ZipArchive(std::shared_ptr<MappedFile> file, std::string label)
      : file_(std::move(file)), label_(std::move(label)) {}

  absl::Status ReadCentralDirectory();

  std::shared_ptr<MappedFile> file_;
  std::string label_;
  std::map<std::string, Record, std::less<>> records_;
};

}  // namespace anisoscope::analysis
