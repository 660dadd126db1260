#include "analysis/extractor/device_memory.h"

#include <fstream>
#include <sstream>
#include <string>

#ifdef ANISOSCOPE_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

namespace anisoscope::analysis {
namespace {

int64_t MemAvailableBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string key;
    int64_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

#ifdef ANISOSCOPE_WITH_CUDA
c10::DeviceIndex IndexOf(const c10::Device& device) {
  return device.has_index() ? device.index() : c10::cuda::current_device();
}

// What LibTorch's caching allocator holds but has not handed out; 0 before its first
// allocation on the device (index 0 of each statistic is the aggregate over pools).
int64_t CachedUnusedBytes(c10::DeviceIndex index) {
  try {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index);
    return stats.reserved_bytes[0].current - stats.allocated_bytes[0].current;
  } catch (const c10::Error&) {
    return 0;
  }
}
#endif

}  // namespace

bool BuiltWithCuda() {
#ifdef ANISOSCOPE_WITH_CUDA
  return true;
#else
  return false;
#endif
}

int64_t FreeMemoryBytes(const c10::Device& device) {
  if (device.is_cpu()) return MemAvailableBytes();
#ifdef ANISOSCOPE_WITH_CUDA
  if (!device.is_cuda() || c10::cuda::device_count() == 0) return 0;
  try {
    const c10::DeviceIndex index = IndexOf(device);
    c10::cuda::CUDAGuard guard(index);
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
      cudaGetLastError();  // clears the error so LibTorch's next call does not see it
      return 0;
    }
    return static_cast<int64_t>(free) + CachedUnusedBytes(index);
  } catch (const c10::Error&) {
    return 0;
  }
#else
  return 0;
#endif
}

int64_t PeakAllocatedBytes(const c10::Device& device) {
#ifdef ANISOSCOPE_WITH_CUDA
  if (!device.is_cuda()) return 0;
  try {
    return c10::cuda::CUDACachingAllocator::getDeviceStats(IndexOf(device)).allocated_bytes[0].peak;
  } catch (const c10::Error&) {  // the allocator is set up at the device's first allocation
    return 0;
  }
#else
  (void)device;
  return 0;
#endif
}

void ResetPeakMemory(const c10::Device& device) {
#ifdef ANISOSCOPE_WITH_CUDA
  if (!device.is_cuda()) return;
  try {
    c10::cuda::CUDACachingAllocator::resetPeakStats(IndexOf(device));
  } catch (const c10::Error&) {  // nothing allocated yet: nothing to reset
  }
#else
  (void)device;
#endif
}

}  // namespace anisoscope::analysis
