// The zip directory of torch.save archives (pytorch_model.bin): central directory, zip64
// records, local headers; every entry read back.
#include "analysis/checkpoint/mapped_file.h"
#include "analysis/checkpoint/zip_archive.h"
#include "fuzz/amplification_guard.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const anisoscope::fuzz::AmplificationGuard guard("zip_archive_fuzzer", size);
  using namespace anisoscope;
  auto file =
      analysis::MappedFile::Open(fuzz::WriteInput(fuzz::AsText(data, size), "pytorch_model.bin"),
                                 anisoscope::FileGate::Host());
  if (!file.ok()) return 0;
  auto archive = analysis::ZipArchive::Open(*file, "pytorch_model.bin");
  if (!archive.ok()) return 0;
  for (const std::string& name : archive->Names()) {
    auto entry = archive->Entry(name);
    if (entry.ok() && entry->size > 0) {
      volatile uint8_t sink = entry->data[0] ^ entry->data[entry->size - 1];
      (void)sink;
    }
  }
  return 0;
}
