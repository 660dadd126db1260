#include "sources/cache/source_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/random_id.h"
#include "common/status_macros.h"
#include "sources/cache/cache_dirs.h"
#include "sources/cache/cache_eviction.h"
#include "sources/cache/process_owner.h"
#include "sources/cache/snapshot_entries.h"

namespace anisoscope::cache {
namespace {

constexpr char kCacheDirTag[] =
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by anisoscope.\n"
    "# For information about cache directory tags, see https://bford.info/cachedir/\n";

std::string Quoted(const std::string& path) {
  return absl::StrCat("'", absl::CHexEscape(path), "'");
}

// A unique name for this process's next record or download: "TOKEN.RANDOM".
std::string UniqueName() {
  return absl::StrCat(ProcessOwner::Self().Token(), ".", RandomId128().substr(0, 16));
}

// Removes the lock's temporary files ("lock.RANDOM.tmp") whose writer died before linking.
uint64_t SweepLockFiles(int state, absl::Duration stale_after) {
  uint64_t swept = 0;
  for (const DirEntry& entry : ListDir(state)) {
    if (!entry.is_file || !absl::StartsWith(entry.name, "lock.") ||
        !absl::EndsWith(entry.name, ".tmp")) {
      continue;
    }
    const std::optional<std::string> text = ReadSmallAt(state, entry.name, 256);
    const std::optional<ProcessOwner> owner =
        text.has_value() ? ProcessOwner::Parse(text->substr(0, text->find(' '))) : std::nullopt;
    const bool dead = owner.has_value() && !owner->MaybeAlive();
    if ((dead || absl::Now() - entry.mtime > stale_after) &&
        unlinkat(state, entry.name.c_str(), 0) == 0) {
      ++swept;
    }
  }
  return swept;
}

}  // namespace

StepPin& StepPin::operator=(StepPin&& other) noexcept {
  if (this != &other) {
    if (!record_.empty()) unlink(record_.c_str());
    step_ = std::move(other.step_);
    record_ = std::exchange(other.record_, {});
  }
  return *this;
}

StepPin::~StepPin() {
  if (!record_.empty()) unlink(record_.c_str());
}

PendingBlob& PendingBlob::operator=(PendingBlob&& other) noexcept {
  if (this != &other) {
    if (!incomplete_path_.empty()) unlink(incomplete_path_.c_str());
    if (!reservation_.empty()) unlink(reservation_.c_str());
    step_ = std::move(other.step_);
    file_ = std::move(other.file_);
    fd_ = std::move(other.fd_);
    incomplete_path_ = std::exchange(other.incomplete_path_, {});
    reservation_ = std::exchange(other.reservation_, {});
  }
  return *this;
}

PendingBlob::~PendingBlob() {
  if (!incomplete_path_.empty()) unlink(incomplete_path_.c_str());
  if (!reservation_.empty()) unlink(reservation_.c_str());
}

SourceCache::SourceCache(SourceCacheOptions options, UniqueFd root, UniqueFd pins,
                         UniqueFd reservations)
    : options_(std::move(options)),
      root_(std::move(root)),
      pins_(std::move(pins)),
      reservations_(std::move(reservations)),
      node_lock_(options_.dir / kStateFolder / "lock", options_.stale_after,
                 options_.lock_timeout) {}

template <typename Work>
auto SourceCache::Locked(Work work) -> decltype(work()) {
  std::lock_guard<std::mutex> guard(lock_mutex_);
  RETURN_IF_ERROR(node_lock_.Lock());
  NodeLockHolder holder(&node_lock_);
  return work();
}

absl::StatusOr<std::unique_ptr<SourceCache>> SourceCache::Create(SourceCacheOptions options) {
  if (options.max_bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cache ", options.dir.string(), ": --cache-max-bytes must be positive"));
  }
  options.dir = options.dir.lexically_normal();
  ASSIGN_OR_RETURN(UniqueFd root, OpenRoot(options.dir.string(), true));
  const std::string shown = (options.dir / kStateFolder).string();
  ASSIGN_OR_RETURN(UniqueFd state, OpenDirsAt(root.get(), {".locks", "anisoscope"}, true, shown));
  ASSIGN_OR_RETURN(UniqueFd pins, OpenDirAt(state.get(), kPinsFolder, true, shown));
  ASSIGN_OR_RETURN(UniqueFd reservations, OpenDirAt(state.get(), kReservationsFolder, true, shown));
  if (!StatAt(root.get(), "CACHEDIR.TAG").has_value()) {
    WriteFileAtomicallyAt(root.get(), "CACHEDIR.TAG", kCacheDirTag, shown).IgnoreError();
  }
  std::unique_ptr<SourceCache> cache(new SourceCache(std::move(options), std::move(root),
                                                     std::move(pins), std::move(reservations)));
  SweepLockFiles(state.get(), cache->options_.stale_after);
  RETURN_IF_ERROR(cache->Refresh().status());
  return cache;
}

std::string SourceCache::Where(const CacheStep& step) {
  std::string where = absl::StrCat(step.repo.display, " at ", absl::CHexEscape(step.snapshot));
  if (!step.revision.empty() && step.revision != step.snapshot) {
    absl::StrAppend(&where, " (revision ", absl::CHexEscape(step.revision), ")");
  }
  return where;
}

absl::Status SourceCache::CheckStep(const CacheStep& step) {
  const std::string where = Where(step);
  if (step.repo.folder.empty() || !IsManagedRepoFolder(step.repo.folder)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": not a repo the cache manages"));
  }
  RETURN_IF_ERROR(CheckSnapshotName(step.snapshot, where));
  if (absl::StartsWith(step.repo.folder, "models--") && !IsCommitHash(step.snapshot)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": a Hub snapshot is named by its 40-digit commit"));
  }
  if (!step.revision.empty()) RETURN_IF_ERROR(CheckRevision(step.revision, where));
  std::set<std::string> paths;
  for (const StepFile& file : step.files) {
    RETURN_IF_ERROR(FileSegments(file.path, where).status());
    RETURN_IF_ERROR(CheckEtag(file.etag, where));
    if (!paths.insert(file.path).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": file ", Quoted(file.path), " is listed twice"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::filesystem::path> SourceCache::CheckComplete(const CacheStep& step) const {
  const std::string where = Where(step);
  for (const StepFile& file : step.files) {
    RETURN_IF_ERROR(CheckEntry(options_.dir, root_.get(), step, file, where));
  }
  if (step.files.empty() &&
      !OpenDirsAt(root_.get(), {step.repo.folder, "snapshots", step.snapshot}, false, where).ok()) {
    return absl::NotFoundError(absl::StrCat(where, ": the step is not in the cache"));
  }
  return options_.dir / step.repo.folder / "snapshots" / step.snapshot;
}

absl::StatusOr<std::filesystem::path> SourceCache::FindComplete(const CacheStep& step) {
  RETURN_IF_ERROR(CheckStep(step));
  absl::StatusOr<std::filesystem::path> found = CheckComplete(step);
  if (found.ok()) {
    ++hits_;
    absl::StatusOr<UniqueFd> snapshots =
        OpenDirsAt(root_.get(), {step.repo.folder, "snapshots"}, false, Where(step));
    if (snapshots.ok()) TouchAt(snapshots->get(), step.snapshot);
  } else if (absl::IsNotFound(found.status())) {
    ++misses_;
  }
  return found;
}

absl::StatusOr<std::filesystem::path> SourceCache::WriteRecord(int dir, const char* folder,
                                                               const std::string& content) {
  const std::string name = UniqueName();
  const int fd =
      openat(dir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  const bool ok =
      fd >= 0 && write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
  const int error = errno;
  if (fd >= 0) close(fd);
  const std::filesystem::path path = options_.dir / kStateFolder / folder / name;
  if (!ok) {
    unlinkat(dir, name.c_str(), 0);
    return absl::InternalError(
        absl::StrCat("cache: cannot write ", path.string(), ": ", std::strerror(error)));
  }
  return path;
}

absl::StatusOr<StepPin> SourceCache::Pin(const CacheStep& step) {
  RETURN_IF_ERROR(CheckStep(step));
  return Locked([&]() -> absl::StatusOr<StepPin> {
    ASSIGN_OR_RETURN(
        std::filesystem::path record,
        WriteRecord(pins_.get(), kPinsFolder, StepKey(step.repo.folder, step.snapshot) + "\n"));
    absl::StatusOr<UniqueFd> snapshots =
        OpenDirsAt(root_.get(), {step.repo.folder, "snapshots"}, false, Where(step));
    if (snapshots.ok()) TouchAt(snapshots->get(), step.snapshot);
    return StepPin(step, std::move(record));
  });
}

CacheScan SourceCache::Rescan() {
  CacheScan scan = ScanCache(root_.get(), pins_.get(), reservations_.get(), options_.stale_after);
  bytes_cached_ = scan.blob_bytes;
  bytes_reserved_ = scan.reserved_bytes;
  return scan;
}

absl::StatusOr<std::optional<PendingBlob>> SourceCache::BeginFile(const StepPin& pin,
                                                                  const StepFile& file) {
  const CacheStep& step = pin.step();
  const std::string where = Where(step);
  RETURN_IF_ERROR(FileSegments(file.path, where).status());
  RETURN_IF_ERROR(CheckEtag(file.etag, where));
  if (file.size > options_.max_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(where, ": file ", Quoted(file.path), " (", file.size,
                     " bytes) is larger than the cache's bound (--cache-max-bytes ",
                     options_.max_bytes, "): raise the bound"));
  }
  return Locked([&]() -> absl::StatusOr<std::optional<PendingBlob>> {
    ASSIGN_OR_RETURN(UniqueFd blobs, OpenDirsAt(root_.get(), {step.repo.folder, "blobs"}, true,
                                                (options_.dir / step.repo.folder).string()));
    const std::optional<DirEntry> present = StatAt(blobs.get(), file.etag);
    if (present.has_value() && present->is_file && present->size == file.size) {
      RETURN_IF_ERROR(LinkEntry(root_.get(), step, file, where));
      return std::optional<PendingBlob>();
    }
    CacheScan scan = Rescan();
    const EvictionResult evicted =
        EvictUntilFits(root_.get(), file.size, options_.max_bytes, options_.stale_after, &scan);
    evicted_steps_ += evicted.steps;
    evicted_bytes_ += evicted.bytes;
    bytes_cached_ = scan.blob_bytes;
    if (scan.blob_bytes + scan.reserved_bytes + file.size > options_.max_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          where, ": file ", Quoted(file.path), " (", file.size,
          " bytes) does not fit the cache's bound (--cache-max-bytes ", options_.max_bytes,
          "): ", scan.blob_bytes, " bytes are held by steps in use and ", scan.reserved_bytes,
          " by downloads in progress; raise the bound or lower the prefetch depth"));
    }
    ASSIGN_OR_RETURN(
        std::filesystem::path reservation,
        WriteRecord(reservations_.get(), kReservationsFolder,
                    absl::StrCat(file.size, " ", StepKey(step.repo.folder, step.snapshot), "\n")));
    bytes_reserved_ = scan.reserved_bytes + file.size;
    PendingBlob blob;
    blob.reservation_ = reservation;
    const std::string name = absl::StrCat(file.etag, ".", UniqueName(), kIncompleteSuffix);
    const int fd = openat(blobs.get(), name.c_str(),
                          O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
      return absl::InternalError(absl::StrCat(where, ": cannot create the download of file ",
                                              Quoted(file.path), ": ", std::strerror(errno)));
    }
    blob.fd_ = UniqueFd(fd);
    blob.incomplete_path_ = options_.dir / step.repo.folder / "blobs" / name;
    blob.step_ = CacheStep{step.repo, step.snapshot, step.revision, {}};
    blob.file_ = file;
    return std::optional<PendingBlob>(std::move(blob));
  });
}

