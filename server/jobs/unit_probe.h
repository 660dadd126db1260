// The probe a job's units carry to workers: token ids read here from the job's probe file
// (so workers need not see it), or the text probe's spec for each worker to tokenize with
// the checkpoint's own tokenizer. Thread-safe; reads the token file.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "anisoscope/v1/anisoscope.pb.h"
#include "common/file_gate.h"
#include "storage/types.h"

namespace anisoscope::server {

// The token file is opened through `files` (the job's namespace's gate) and read only as
// far as `max_tokens` ids allow. INVALID_ARGUMENT for an unknown source or mode, or a
// malformed token file (naming its line); the gate's error for a file it refuses;
// RESOURCE_EXHAUSTED naming --max-probe-tokens past `max_tokens`, or naming the message
// limit for a unit that could not be sent (server/jobs/probe_bounds.h).
absl::StatusOr<::anisoscope::v1::UnitProbe> UnitProbeFromSpec(const storage::JobSpec& spec,
                                                              const FileGate& files,
                                                              int64_t max_tokens);

// A stored probe's label, made by the server from the unit the job was submitted with and the
// samples and tokens the worker ran: "probe.jsonl · 128 x 512" (token ids),
// "wiki.txt · 128 windows x 512" or "wiki.txt · 128 lines x 512" (text) where every sample
// is known to have that length, else "probe.jsonl · 128 samples, 60,000 tokens" (or
// "windows", "lines"). The length is known for a token probe when each of its first
// `num_samples` samples holds at least num_tokens / num_samples ids, for a text probe when
// num_tokens is num_samples x its seq_len, and for a single sample.
std::string ProbeLabel(const ::anisoscope::v1::UnitProbe& unit, int64_t num_samples,
                       int64_t num_tokens);

}  // namespace anisoscope::server
