// What a compute device has: its free memory, and the peak LibTorch took on it.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>

namespace anisoscope::analysis {

// True when this LibTorch was built with CUDA (c10_cuda found at configure time).
bool BuiltWithCuda();

// Bytes free on `device`: MemAvailable (/proc/meminfo) for the CPU; for a CUDA device what
// the driver reports free plus what LibTorch's caching allocator holds unused. 0 when
// unknown (a CUDA device in a LibTorch built without CUDA). Cheap; never throws.
int64_t FreeMemoryBytes(const c10::Device& device);

// Peak bytes LibTorch's caching allocator handed out on a CUDA device since the last
// ResetPeakMemory; 0 for the CPU or without CUDA.
int64_t PeakAllocatedBytes(const c10::Device& device);
void ResetPeakMemory(const c10::Device& device);

}  // namespace anisoscope::analysis