absl::Status SourceCache::CommitFile(PendingBlob blob) {
  const std::string where = Where(blob.step_);
  struct stat st {};
  if (fstat(blob.fd(), &st) != 0 || static_cast<uint64_t>(st.st_size) != blob.file_.size) {
    return absl::DataLossError(absl::StrCat(where, ": file ", Quoted(blob.file_.path), ": ",
                                            st.st_size, " bytes downloaded, the listing says ",
                                            blob.file_.size, "; the download is dropped"));
  }
  blob.fd_ = UniqueFd();
  return Locked([&]() -> absl::Status {
    ASSIGN_OR_RETURN(UniqueFd blobs,
                     OpenDirsAt(root_.get(), {blob.step_.repo.folder, "blobs"}, false, where));
    const std::string name = blob.incomplete_path_.filename().string();
    const std::optional<DirEntry> present = StatAt(blobs.get(), blob.file_.etag);
    if (present.has_value() && present->is_file && present->size == blob.file_.size) {
      unlinkat(blobs.get(), name.c_str(), 0);  // another worker's copy won
    } else if (renameat(blobs.get(), name.c_str(), blobs.get(), blob.file_.etag.c_str()) != 0) {
      return absl::InternalError(absl::StrCat(where, ": cannot move file ", Quoted(blob.file_.path),
                                              " into blobs/: ", std::strerror(errno)));
    } else {
      bytes_cached_ += blob.file_.size;
    }
    blob.incomplete_path_.clear();
    RETURN_IF_ERROR(LinkEntry(root_.get(), blob.step_, blob.file_, where));
    unlink(blob.reservation_.c_str());
    blob.reservation_.clear();
    const uint64_t reserved = bytes_reserved_;
    bytes_reserved_ = reserved > blob.file_.size ? reserved - blob.file_.size : 0;
    return absl::OkStatus();
  });
}

