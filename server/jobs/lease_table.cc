#include "server/jobs/lease_table.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace anisoscope::server {

absl::Status LeaseNotCurrent(const std::string& lease_id) {
  return absl::FailedPreconditionError(absl::StrCat(
      "lease '", lease_id, "' is not current (it expired, was completed or given back)"));
}

LeaseEntry& LeaseTable::Add(const std::string& lease_id, LeaseEntry entry) {
  return leases_[lease_id] = std::move(entry);
}

LeaseEntry* LeaseTable::Find(const std::string& lease_id) {
  const auto it = leases_.find(lease_id);
  return it == leases_.end() ? nullptr : &it->second;
}

absl::StatusOr<LeaseEntry*> LeaseTable::FindHeldBy(const std::string& lease_id,
                                                   const std::string& identity, bool* adopted) {
  *adopted = false;
  LeaseEntry* lease = Find(lease_id);
  if (lease == nullptr) return LeaseNotCurrent(lease_id);
  if (lease->holder.empty()) {
    lease->holder = identity;
    *adopted = true;
  } else if (lease->holder != identity) {
    return absl::PermissionDeniedError(
        absl::StrCat("lease '", lease_id,
                     "' was taken by another worker identity; only the one that leased a unit may "
                     "heartbeat, complete or fail it"));
  }
  return lease;
}

LeaseEntry LeaseTable::Remove(const std::string& lease_id) {
  const auto it = leases_.find(lease_id);
  LeaseEntry entry = std::move(it->second);
  leases_.erase(it);
  return entry;
}

void LeaseTable::MarkCancelled(const std::string& lease_id) {
  if (!cancelled_.insert(lease_id).second) return;
  cancelled_order_.push_back(lease_id);
  while (cancelled_order_.size() > cancelled_kept_) {
    cancelled_.erase(cancelled_order_.front());
    cancelled_order_.pop_front();
  }
}

absl::Status LeaseTable::CheckCap(const std::string& identity, int waiting) const {
  int held = 0;
  for (const auto& [id, lease] : leases_) held += !lease.local && lease.holder == identity;
  if (held + waiting < max_per_worker_) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("worker identity '", identity, "' holds ", held, " leases and waits for ",
                   waiting, ", the most --max-leases-per-worker (", max_per_worker_,
                   ") allows; complete or give one back first"));
}

std::vector<std::string> LeaseTable::IdleLeasesOf(int64_t job_id) const {
  std::vector<std::string> idle;
  for (const auto& [id, lease] : leases_) {
    if (lease.key.first == job_id && !lease.busy()) idle.push_back(id);
  }
  return idle;
}

std::vector<std::string> LeaseTable::Expired(absl::Time now) const {
  std::vector<std::string> expired;
  for (const auto& [id, lease] : leases_) {
    if (!lease.busy() && lease.deadline <= now) expired.push_back(id);
  }
  return expired;
}

absl::Time LeaseTable::NextDeadline() const {
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [id, lease] : leases_) next = std::min(next, lease.deadline);
  return next;
}

}  // namespace anisoscope::server
