// The size bounds of a job's probe, checked at submit (and again when a job resumes), so
// that no probe is too big to hold and no unit too big to send: a unit that cannot fit a
// gRPC message would otherwise be leased and never delivered.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "anisoscope/v1/anisoscope.pb.h"
#include "server/wire/request_limits.h"

namespace anisoscope::server {

// Room a WorkUnit needs besides its probe: ids, the run name and two checkpoint paths (at
// most PATH_MAX each), the allowed roots, the options.
inline constexpr int64_t kUnitEnvelopeBytes = 1 << 20;

// Before any file is read: RESOURCE_EXHAUSTED naming --max-probe-tokens when the request's
// samples (0: 128) pass `limits.max_probe_tokens` (each sample holds a token at least) or,
// for a text probe with a seq_len, samples x seq_len does.
absl::Status CheckProbeRequest(const ::anisoscope::v1::ProbeSpec& probe,
                               const RequestLimits& limits);

// A unit's probe as the runner built it: RESOURCE_EXHAUSTED naming --max-probe-tokens when
// its token ids pass `max_tokens`, or naming the message limit (common/message_limits.h)
// when a unit carrying it would pass kMaxMessageBytes.
absl::Status CheckUnitProbe(const ::anisoscope::v1::UnitProbe& probe, int64_t max_tokens);

}  // namespace anisoscope::server
