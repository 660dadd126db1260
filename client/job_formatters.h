// Rendering of jobs and runs for the CLI (`jobs`, `status`, `runs`). Pure functions; each
// returns the complete text, ending with a newline.
#pragma once

#include <string>
#include <vector>

#include "anisoscope/v1/anisoscope.pb.h"

namespace anisoscope::client {

// Lower-case names: "running", "succeeded", "done", "skipped", ...
std::string JobStateName(v1::JobState state);
std::string StepStateName(v1::StepState state);
// "text /data/wiki.txt (windows, 128 samples, seq-len model max)".
std::string DescribeProbe(const v1::ProbeSpec& probe);

// `jobs`: ID RUN STATE FINISHED CREATED, one row per job in the order given.
std::string JobsTable(const std::vector<v1::Job>& jobs);
// `status JOB`: a header block (run, state, probe, times, error) and a table of the
// checkpoints: STEP STATE SECONDS ATTEMPT WORKER ERROR (a remote series' job: its source in
// the header, and REVISION and COMMIT before ERROR).
std::string JobDetails(const v1::Job& job);
// `runs`: NAME FAMILY LAYERSxHEADS PROBES STEPS RANGE SAME WEIGHTS, one row per run; each
// probe as "LABEL (ID)" (its description, then its id), "; " between probes. When a run has
// steps read from a remote source, a FROM column: each source and its count of steps.
std::string RunsTable(const std::vector<v1::Run>& runs);

}  // namespace anisoscope::client
