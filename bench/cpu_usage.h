// CpuUsage: the CPU seconds a process spent in user and kernel mode and its minor page
// faults (getrusage), for the benchmarks that report what share of a step the kernel took.
#pragma once

#include <sys/resource.h>

namespace anisoscope {

struct CpuUsage {
  double user = 0, kernel = 0;
  long page_faults = 0;

  // So far, of this process (RUSAGE_SELF) or of its reaped children (RUSAGE_CHILDREN).
  static CpuUsage Now(int who = RUSAGE_SELF) {
    rusage usage{};
    ::getrusage(who, &usage);
    const auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
    return {seconds(usage.ru_utime), seconds(usage.ru_stime), usage.ru_minflt};
  }
  CpuUsage operator+(const CpuUsage& other) const {
    return {user + other.user, kernel + other.kernel, page_faults + other.page_faults};
  }
  CpuUsage operator-(const CpuUsage& earlier) const {
    return {user - earlier.user, kernel - earlier.kernel, page_faults - earlier.page_faults};
  }
  double kernel_share() const { return user + kernel > 0 ? kernel / (user + kernel) : 0; }
};

}  // namespace anisoscope
