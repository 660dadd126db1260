// Which listed files a worker fetches for a step: the one home of that rule. A checkpoint is
// read as analysis/checkpoint reads a local folder (weight_files.h: model.safetensors or its
// index and shards, else pytorch_model.bin or its index and shards, config.json beside them)
// plus the tokenizer files a probe may need. Everything else a repo carries is skipped,
// because it is large and never read: other frameworks' weights (*.msgpack, *.h5, *.ot,
// *.onnx, *.tflite, GGUF), optimizer, scheduler and RNG states, training arguments, and
// .gitattributes / README files. Only files at the step's top level are read by the loader,
// so files in subfolders are skipped too. Pure functions; thread-safe.
#pragma once

#include "absl/strings/string_view.h"

namespace anisoscope::listing {

// Whether `path` (a checked, '/'-separated path relative to the step) is fetched.
bool IsCheckpointFile(absl::string_view path);

// Whether `path` holds weights (*.safetensors, pytorch_model*.bin; not their index): the
// files whose hashes decide that two steps are duplicates.
bool IsWeightFile(absl::string_view path);

}  // namespace anisoscope::listing
