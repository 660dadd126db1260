// How the engine's large CPU tensors get their memory from glibc's malloc.
//
// A forward allocates and frees blocks of tens to hundreds of MiB on every layer (the
// attention block [B, H, T, T], the feed-forward activations). By default glibc serves
// blocks above its mmap threshold (at most 32 MiB) with fresh mmap()s and gives heap memory
// above its trim threshold back to the kernel on free, so each layer page-faults its
// blocks in again: at 512 tokens that doubled the forward's time on the CPU.
#pragma once

namespace anisoscope::analysis {

// Serves large blocks from the heap and keeps freed heap memory for reuse (process-wide,
// idempotent; a no-op outside glibc).
void KeepFreedHostMemory();

// Gives the heap memory kept by KeepFreedHostMemory back to the kernel, e.g. between
// checkpoints, so that an idle worker holds no more than it uses.
void ReleaseFreedHostMemory();

}  // namespace anisoscope::analysis
