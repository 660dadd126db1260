// The extractor's flags (--device, --threads, --batch-size, --allow-tf32 and, where jobs
// take their default from it, --dtype), declared once for anisoscope-server and
// anisoscope-worker.
#pragma once

#include <CLI/CLI.hpp>
#include <vector>

#include "analysis/extractor/extractor.h"

namespace anisoscope::worker {

// Adds the flags onto `options` (which must outlive `app`) and returns them, for a caller
// that also reads them from the environment or a config file. `with_dtype`: also --dtype
// (the server's default for jobs; a worker takes each unit's dtype from the server).
std::vector<CLI::Option*> AddExtractorFlags(CLI::App& app, analysis::TorchExtractorOptions& options,
                                            bool with_dtype);

}  // namespace anisoscope::worker
