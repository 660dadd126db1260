// Plain records stored in and read from the metrics database. No SQL, no LibTorch.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace anisoscope::storage {

// ---- Results -------------------------------------------------------------------------

struct ScalarValue {
  std::string metric;  // e.g. "qk_mean_cosine", "hidden_anisotropy"
  int layer = 0;       // block index, or hidden-state index for per-hidden-state metrics
  int head = -1;       // -1 for per-hidden-state metrics
  double value = 0;
};

struct VectorValue {
  std::string kind;  // "q_mean", "k_mean"
  int layer = 0;
  int head = 0;
  std::vector<double> values;
};

struct ProbeInfo {
  std::string id;  // e.g. "p0123456789abcdef0123456789abcdef"; unique per namespace
  std::string description;
  int64_t num_samples = 0;
  int64_t num_tokens = 0;
};

// The namespace of databases made before namespaces existed, and of servers without tokens.
inline constexpr char kDefaultNamespace[] = "default";
// A worker token's namespace when it serves every namespace (never a run's or job's).
inline constexpr char kAnyNamespace[] = "*";

// All results of one checkpoint for one probe: written in one transaction.
struct StepResult {
  std::string run;
  ProbeInfo probe;
  int64_t step = 0;
  std::string checkpoint_path;
  int64_t checkpoint_bytes = 0;
  std::string model_family;
  int num_layers = 0;
  int num_heads = 0;
  int head_dim = 0;
  double seconds = 0;
  std::vector<ScalarValue> scalars;
  std::vector<VectorValue> vectors;
  std::string ns = kDefaultNamespace;  // the run's namespace
  std::string fingerprint;  // of the weight files (analysis/checkpoint/fingerprint.h); may be ""
  // Where a remote step was read from (issue 38): "hub:ORG/NAME" or "s3://BUCKET"; empty for a
  // folder's step.
  std::string origin_source;
  std::string origin_revision;  // the branch (Hub) or the folder's key prefix (S3)
  std::string origin_commit;    // the Hub commit; empty on S3
};

// Where a stored step was read from, when not from a folder (the steps table's origin_*).
struct StepOriginRecord {
  int64_t step = 0;
  std::string source;  // "hub:ORG/NAME" or "s3://BUCKET"
  std::string revision;
  std::string commit;
};

// A stored step whose weights are those of an earlier step of its run (equal fingerprints).
struct StepDuplicate {
  int64_t step = 0;
  int64_t duplicate_of = 0;  // the earliest such step
  std::string fingerprint;
};

struct RunInfo {
  std::string ns;
  std::string name;
  std::string model_family;
  int num_layers = 0;
  int num_heads = 0;
  int head_dim = 0;
  std::vector<ProbeInfo> probes;
  std::vector<int64_t> steps;             // distinct stored steps, ascending, any probe
  std::vector<StepDuplicate> duplicates;  // ascending step
  std::vector<StepOriginRecord> origins;  // the steps read from a remote source, ascending step
  std::string created_at;                 // ISO 8601 UTC
};

struct SeriesQuery {
  std::string run;
  std::string probe_id;  // empty: the run's only probe (FAILED_PRECONDITION if several)
  std::string metric;
  std::optional<int> layer;
  std::optional<int> head;
  std::optional<int64_t> from_step;   // inclusive
  std::optional<int64_t> to_step;     // inclusive
  std::optional<int64_t> after_step;  // exclusive lower bound (incremental polling)
  std::string ns = kDefaultNamespace;
  // > 0: at most this many points are read; SeriesResult::more tells that others match.
  int64_t limit = 0;
  // The engine defines `metric` (the metric catalogue): a run that stores none of its
  // values (a job computes only the metric groups it asks for) is told apart from an
  // unknown name.
  bool defined_metric = false;
};

struct SeriesPoint {
  int64_t step = 0;
  int layer = 0;
  int head = -1;
  double value = 0;
};

struct SeriesResult {
  std::string probe_id;
  std::vector<SeriesPoint> points;  // ordered by layer, head, step
  bool more = false;                // the query's limit stopped the read: more points match
};

// How many points of one (layer, head) series a SeriesQuery matches.
struct SeriesCount {
  int layer = 0;
  int head = -1;
  int64_t points = 0;
};

struct SeriesCounts {
  std::string probe_id;
  std::vector<SeriesCount> series;  // ordered by layer, head; only series with points
};

struct VectorQuery {
  std::string run;
  std::string probe_id;  // empty: the run's only probe
  std::string kind;
  int layer = 0;
  int head = 0;
  std::optional<int64_t> from_step;
  std::optional<int64_t> to_step;
  std::string ns = kDefaultNamespace;
  // Set: when the matching vectors hold more float64 values than this, none is read
  // (VectorResult::values counts them, points stays empty).
  std::optional<int64_t> max_values;
};

