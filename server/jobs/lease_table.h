// LeaseTable: the leases the job runner has granted, by lease id: the step each holds, who
// holds it, its deadline and what its heartbeats have checked; the leases a cancel ended
// (so that a late heartbeat hears why); the count behind --max-leases-per-worker.
//
// A plain value: no lock, no store, no knowledge of jobs (a step is a StepKey). Not
// thread-safe: the runner calls it under its lock. Pointers and references to an entry stay
// valid until that entry is removed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace anisoscope::server {

// A job's step: (job id, index into the job's checkpoints).
using StepKey = std::pair<int64_t, size_t>;

struct LeaseEntry {
  StepKey key;
  std::string holder;  // the identity that took it; "" until adopted (taken before holders)
  bool local = false;  // an embedded worker's: not counted against the cap
  // The grant is being stored (outside the runner's lock), or Complete is storing the upload:
  // while busy, no cancel, expiry or other call may end the lease.
  bool storing = false;
  bool completing = false;
  bool stored_checked = false;       // the probe's heartbeat was checked (HasStep)
  bool fingerprint_checked = false;  // the fingerprint's heartbeat was checked (dedupe)
  std::string device;                // the worker's, from its lease request
  absl::Time deadline = absl::InfiniteFuture();
  int batches_done = 0;

  bool busy() const { return storing || completing; }
};

class LeaseTable {
 public:
  // `max_per_worker`: leases and waits one remote identity may hold together;
  // `cancelled_kept`: how many cancelled lease ids are remembered (the oldest forgotten).
  explicit LeaseTable(int max_per_worker, size_t cancelled_kept = 4096)
      : max_per_worker_(max_per_worker), cancelled_kept_(cancelled_kept) {}

  // Adds `entry` under `lease_id` (a fresh id) and returns it.
  LeaseEntry& Add(const std::string& lease_id, LeaseEntry entry);
  // The lease, or nullptr when `lease_id` is not current.
  LeaseEntry* Find(const std::string& lease_id);
  // The lease named by a call of `identity`: FAILED_PRECONDITION when it is not current,
  // PERMISSION_DENIED when another identity holds it. A lease with no holder yet (taken
  // before holders were recorded) is adopted by `identity`, and *adopted is set.
  absl::StatusOr<LeaseEntry*> FindHeldBy(const std::string& lease_id, const std::string& identity,
                                         bool* adopted);
  // Removes lease `lease_id`, which must be current, and returns it.
  LeaseEntry Remove(const std::string& lease_id);

  // Remembers that a cancel ended `lease_id`.
  void MarkCancelled(const std::string& lease_id);
  bool WasCancelled(const std::string& lease_id) const { return cancelled_.count(lease_id) > 0; }

  // RESOURCE_EXHAUSTED, naming --max-leases-per-worker, when remote `identity` holds leases
  // here and waits for `waiting` more, as many as max_per_worker together.
  absl::Status CheckCap(const std::string& identity, int waiting) const;

  // The leases of job `job_id` that are not busy.
  std::vector<std::string> IdleLeasesOf(int64_t job_id) const;
  // The leases whose deadline is at or before `now` and that are not busy.
  std::vector<std::string> Expired(absl::Time now) const;
  // The earliest deadline; InfiniteFuture when there is none.
  absl::Time NextDeadline() const;

  size_t size() const { return leases_.size(); }
  const std::map<std::string, LeaseEntry>& entries() const { return leases_; }

 private:
  const int max_per_worker_;
  const size_t cancelled_kept_;
  std::map<std::string, LeaseEntry> leases_;
  std::set<std::string> cancelled_;
  std::deque<std::string> cancelled_order_;
};

// FAILED_PRECONDITION: `lease_id` is not current (it expired, was completed or given back).
absl::Status LeaseNotCurrent(const std::string& lease_id);

}  // namespace anisoscope::server
