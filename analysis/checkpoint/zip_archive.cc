#include "analysis/checkpoint/zip_archive.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace anisoscope::analysis {
namespace {

constexpr uint32_t kLocalHeader = 0x04034b50;
constexpr uint32_t kCentralHeader = 0x02014b50;
constexpr uint32_t kEndOfDirectory = 0x06054b50;
constexpr uint32_t kZip64Locator = 0x07064b50;
constexpr uint32_t kZip64EndOfDirectory = 0x06064b50;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint64_t kEndOfDirectorySize = 22;
constexpr uint64_t kMaxCommentSize = 0xffff;

// Little-endian fields of the mapping, bounds-checked: a read past the end fails.
class Bytes {
 public:
  Bytes(const uint8_t* data, uint64_t size) : data_(data), size_(size) {}

  bool Has(uint64_t at, uint64_t count) const { return at <= size_ && count <= size_ - at; }
  uint64_t Uint(uint64_t at, int width) const {
    uint64_t value = 0;
    for (int i = width - 1; i >= 0; --i) value = (value << 8) | data_[at + i];
    return value;
  }
  uint64_t size() const { return size_; }
  const uint8_t* data() const { return data_; }

 private:
  const uint8_t* data_;
  uint64_t size_;
};

}  // namespace

absl::StatusOr<ZipArchive> ZipArchive::Open(std::shared_ptr<MappedFile> file, std::string label) {
  ZipArchive archive(std::move(file), std::move(label));
  RETURN_IF_ERROR(archive.ReadCentralDirectory());
  return archive;
}

absl::Status ZipArchive::ReadCentralDirectory() {
  const Bytes bytes(file_->data(), file_->size());
  auto corrupt = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(label_, ": corrupt zip archive: ", what));
  };
  if (bytes.size() < kEndOfDirectorySize)
    return corrupt("too short for an end-of-directory record");
  // The end-of-directory record is the last one, followed only by its comment.
  uint64_t end = bytes.size() - kEndOfDirectorySize;
  const uint64_t lowest = end > kMaxCommentSize ? end - kMaxCommentSize : 0;
  while (bytes.Uint(end, 4) != kEndOfDirectory) {
    if (end == lowest) return corrupt("no end-of-directory record (truncated?)");
    --end;
  }
  uint64_t entries = bytes.Uint(end + 10, 2);
  uint64_t directory_size = bytes.Uint(end + 12, 4);
  uint64_t directory_offset = bytes.Uint(end + 16, 4);
  if (end >= 20 && bytes.Uint(end - 20, 4) == kZip64Locator) {
    const uint64_t record = bytes.Uint(end - 20 + 8, 8);
    if (!bytes.Has(record, 56) || bytes.Uint(record, 4) != kZip64EndOfDirectory) {
      return corrupt("zip64 end-of-directory record out of place");
    }
    entries = bytes.Uint(record + 32, 8);
    directory_size = bytes.Uint(record + 40, 8);
    directory_offset = bytes.Uint(record + 48, 8);
  }
  if (!bytes.Has(directory_offset, directory_size) || directory_offset + directory_size > end) {
    return corrupt(absl::StrCat("central directory (", directory_size, " bytes at ",
                                directory_offset, ") is outside the file"));
  }
  const uint64_t directory_end = directory_offset + directory_size;
  uint64_t at = directory_offset;
  for (uint64_t index = 0; index < entries; ++index) {
    if (at + 46 > directory_end || bytes.Uint(at, 4) != kCentralHeader) {
      return corrupt(absl::StrCat("central directory entry ", index, " is malformed"));
    }
    Record record;
    record.method = static_cast<uint16_t>(bytes.Uint(at + 10, 2));
    record.compressed_size = bytes.Uint(at + 20, 4);
    record.size = bytes.Uint(at + 24, 4);
    const uint64_t name_size = bytes.Uint(at + 28, 2);
    const uint64_t extra_size = bytes.Uint(at + 30, 2);
    const uint64_t comment_size = bytes.Uint(at + 32, 2);
    record.local_header = bytes.Uint(at + 42, 4);
    if (at + 46 + name_size + extra_size + comment_size > directory_end) {
      return corrupt(
          absl::StrCat("central directory entry ", index, " runs past the central directory"));
    }
    std::string name(reinterpret_cast<const char*>(bytes.data() + at + 46), name_size);
    // Zip64: the 32-bit fields that overflowed are 0xffffffff and follow in the extra field.
    const uint64_t extra_end = at + 46 + name_size + extra_size;
    for (uint64_t extra = at + 46 + name_size; extra + 4 <= extra_end;) {
      const uint64_t id = bytes.Uint(extra, 2), size = bytes.Uint(extra + 2, 2);
      if (extra + 4 + size > extra_end) break;
      if (id == kZip64ExtraId) {
        uint64_t field = extra + 4;
        for (uint64_t* value : {&record.size, &record.compressed_size, &record.local_header}) {
          if (*value != 0xffffffff) continue;
          if (field + 8 > extra + 4 + size)
            return corrupt(absl::StrCat("entry '", name, "': short zip64 field"));
          *value = bytes.Uint(field, 8);
          field += 8;
        }
      }
      extra += 4 + size;
    }
    records_.emplace(std::move(name), record);
    at += 46 + name_size + extra_size + comment_size;
  }
  return absl::OkStatus();
}

absl::StatusOr<ZipEntryView> ZipArchive::Entry(const std::string& name) const {
  const auto it = records_.find(name);
  if (it == records_.end()) {
    return absl::NotFoundError(absl::StrCat(label_, ": no record '", name, "'"));
  }
  const Record& record = it->second;
  auto corrupt = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(label_, ": record '", name, "' ", what));
  };
  if (record.method != 0) {
    return corrupt(absl::StrCat("is compressed (method ", record.method,
                                "); torch.save stores records uncompressed"));
  }
  if (record.compressed_size != record.size) return corrupt("has inconsistent sizes");
  const Bytes bytes(file_->data(), file_->size());
  if (!bytes.Has(record.local_header, 30) || bytes.Uint(record.local_header, 4) != kLocalHeader) {
    return corrupt("has no local header where the directory says");
  }
  const uint64_t data = record.local_header + 30 + bytes.Uint(record.local_header + 26, 2) +
                        bytes.Uint(record.local_header + 28, 2);
  if (!bytes.Has(data, record.size)) {
    return corrupt(absl::StrCat("(", record.size, " bytes at ", data, ") runs past the end of the ",
                                bytes.size(), "-byte file"));
  }
  return ZipEntryView{record.size > 0 ? file_->data() + data : nullptr, record.size};
}

std::vector<std::string> ZipArchive::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, record] : records_) names.push_back(name);
  return names;
}

}  // namespace anisoscope::analysis
