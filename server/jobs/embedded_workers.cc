#include "server/jobs/embedded_workers.h"

#include "absl/strings/str_cat.h"

namespace anisoscope::server {

absl::StatusOr<std::unique_ptr<EmbeddedWorkers>> EmbeddedWorkers::Start(
    int count, const std::shared_ptr<grpc::Channel>& channel, worker::ExtractorFactory factory,
    const FileGate* server_files, const std::string& device, const std::string& key) {
  std::unique_ptr<EmbeddedWorkers> workers(new EmbeddedWorkers());
  if (count == 0) return workers;
  // Fail at start, not at the first unit, when the engine cannot run here.
  absl::StatusOr<std::unique_ptr<analysis::Extractor>> check = factory("float32");
  if (!check.ok()) return check.status();
  if (*check == nullptr) return absl::InternalError("extractor factory returned null");
  workers->factory_ = std::move(factory);
  workers->stub_ = ::anisoscope::v1::WorkerService::NewStub(channel);
  for (int i = 1; i <= count; ++i) {
    worker::WorkerLoop::Options options;
    options.info.set_name(absl::StrCat("embedded-", i));
    options.info.set_device(device);
    options.metadata = {{kEmbeddedWorkerKey, key}};
    workers->loops_.push_back(std::make_unique<worker::WorkerLoop>(
        options, workers->stub_.get(), &workers->factory_, server_files));
  }
  for (auto& loop : workers->loops_) {
    workers->threads_.emplace_back([loop = loop.get()] { loop->Run(); });
  }
  return workers;
}

EmbeddedWorkers::~EmbeddedWorkers() { Stop(); }

void EmbeddedWorkers::Stop() {
  for (auto& loop : loops_) loop->Stop();
  for (std::thread& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
}

}  // namespace anisoscope::server