struct VectorPoint {
  int64_t step = 0;
  std::vector<double> values;
};

struct VectorResult {
  std::string probe_id;
  std::vector<VectorPoint> points;  // ordered by step
  int64_t values = 0;               // float64 values of the matching vectors
};

// ---- Jobs ----------------------------------------------------------------------------

enum class JobState { kQueued, kRunning, kSucceeded, kFailed, kCancelled };
enum class StepState { kPending, kRunning, kDone, kSkipped, kFailed, kCancelled };
// Every state, in the enum's order.
inline constexpr JobState kJobStates[] = {JobState::kQueued, JobState::kRunning,
                                          JobState::kSucceeded, JobState::kFailed,
                                          JobState::kCancelled};
inline constexpr StepState kStepStates[] = {StepState::kPending, StepState::kRunning,
                                            StepState::kDone,    StepState::kSkipped,
                                            StepState::kFailed,  StepState::kCancelled};

const char* JobStateName(JobState state);    // "queued", "running", ...
const char* StepStateName(StepState state);  // "pending", "running", "done", ...
// Inverses of the names above; nullopt for an unknown name.
std::optional<JobState> ParseJobState(std::string_view name);
std::optional<StepState> ParseStepState(std::string_view name);

// What a monitoring scrape reads from the store.
struct StoreStats {
  std::map<std::string, int64_t> jobs_by_state;  // every JobStateName, zeros included
  int64_t database_bytes = 0;                    // page_count * page_size
};

struct CheckpointSpec {
  int64_t step = 0;
  std::string path;  // canonical, inside an allowed root; a remote step's display name
  // A remote step (issue 38): its descriptor, opaque serialized bytes (v1.RemoteCheckpoint,
  // which the server builds and parses; the store never looks inside). Empty for a folder's.
  std::string remote;
  // How it is stored at first: pending, or already skipped (a listed duplicate, with
  // duplicate_of) or failed (a listed step that cannot be used, with error).
  StepState state = StepState::kPending;
  std::string error;
  int64_t duplicate_of = -1;
  // A remote step's revision and commit, as its listing gave them (copied out of `remote`
  // once, where the server builds it, so that nothing parses it to show them); empty for a
  // folder's. Stored with the checkpoint (checkpoints.remote_revision, remote_commit).
  std::string revision;
  std::string commit;
};

// What a job computes; stored verbatim so that a restarted server can resume it.
struct JobSpec {
  std::string run;
  std::string probe_source;  // "tokens" or "text"
  std::string probe_path;
  std::string probe_mode;  // "windows" or "lines" (text only)
  int64_t samples = 128;
  int64_t seq_len = 0;          // 0: min(2048, the model's maximum)
  int64_t token_samples = 128;  // M of q_sample, k_sample; 0: none
  // The metric groups computed (analysis/metric_catalog/metric_groups.h MetricGroupsText: "all"
  // or "core,spectra"); a job stored without it computes all.
  std::string metrics = "all";
  bool force = false;           // recompute steps already stored
  bool dedupe = false;          // skip a step whose weights equal an earlier stored step's
  std::vector<CheckpointSpec> checkpoints;  // ascending step (as submitted)
  std::string ns = kDefaultNamespace;       // the run's namespace
  // Non-empty: the directory being followed; each new whole step directory in it is added
  // to the job, which runs until a step >= until_step (when set) is added and finished.
  std::string follow_dir;
  std::optional<int64_t> until_step;
  // A series read from where it lives (issue 38): the source, opaque serialized bytes
  // (v1.CheckpointSource); empty for folders. Kept in jobs.source, not in the spec's JSON.
  std::string source;
};

// A remote step's download as its worker last reported it (v1.FetchProgress).
struct StepFetchProgress {
  int64_t bytes_done = 0;
  int64_t bytes_total = 0;
  double bytes_per_second = 0;
  int64_t cache_bytes = 0;
};

// One checkpoint of a job (the `checkpoints` table).
struct JobCheckpoint {
  int64_t step = 0;
  std::string path;
  int64_t size_bytes = 0;
  StepState state = StepState::kPending;
  std::string error;
  std::string probe_id;
  double seconds = 0;
  int attempt = 0;            // leases of this step that counted (1 while the first runs)
  std::string lease_id;       // the current lease; empty when none
  bool lease_local = false;   // the lease is held by one of the server's embedded workers
  std::string worker;         // the latest lease holder's name, as the worker gives it
  // The identity that took the current lease (a token's name, "cert:CN", "embedded" or
  // "anonymous"); only it may heartbeat, complete or fail the lease. Empty when none.
  std::string lease_holder;
  std::string fingerprint;    // of the stored step's weight files, once done
  int64_t duplicate_of = -1;  // an earlier step of the run with the same fingerprint; -1: none
  std::string remote;  // as CheckpointSpec::remote: opaque bytes; empty for a folder's step
  std::string revision;  // as CheckpointSpec::revision
  std::string commit;    // as CheckpointSpec::commit
  // While its remote step downloads, the worker's latest report; never stored (the job
  // registry keeps it in memory and clears it once the step's forward begins or it ends).
  std::optional<StepFetchProgress> fetch;
};

