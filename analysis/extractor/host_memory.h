// How the engine's large CPU tensors get their memory from glibc's malloc.
//
// A forward allocates and frees blocks of tens to hundreds of MiB on every layer (the
// attention block [B, H, T, T], the feed-forward activations). By default glibc serves
// blocks above its mmap threshold (at most 32 MiB) with fresh mmap()s and gives heap memory
// above its trim threshold back to the kernel on free, so each layer page-faults its
// blocks in again: at 512 tokens that doubled the forward's time on the CPU.
//
// Only the main thread's arena is held to these settings: glibc gives every other thread an
// arena of heaps of at most 64 MiB, and serves a larger block with a fresh mmap whatever
// the threshold. A 7B model's widened projections are 64 to 172 MiB: run as a thread of the
// server, its step spent 28 % of its CPU time faulting them in (docs/performance.md, "A 7B
// model on the CPU"). The engine therefore runs on the main thread of anisoscope-worker.
#pragma once

namespace anisoscope::analysis {

// Serves large blocks from the heap and keeps freed heap memory for reuse (process-wide,
// idempotent; a no-op outside glibc).
void KeepFreedHostMemory();

// Gives the heap memory kept by KeepFreedHostMemory back to the kernel, e.g. between
// checkpoints, so that an idle worker holds no more than it uses.
void ReleaseFreedHostMemory();

}  // namespace anisoscope::analysis
