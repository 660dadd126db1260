// A checkpoint's metrics as a worker uploads them (anisoscope.v1.StepMetrics): one block
// per scalar metric and per vector kind, layer-major. Pure; thread-safe.
#pragma once

#include "analysis/metric_catalog/checkpoint_metrics.h"
#include "anisoscope/v1/anisoscope.pb.h"

namespace anisoscope::worker {

::anisoscope::v1::StepMetrics ToUpload(const analysis::CheckpointMetrics& metrics);

}  // namespace anisoscope::worker