struct JobRecord {
  int64_t id = 0;
  JobSpec spec;
  JobState state = JobState::kQueued;
  std::string error;
  std::vector<JobCheckpoint> checkpoints;  // ascending step
  std::string created_at;
  std::string updated_at;  // set by the store on every change of the job or its checkpoints
};

// A lease ended in the store: the checkpoint's final state (SKIPPED when the step was stored
// meanwhile by another job) and the job's new updated_at.
// How FinishLease stores a step: `replace` one already stored for the probe (a job's force);
// with `dedupe`, a step whose fingerprint equals that of an earlier stored step of the run is
// skipped, not stored.
struct StoreMode {
  bool replace = false;
  bool dedupe = false;
};

// A step skipped by dedupe: why, as its checkpoint's error says it ("the same weights as
// step 100 (xxh3-128:…): not stored (dedupe)").
std::string DedupeSkipReason(int64_t duplicate_of, const std::string& fingerprint);

// The checkpoint as FinishLease stored it (its state, and fingerprint, duplicate_of and
// error as the store found them) and the job's new updated_at.
struct FinishedLease {
  JobCheckpoint checkpoint;
  std::string updated_at;
};

// ---- Access --------------------------------------------------------------------------

// A token's role (what it permits: server/auth/access_control.h's RoleMay). The names are the
// one home of the role names: the tokens table stores them, the server parses them.
enum class Role { kReader, kWriter, kWorker, kAdmin };
inline constexpr Role kRoles[] = {Role::kReader, Role::kWriter, Role::kWorker, Role::kAdmin};
const char* RoleName(Role role);  // "reader", "writer", "worker", "admin"
std::optional<Role> ParseRole(std::string_view name);
std::vector<std::string> RoleNames();  // every RoleName, least to most allowed

// A bearer token as stored: never the token itself, only its SHA-256.
struct TokenRecord {
  int64_t id = 0;
  std::string name;  // unique among active tokens, e.g. "alice-laptop"
  std::string ns;
  std::string role;    // a RoleName
  std::string sha256;  // 64 lowercase hex digits
  std::string created_at;
  std::string last_used_at;  // empty: never used
  std::string revoked_at;    // empty: active
};

// One line of the audit log.
struct AuditEntry {
  int64_t id = 0;
  std::string at;     // ISO 8601 UTC; set by the store
  std::string actor;  // a token's name, a worker, or "host:USER" for commands on the host
  std::string ns;
  std::string action;  // "submit", "cancel", "complete", "token.create", "token.revoke", ...
  std::string target;  // e.g. "job 42", "job 42 step 1000", "token alice"
  std::string detail;
};

// ---- Alarms (storage/alarm_table.h) ------------------------------------------------------

// An alarm rule's firing for one (run, probe, rule, layer): fired at `step`, resolved at a later
// stored step where the rule no longer held.
struct AlarmRecord {
  int64_t id = 0;
  std::string ns;
  std::string run;
  std::string probe_id;
  std::string rule;
  std::string metric;
  int layer = -1;  // -1: the rule aggregates over every layer
  int64_t step = 0;
  double value = 0;
  double reference = 0;  // the threshold, or the earlier value compared with
  std::string severity;
  std::string summary;
  std::string fired_at;                  // ISO 8601 UTC; set by the store
  std::optional<int64_t> resolved_step;  // nullopt while firing
  std::string resolved_at;
  int64_t revision = 0;  // set by the store: grows with every alarm fired or resolved
};

struct AlarmQuery {
  std::string ns;
  std::string run;             // empty: every run of `ns`
  std::optional<bool> firing;  // nullopt: firing and resolved
  int64_t since_revision = 0;  // only alarms fired or resolved after it
  int limit = 1000;
};

struct AlarmList {
  std::vector<AlarmRecord> alarms;  // by revision
  bool more = false;                // more matched than the limit
};

// A stored step's values of one metric (layer, head, value), for the alarm rules' history.
struct StepScalars {
  int64_t step = 0;
  std::vector<ScalarValue> values;
};

}  // namespace anisoscope::storage
