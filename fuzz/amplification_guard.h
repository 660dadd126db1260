// The amplification bound of the fuzz targets (issue 37): while one input runs, the heap it
// holds live beyond what was live when it started may never exceed
//     per_byte * input size + constant
// bytes (kHeapBounds: one row per target, the one home of those numbers). The allocation that
// crosses the bound aborts the process with a message that says so, and libFuzzer keeps the
// input as a crash. libFuzzer's own -rss_limit_mb and -malloc_limit_mb (scripts/fuzz.sh) are
// absolute; this check is relative to each input's size.
//
// Live bytes are counted by AddressSanitizer's malloc and free hooks (every malloc, new,
// posix_memalign and realloc of the process, LibTorch's included; not mmap). Fixed data a target
// loads once (tokenizers, tiny checkpoints' directories) is loaded before its first guard, in
// LLVMFuzzerInitialize; what each input loads anew is in its constant.
// ANISOSCOPE_FUZZ_HEAP_REPORT=1 prints each input's size, peak and time to stderr (how the rows
// were measured); ANISOSCOPE_FUZZ_PRINT_BOUNDS=1 prints the rows (scripts/fuzz.sh reads them).
#pragma once

#include <sanitizer/allocator_interface.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace anisoscope::fuzz {

struct HeapBound {
  const char* target;
  int64_t per_byte;  // K: heap bytes allowed per byte of input
  int64_t constant;  // C: heap bytes allowed whatever the input's size
};

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * kKiB;

// K and C per target. Each row is at least twice the largest heap a legitimate input took
// (measured with ANISOSCOPE_FUZZ_HEAP_REPORT=1 on the seeds, the regression inputs, valid
// files up to the target's -max_len, and 30 s of fuzzing; docs/reliability.md#fuzzing), and
// no looser than what the reader itself promises where it states a bound. The default row,
// K 64 and C 1 MiB, holds where a byte of input legitimately costs tens of bytes of heap (a
// JSON or protobuf value, a name and its slot); the others say why they differ.
inline constexpr HeapBound kHeapBounds[] = {
    // A JSON tree, then a vocabulary and merges (measured 79 bytes per byte), then the input
    // encoded with the tokenizer it describes.
    {"tokenizer_json_fuzzer", 256, 1 * kMiB},
    // Three tokenizers, each a piece, its ids and a word-cache entry per word of text
    // (measured 180 bytes per byte: a text of one-byte words).
    {"tokenizer_encode_fuzzer", 512, 1 * kMiB},
    {"sentencepiece_model_fuzzer", 64, 1 * kMiB},
    {"vocab_files_fuzzer", 64, 1 * kMiB},
    // analysis/probe/probe.h: the ids kept (128 samples of 512 here) whatever the file's
    // size, lines streamed and cut as read; docs/security.md's 2 MiB per probe.
    {"token_probe_fuzzer", 1, 2 * kMiB},
    {"step_discovery_fuzzer", 64, 1 * kMiB},
    {"zip_archive_fuzzer", 32, 1 * kMiB},
    // Linear in the header (an entry, its tensor: measured 10 bytes per byte), no copies.
    {"safetensors_fuzzer", 32, 1 * kMiB},
    // state_dict_unpickler.h: at most 4 bytes per byte plus 16 MiB of objects, doubled; a
    // state dict legitimately costs ~45 bytes per byte within that constant.
    {"torch_zip_fuzzer", 16, 32 * kMiB},
    {"pickle_fuzzer", 16, 32 * kMiB},
    // The tiny checkpoint loaded and run on each input: the weights fix every size.
    {"model_config_fuzzer", 64, 2 * kMiB},
    {"query_params_fuzzer", 64, 1 * kMiB},
    // Protobuf: an empty repeated message is 2 bytes on the wire and ~60 bytes of heap, and
    // the input is parsed twice (alone and merged; measured 63 bytes per byte). The constant
    // is libprotobuf's, not ours: 3.21 reserves a string as long as the length a nested
    // field claims, up to 2 GiB from 12 bytes (the regression input complete_work_reserve;
    // the server parses uploads the same way, through gRPC). The reserve is never written, so it
    // costs address space, not memory (docs/security.md section 7); the bound here still
    // catches anything that fills what it allocates beyond 128 bytes per byte.
    {"complete_work_fuzzer", 128, 2049 * kMiB},
};

