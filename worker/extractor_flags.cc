#include "worker/extractor_flags.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/device_name.h"

namespace anisoscope::worker {
namespace {

CLI::Validator Device() {
  return CLI::Validator(
      [](const std::string& value) {
        return IsDeviceName(value) ? std::string()
                                   : absl::StrCat("got '", value, "'; want cpu, cuda or cuda:N");
      },
      "");
}

CLI::Validator NonNegativeInt() {
  return CLI::Validator(
      [](const std::string& value) {
        int number = 0;
        const bool ok = CLI::detail::lexical_cast(value, number) && number >= 0;
        return ok ? std::string() : absl::StrCat("wants an integer >= 0, got '", value, "'");
      },
      "INT>=0");
}

}  // namespace

std::vector<CLI::Option*> AddExtractorFlags(CLI::App& app, analysis::TorchExtractorOptions& options,
                                            bool with_dtype) {
  std::vector<CLI::Option*> added;
  added.push_back(app.add_option("--device", options.device, "cpu, cuda or cuda:N")
                      ->capture_default_str()
                      ->check(Device()));
  if (with_dtype) {
    added.push_back(
        app.add_option(
               "--dtype", options.dtype,
               "compute dtype, sent with every unit so that remote workers compute the same way")
            ->capture_default_str()
            ->check(CLI::IsMember({"float32", "float16", "bfloat16"})));
  }
  added.push_back(app.add_option("--threads", options.num_threads,
                                 "intra-op threads per extractor; 0 uses every core")
                      ->capture_default_str()
                      ->check(NonNegativeInt()));
  added.push_back(app.add_option("--batch-size", options.batch_size,
                                 "probe samples per forward; 0 sizes each batch from its "
                                 "sequence length and the device's free memory")
                      ->capture_default_str()
                      ->check(NonNegativeInt()));
  added.push_back(app.add_flag("--allow-tf32", options.allow_tf32,
                               "on CUDA, let float32 matrix products use TF32 tensor cores "
                               "(faster; about 1e-3 relative deviation, see docs/performance.md)"));
  return added;
}

std::vector<CLI::Option*> AddStepBoundFlags(CLI::App& app, StepBounds& bounds) {
  std::vector<CLI::Option*> added;
  added.push_back(
      app.add_option("--step-timeout", bounds.step_timeout_seconds,
                     "seconds one step may run before its worker process stops it and fails "
                     "the step; 0 derives it per step: 120 s plus the checkpoint's read at "
                     "20 MB/s until the first batch, then 4x the step's length projected from "
                     "its batches' measured rate")
          ->capture_default_str()
          ->check(CLI::NonNegativeNumber));
  added.push_back(
      app.add_option("--worker-memory-max", bounds.memory_max_bytes,
                     "heap and anonymous memory a worker process may hold (e.g. 8GiB; the "
                     "kernel's RLIMIT_DATA; a checkpoint's mapping is not counted): a step "
                     "needing more fails, naming this flag; 0: no cap")
          ->capture_default_str()
          ->transform(CLI::AsSizeValue(/*kb_is_1000=*/false)));
  return added;
}

std::vector<std::string> WorkerEngineArgs(const analysis::TorchExtractorOptions& options,
                                          const StepBounds& bounds) {
  std::vector<std::string> args = {"--device",       options.device,
                                   "--threads",      std::to_string(options.num_threads),
                                   "--batch-size",   std::to_string(options.batch_size),
                                   "--step-timeout", absl::StrCat(bounds.step_timeout_seconds),
                                   "--worker-memory-max", std::to_string(bounds.memory_max_bytes)};
  if (options.allow_tf32) args.push_back("--allow-tf32");
  return args;
}

}  // namespace anisoscope::worker