absl::StatusOr<std::filesystem::path> SourceCache::FinishStep(const StepPin& pin) {
  const CacheStep& step = pin.step();
  return Locked([&]() -> absl::StatusOr<std::filesystem::path> {
    absl::StatusOr<std::filesystem::path> complete = CheckComplete(step);
    if (absl::IsNotFound(complete.status())) {
      return absl::FailedPreconditionError(complete.status().message());
    }
    if (!complete.ok()) return complete.status();
    RETURN_IF_ERROR(WriteRef(root_.get(), step, Where(step)));
    absl::StatusOr<UniqueFd> snapshots =
        OpenDirsAt(root_.get(), {step.repo.folder, "snapshots"}, false, Where(step));
    if (snapshots.ok()) TouchAt(snapshots->get(), step.snapshot);
    return complete;
  });
}

absl::StatusOr<SourceCacheMetrics> SourceCache::Refresh() {
  RETURN_IF_ERROR(Locked([&]() -> absl::Status {
    Rescan();
    return absl::OkStatus();
  }));
  return metrics();
}

SourceCacheMetrics SourceCache::metrics() const {
  SourceCacheMetrics metrics;
  metrics.bytes_cached = bytes_cached_;
  metrics.bytes_reserved = bytes_reserved_;
  metrics.hits = hits_;
  metrics.misses = misses_;
  metrics.evicted_steps = evicted_steps_;
  metrics.evicted_bytes = evicted_bytes_;
  return metrics;
}

}  // namespace anisoscope::cache
