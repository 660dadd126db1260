// Renders a WatchJob event stream as progress text for stderr.
//
// One line per checkpoint that finishes:
//   [3/12] step 20000 done 4.1 s
//   [4/12] step 30000 skipped (already stored)
//   [5/12] step 40000 FAILED: <error>
//   [6/12] step 50000 cancelled
// Checkpoints already finished in the first (snapshot) event are listed the same way. A
// followed run's new checkpoint: "step 60000 written: queued". An alarm a step fired:
// "ALARM (critical) at step 3000: attention_entropy_collapse layer 0: <summary> [alarm 7]",
// and "alarm 7 resolved at step 5000: ..." when a later step resolves it.
// On a TTY, a remote step's download ("[2/12] step 5 fetching 1.2 GiB/3.4 GiB at
// 180.0 MiB/s, cache 12.0 GiB": the worker's download rate and its node's cache size), then
// the step being computed and its batch progress are shown on one transient
// line rewritten with '\r' (and erased before the next permanent line); off a TTY,
// nothing but the permanent lines is written. Not thread-safe; no I/O of its own.
#pragma once

#include <set>
#include <string>

#include "anisoscope/v1/anisoscope.pb.h"

namespace anisoscope::client {

class ProgressPrinter {
 public:
  explicit ProgressPrinter(bool tty) : tty_(tty) {}

  // The text to write for `event` (often empty off a TTY).
  std::string Render(const v1::JobEvent& event);
  // The text that erases a pending transient line (empty when there is none).
  std::string Clear();

  // "job 7 succeeded: 10 done, 2 skipped (12 checkpoints)"; the job error is appended
  // when there is one.
  static std::string Summary(const v1::Job& job);
  // True when the job succeeded and every checkpoint is done or skipped.
  static bool Succeeded(const v1::Job& job);

 private:
  std::string FinishedLine(const v1::Job& job, const v1::CheckpointStatus& checkpoint);
  std::string Transient(const std::string& text);

  bool tty_;
  bool transient_shown_ = false;
  int finished_ = 0;                  // permanent lines written so far
  std::set<int64_t> reported_steps_;  // steps already given a permanent line
};

}  // namespace anisoscope::client
