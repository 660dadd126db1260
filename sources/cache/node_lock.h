// The source cache's lock between the processes of one node, without flock (which lies on
// NFS and Lustre): a lock file made by link(2) of a file that already names its owner
// ("HOST~PID~START RANDOM"), which is atomic on local file systems and on NFS alike.
//
// A lock whose owner is dead (same host, pid gone or reused) is broken at once; one whose
// owner is on another host only once older than `stale_after` (holders keep it for
// milliseconds of metadata work, never across a download). Breakers go one at a time
// through a second lock file made with O_EXCL, and break only the acquisition they saw (the
// random token), so a lock taken again in between is never removed.
// Limit: a breaker paused for longer than `stale_after` inside its few system calls may be
// overtaken by a second breaker; both still only remove the dead owner's file.
//
// Blocks (polling, 1-20 ms) until held or `timeout`. Not reentrant; one holder per object.
#pragma once

#include <filesystem>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace anisoscope::cache {

class NodeLock {
 public:
  // `lock_path`'s folder must exist.
  NodeLock(std::filesystem::path lock_path, absl::Duration stale_after, absl::Duration timeout)
      : path_(std::move(lock_path)), stale_after_(stale_after), timeout_(timeout) {}
  ~NodeLock() { Unlock(); }
  NodeLock(const NodeLock&) = delete;
  NodeLock& operator=(const NodeLock&) = delete;

  // UNAVAILABLE naming the lock and its owner after `timeout`; INTERNAL on an I/O error.
  absl::Status Lock();
  void Unlock();
  bool held() const { return !token_.empty(); }

 private:
  // Removes the lock file when its content is still `seen` (taken under the breaker lock).
  void BreakIfStill(const std::string& seen);

  const std::filesystem::path path_;
  const absl::Duration stale_after_;
  const absl::Duration timeout_;
  std::string token_;  // this acquisition's content, empty when not held
};

// Holds a NodeLock for a scope.
class NodeLockHolder {
 public:
  explicit NodeLockHolder(NodeLock* lock) : lock_(lock) {}
  ~NodeLockHolder() { lock_->Unlock(); }
  NodeLockHolder(const NodeLockHolder&) = delete;
  NodeLockHolder& operator=(const NodeLockHolder&) = delete;

 private:
  NodeLock* lock_;
};

}  // namespace anisoscope::cache