namespace amplification {

// The state the hooks share; std::atomic, as LibTorch allocates from its own threads too.
inline std::atomic<int64_t> live{0};   // bytes allocated and not yet freed since the hooks
inline std::atomic<int64_t> start{0};  // `live` when the current input started
inline std::atomic<int64_t> peak{0};   // the current input's largest live - start
inline std::atomic<int64_t> limit{std::numeric_limits<int64_t>::max()};  // max: no input
inline const HeapBound* bound = nullptr;
inline size_t input_size = 0;

[[noreturn]] inline void Fail(int64_t held, size_t allocation) {
  limit.store(std::numeric_limits<int64_t>::max());  // libFuzzer's crash report allocates
  char message[512];
  const int length = std::snprintf(
      message, sizeof(message),
      "==%d== ERROR: amplification: %s holds %lld bytes of heap for an input of %zu bytes "
      "(at an allocation of %zu); its bound is %lld * %zu + %lld = %lld "
      "(fuzz/amplification_guard.h)\n",
      static_cast<int>(::getpid()), bound->target, static_cast<long long>(held), input_size,
      allocation, static_cast<long long>(bound->per_byte), input_size,
      static_cast<long long>(bound->constant),
      static_cast<long long>(bound->per_byte * static_cast<int64_t>(input_size) + bound->constant));
  if (length > 0) {
    (void)!::write(2, message, std::strlen(message));
  }
  std::abort();
}

inline void MallocHook(const volatile void* /*pointer*/, size_t size) {
  const int64_t held = live.fetch_add(static_cast<int64_t>(size), std::memory_order_relaxed) +
                       static_cast<int64_t>(size) - start.load(std::memory_order_relaxed);
  int64_t seen = peak.load(std::memory_order_relaxed);
  while (held > seen && !peak.compare_exchange_weak(seen, held, std::memory_order_relaxed)) {
  }
  if (held > limit.load(std::memory_order_relaxed)) Fail(held, size);
}

inline void FreeHook(const volatile void* pointer) {
  // Called before the chunk is released; a pointer ASan does not own (a double free, which
  // ASan reports next) is not counted.
  const void* chunk = const_cast<const void*>(pointer);
  if (chunk == nullptr || !__sanitizer_get_ownership(chunk)) return;
  live.fetch_sub(static_cast<int64_t>(__sanitizer_get_allocated_size(chunk)),
                 std::memory_order_relaxed);
}

inline const HeapBound& BoundOf(const char* target) {
  for (const HeapBound& row : kHeapBounds) {
    if (std::strcmp(row.target, target) == 0) return row;
  }
  std::fprintf(stderr, "amplification_guard.h: no row of kHeapBounds for %s\n", target);
  std::abort();
}

inline bool Report() {
  static const bool report = [] {
    const char* value = std::getenv("ANISOSCOPE_FUZZ_HEAP_REPORT");
    return value != nullptr && value[0] == '1';
  }();
  return report;
}

// ANISOSCOPE_FUZZ_PRINT_BOUNDS=1: the target prints kHeapBounds ("TARGET K C" lines) and exits
// before fuzzing; scripts/fuzz.sh derives libFuzzer's absolute limits from them.
inline const bool printed_bounds = [] {
  const char* value = std::getenv("ANISOSCOPE_FUZZ_PRINT_BOUNDS");
  if (value == nullptr || value[0] != '1') return false;
  for (const HeapBound& row : kHeapBounds) {
    std::printf("%s %lld %lld\n", row.target, static_cast<long long>(row.per_byte),
                static_cast<long long>(row.constant));
  }
  std::fflush(stdout);
  std::_Exit(0);
}();

}  // namespace amplification

// Installs the hooks (once) and arms the bound of `target` for one input of `size` bytes, until
// destroyed. One at a time, on the thread that runs the input.
class AmplificationGuard {
 public:
  AmplificationGuard(const char* target, size_t size) : began_(std::chrono::steady_clock::now()) {
    namespace a = amplification;
    static const bool installed = [] {
      // Fails only when ASan's table of hooks is full: then nothing would be checked.
      if (__sanitizer_install_malloc_and_free_hooks(a::MallocHook, a::FreeHook) == 0) {
        std::fprintf(stderr, "amplification_guard.h: the malloc hooks cannot be installed\n");
        std::abort();
      }
      return true;
    }();
    (void)installed;
    a::bound = &a::BoundOf(target);
    a::input_size = size;
    a::start.store(a::live.load());
    a::peak.store(0);
    a::limit.store(a::bound->per_byte * static_cast<int64_t>(size) + a::bound->constant);
  }

  ~AmplificationGuard() {
    namespace a = amplification;
    a::limit.store(std::numeric_limits<int64_t>::max());
    if (a::Report()) {
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began_)
              .count();
      std::fprintf(stderr, "heap-report %s size %zu peak %lld ms %.1f\n", a::bound->target,
                   a::input_size, static_cast<long long>(a::peak.load()), ms);
    }
  }

  AmplificationGuard(const AmplificationGuard&) = delete;
  AmplificationGuard& operator=(const AmplificationGuard&) = delete;

 private:
  std::chrono::steady_clock::time_point began_;
};

}  // namespace anisoscope::fuzz
