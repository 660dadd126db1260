// This process's memory as the kernel counts it (/proc/self/status): the one place it is
// read, by the worker's memory cap (VmData: what RLIMIT_DATA counts) and by the tests that
// bound a reader's peak (VmHWM), and by the benchmarks (RssAnon: memory a mapped file does
// not explain).
#pragma once

#include <cstdint>

namespace anisoscope {

// The data segment now (VmData), in bytes; 0 when unknown.
uint64_t DataSegmentBytes();
// The peak resident size so far (VmHWM), in bytes; 0 when unknown.
uint64_t PeakResidentBytes();
// Starts PeakResidentBytes again from the resident size now (Linux's clear_refs "5"), so that
// an earlier peak does not hide a later one's; false where the kernel refuses.
bool ResetPeakResident();
// The anonymous resident memory now (RssAnon: the heap and private mappings, not the pages
// of mapped files), in bytes; 0 when unknown.
uint64_t AnonymousResidentBytes();

}  // namespace anisoscope
