#include "analysis/extractor/host_memory.h"

#include <cstdlib>  // defines __GLIBC__ under glibc

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace anisoscope::analysis {

#if defined(__GLIBC__)
namespace {
// Above any block a forward allocates (a 16 x 512 BERT-base batch's attention is 200 MiB).
constexpr int kLargeBlockBytes = 1 << 30;
}  // namespace

void KeepFreedHostMemory() {
  mallopt(M_MMAP_THRESHOLD, kLargeBlockBytes);
  mallopt(M_TRIM_THRESHOLD, kLargeBlockBytes);
}

void ReleaseFreedHostMemory() { malloc_trim(0); }
#else
void KeepFreedHostMemory() {}
void ReleaseFreedHostMemory() {}
#endif

}  // namespace anisoscope::analysis
