// The extractor's flags (--device, --threads, --batch-size, --allow-tf32 and, where jobs
// take their default from it, --dtype) and a step's bounds (--step-timeout,
// --worker-memory-max), declared once for anisoscope-server and anisoscope-worker.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "analysis/extractor/extractor.h"
#include "worker/step_bounds.h"

namespace anisoscope::worker {

// Adds the flags onto `options` (which must outlive `app`) and returns them, for a caller
// that also reads them from the environment or a config file. `with_dtype`: also --dtype
// (the server's default for jobs; a worker takes each unit's dtype from the server).
std::vector<CLI::Option*> AddExtractorFlags(CLI::App& app, analysis::TorchExtractorOptions& options,
                                            bool with_dtype);
// Adds --step-timeout and --worker-memory-max onto `bounds` (which must outlive `app`).
std::vector<CLI::Option*> AddStepBoundFlags(CLI::App& app, StepBounds& bounds);

// The anisoscope-worker arguments that run a worker process with `options` (but its dtype,
// which each unit brings) and `bounds`: how the server passes its flags to its embedded
// workers.
std::vector<std::string> WorkerEngineArgs(const analysis::TorchExtractorOptions& options,
                                          const StepBounds& bounds);

}  // namespace anisoscope::worker
