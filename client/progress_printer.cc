#include "client/progress_printer.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/formatters.h"
#include "client/job_formatters.h"
#include "proto/final_states.h"

namespace anisoscope::client {
namespace {

int Total(const v1::Job& job) {
  return job.steps_total() > 0 ? job.steps_total() : job.checkpoints_size();
}

// "fetching 1.2 GiB/3.4 GiB at 180.0 MiB/s, cache 12.0 GiB".
std::string FetchText(const v1::FetchProgress& fetch) {
  std::string text = absl::StrCat("fetching ", ByteSize(static_cast<double>(fetch.bytes_done())));
  if (fetch.bytes_total() > 0) {
    absl::StrAppend(&text, "/", ByteSize(static_cast<double>(fetch.bytes_total())));
  }
  if (fetch.bytes_per_second() > 0) {
    absl::StrAppend(&text, " at ", ByteSize(fetch.bytes_per_second()), "/s");
  }
  absl::StrAppend(&text, ", cache ", ByteSize(static_cast<double>(fetch.cache_bytes())));
  return text;
}

// "ANSI erase to end of line" after a carriage return.
constexpr char kEraseLine[] = "\r\033[K";

}  // namespace

std::string ProgressPrinter::Render(const v1::JobEvent& event) {
  const v1::Job& job = event.job();
  switch (event.kind()) {
    case v1::JobEvent::KIND_SNAPSHOT: {
      std::string text;
      for (const v1::CheckpointStatus& checkpoint : job.checkpoints()) {
        if (v1::IsFinal(checkpoint.state())) text += FinishedLine(job, checkpoint);
      }
      return text;
    }
    case v1::JobEvent::KIND_STEP_STARTED:
      return Transient(absl::StrCat("[", finished_ + 1, "/", Total(job), "] step ",
                                    event.checkpoint().step(), " ..."));
    case v1::JobEvent::KIND_STEP_PROGRESS:
      return Transient(absl::StrCat("[", finished_ + 1, "/", Total(job), "] step ",
                                    event.checkpoint().step(), " batch ", event.batches_done(), "/",
                                    event.batches_total()));
    case v1::JobEvent::KIND_STEP_FETCHING:
      return Transient(absl::StrCat("[", finished_ + 1, "/", Total(job), "] step ",
                                    event.checkpoint().step(), " ", FetchText(event.fetch())));
    case v1::JobEvent::KIND_STEP_FINISHED:
      return FinishedLine(job, event.checkpoint());
    case v1::JobEvent::KIND_STEP_ADDED:
      return absl::StrCat(Clear(), "step ", event.checkpoint().step(), " written: queued\n");
    case v1::JobEvent::KIND_ALARM: {
      const v1::Alarm& alarm = event.alarm();
      const std::string layer = alarm.layer() < 0 ? "" : absl::StrCat(" layer ", alarm.layer());
      if (alarm.state() == v1::ALARM_STATE_RESOLVED) {
        return absl::StrCat(Clear(), "alarm ", alarm.id(), " resolved at step ",
                            alarm.resolved_step(), ": ", alarm.rule(), layer, "\n");
      }
      return absl::StrCat(Clear(), "ALARM (", alarm.severity(), ") at step ", alarm.step(), ": ",
                          alarm.rule(), layer, ": ", alarm.summary(), " [alarm ", alarm.id(),
                          "]\n");
    }
    case v1::JobEvent::KIND_JOB_FINISHED:
      return Clear();
    case v1::JobEvent::KIND_UNSPECIFIED:
    case v1::JobEvent_Kind_JobEvent_Kind_INT_MIN_SENTINEL_DO_NOT_USE_:
    case v1::JobEvent_Kind_JobEvent_Kind_INT_MAX_SENTINEL_DO_NOT_USE_:
      break;
  }
  return "";  // unspecified, or a kind newer than this client
}

std::string ProgressPrinter::Clear() {
  if (!transient_shown_) return "";
  transient_shown_ = false;
  return kEraseLine;
}

std::string ProgressPrinter::Transient(const std::string& text) {
  if (!tty_) return "";
  transient_shown_ = true;
  return kEraseLine + text;
}

std::string ProgressPrinter::FinishedLine(const v1::Job& job,
                                          const v1::CheckpointStatus& checkpoint) {
  if (!reported_steps_.insert(checkpoint.step()).second) return "";
  std::string text = Clear();
  absl::StrAppend(&text, "[", ++finished_, "/", Total(job), "] step ", checkpoint.step(), " ");
  switch (checkpoint.state()) {
    case v1::STEP_STATE_DONE:
      absl::StrAppend(&text, absl::StrFormat("done %.1f s", checkpoint.seconds()));
      if (checkpoint.has_duplicate_of()) {
        absl::StrAppend(&text, "; WARNING: the same weights as step ", checkpoint.duplicate_of(),
                        " (", checkpoint.fingerprint(), ")");
      }
      return text + "\n";
    case v1::STEP_STATE_SKIPPED:
      absl::StrAppend(&text, checkpoint.has_duplicate_of()
                                 ? absl::StrCat("skipped: the same weights as step ",
                                                checkpoint.duplicate_of(), " (--dedupe)")
                                 : std::string("skipped (already stored)"));
      return text + "\n";
    case v1::STEP_STATE_FAILED:
      absl::StrAppend(&text,
                      "FAILED: ", checkpoint.error().empty() ? "(no message)" : checkpoint.error());
      return text + "\n";
    case v1::STEP_STATE_UNSPECIFIED:
    case v1::STEP_STATE_PENDING:
    case v1::STEP_STATE_RUNNING:
    case v1::STEP_STATE_CANCELLED:
    case v1::StepState_INT_MIN_SENTINEL_DO_NOT_USE_:
    case v1::StepState_INT_MAX_SENTINEL_DO_NOT_USE_:
      break;
  }
  // The others, a state newer than this client included: the state's name.
  return absl::StrCat(text, StepStateName(checkpoint.state()), "\n");
}

std::string ProgressPrinter::Summary(const v1::Job& job) {
  int done = 0, skipped = 0, failed = 0, cancelled = 0, unfinished = 0;
  for (const v1::CheckpointStatus& checkpoint : job.checkpoints()) {
    switch (checkpoint.state()) {
      case v1::STEP_STATE_DONE:
        ++done;
        continue;
      case v1::STEP_STATE_SKIPPED:
        ++skipped;
        continue;
      case v1::STEP_STATE_FAILED:
        ++failed;
        continue;
      case v1::STEP_STATE_CANCELLED:
        ++cancelled;
        continue;
      case v1::STEP_STATE_UNSPECIFIED:
      case v1::STEP_STATE_PENDING:
      case v1::STEP_STATE_RUNNING:
      case v1::StepState_INT_MIN_SENTINEL_DO_NOT_USE_:
      case v1::StepState_INT_MAX_SENTINEL_DO_NOT_USE_:
        break;
    }
    ++unfinished;  // not final, or a state newer than this client
  }
  std::vector<std::string> parts = {absl::StrCat(done, " done")};
  if (skipped > 0) parts.push_back(absl::StrCat(skipped, " skipped"));
  if (failed > 0) parts.push_back(absl::StrCat(failed, " failed"));
  if (cancelled > 0) parts.push_back(absl::StrCat(cancelled, " cancelled"));
  if (unfinished > 0) parts.push_back(absl::StrCat(unfinished, " unfinished"));
  std::string text = absl::StrCat("job ", job.id(), " ", JobStateName(job.state()), ": ",
                                  absl::StrJoin(parts, ", "), " (", Total(job), " checkpoints)");
  if (!job.error().empty()) absl::StrAppend(&text, ": ", job.error());
  return text + "\n";
}

bool ProgressPrinter::Succeeded(const v1::Job& job) {
  if (job.state() != v1::JOB_STATE_SUCCEEDED) return false;
  for (const v1::CheckpointStatus& checkpoint : job.checkpoints()) {
    if (checkpoint.state() != v1::STEP_STATE_DONE && checkpoint.state() != v1::STEP_STATE_SKIPPED) {
      return false;
    }
  }
  return true;
}

}  // namespace anisoscope::client
