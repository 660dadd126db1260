// A whole file mapped into memory, shared by the tensors that view it.
//
// The mapping is private copy-on-write (writes through a tensor never reach the file) and is
// unmapped when the last reference goes. Opening blocks on the file system; the object is
// immutable afterwards, so it may be shared across threads. The file must not shrink while
// mapped: a page past a truncation raises SIGBUS on access (writers of checkpoints replace
// files by rename, as torch.save and safetensors do through HF's save_pretrained).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>

#include "absl/status/statusor.h"
#include "common/file_gate.h"

namespace anisoscope::analysis {

class MappedFile {
 public:
  // Opens `file` through `gate` (its error when it cannot); INVALID_ARGUMENT naming the file
  // when it cannot be mapped. An empty file maps to data() == nullptr, size() 0.
  static absl::StatusOr<std::shared_ptr<MappedFile>> Open(const std::filesystem::path& file,
                                                          const FileGate& gate);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  MappedFile() = default;

  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace anisoscope::analysis
