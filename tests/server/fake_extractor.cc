#include "tests/server/fake_extractor.h"

#include <cctype>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/message_limits.h"

namespace anisoscope::server::testing {

namespace fs = std::filesystem;

namespace {

uint64_t Fnv1a(const std::string& bytes) {
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

}  // namespace

analysis::CheckpointMetrics FakeMetricsFor(const fs::path& checkpoint_dir) {
  const double seed = static_cast<double>(Fnv1a(checkpoint_dir.filename().string()) % 1000) / 1000;
  analysis::CheckpointMetrics metrics;
  metrics.shape.family = "bert";
  metrics.shape.num_layers = 2;
  metrics.shape.num_heads = 2;
  metrics.shape.head_dim = 4;
  metrics.shape.hidden_size = 8;
  metrics.num_samples = 3;
  metrics.num_tokens = 21;
  for (int layer = 0; layer < 2; ++layer) {
    for (int head = 0; head < 2; ++head) {
      analysis::HeadMetrics m;
      m.layer = layer;
      m.head = head;
      const double base = seed + layer * 10 + head;
      m.q_mean_norm = base + 0.1;
      m.k_mean_norm = base + 0.2;
      m.qk_mean_dot = base + 0.3;
      m.qk_mean_cosine = base + 0.4;
      m.attn_entropy = base + 0.5;
      m.q_anisotropy = base + 0.6;
      m.k_anisotropy = base + 0.7;
      m.attn_max_prob = base + 0.8;
      m.attn_min_prob = base + 0.9;
      m.attn_median_prob = base + 1.0;
      m.attn_first_token_mass = base + 1.1;
      for (int i = 0; i < 4; ++i) {
        m.q_mean.push_back(base + i);
        m.k_mean.push_back(base - i);
      }
      for (int i = 0; i < 8; ++i) {  // M = 2 token samples of head_dim 4
        m.q_sample.push_back(base + i / 10.0);
        m.k_sample.push_back(base - i / 10.0);
      }
      metrics.heads.push_back(m);
    }
  }
  metrics.token_samples = 2;
  for (int index = 0; index <= 2; ++index) {
    analysis::HiddenStateMetrics& m = metrics.hidden_states.emplace_back();
    m.index = index;
    m.anisotropy = seed + index;
    m.mean_norm = seed * 2 + index;
    m.isoscore = seed / 2 + index;
    for (int i = 0; i < 8; ++i) m.spectrum.push_back(1.0 / (i + 1));  // min(21 tokens, d = 8)
  }
  metrics.embed_partition_isotropy = seed;
  metrics.final_norm_gain.assign(8, 1.0 + seed);
  metrics.seconds = 0.01;
  return metrics;
}

std::string FakeProbeId(const fs::path& probe_file) {
  constexpr int64_t kAll = std::numeric_limits<int64_t>::max();
  if (auto tokens = analysis::ReadTokenProbe(probe_file, kAll, kAll, FileGate::Host());
      tokens.ok()) {
    return tokens->id;  // what a unit's token ids hash to
  }
  std::ifstream in(probe_file, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  char id[40];
  const auto hash = static_cast<unsigned long long>(Fnv1a(bytes.str()));
  std::snprintf(id, sizeof(id), "p%016llx%016llx", hash, ~hash);  // a real id's form
  return id;
}

void FakeEngine::FailOn(const std::string& basename) {
  absl::MutexLock lock(&mu_);
  fail_.insert(basename);
}

void FakeEngine::SetBatchDelay(absl::Duration delay) {
  absl::MutexLock lock(&mu_);
  batch_delay_ = delay;
}

void FakeEngine::HugeUploadOn(const std::string& basename) {
  absl::MutexLock lock(&mu_);
  huge_.insert(basename);
}

void FakeEngine::BlockOn(const std::string& basename) {
  absl::MutexLock lock(&mu_);
  block_.insert(basename);
}

void FakeEngine::Release() {
  absl::MutexLock lock(&mu_);
  released_ = true;
}

std::vector<std::string> FakeEngine::Extracted() const {
  absl::MutexLock lock(&mu_);
  return extracted_;
}

int FakeEngine::Started() const {
  absl::MutexLock lock(&mu_);
  return started_;
}

bool FakeEngine::WaitStarted(int n) const {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (Started() < n) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return true;
}

worker::ExtractorFactory FakeEngine::Factory() {
  return [this](const std::string&) -> absl::StatusOr<std::unique_ptr<analysis::Extractor>> {
    return std::make_unique<FakeExtractor>(this);
  };
}

absl::StatusOr<analysis::Probe> FakeExtractor::BuildProbe(const fs::path& checkpoint_dir,
                                                          const analysis::ProbeSpec& spec,
                                                          const FileGate& files) {
  if (absl::Status opened = files.OpenDirectory(checkpoint_dir).status(); !opened.ok()) {
    return opened;
  }
  if (!spec.token_ids.empty()) {
    analysis::Probe probe;
    probe.samples = spec.token_ids;
    probe.id = analysis::ComputeProbeId(probe.samples);
    probe.description = absl::StrCat("fake ", spec.file.filename().string());
    probe.metric_groups = spec.metric_groups;
    return probe;
  }
  if (absl::Status opened = files.OpenFile(spec.file).status(); !opened.ok()) return opened;
  analysis::Probe probe;
  probe.samples = {{101, 7, 8, 102}, {101, 9, 102}, {101, 5, 6, 7, 102}};
  probe.id = FakeProbeId(spec.file);
  probe.description = absl::StrCat("fake ", spec.file.filename().string());
  probe.metric_groups = spec.metric_groups;
  return probe;
}

std::string FakeFingerprintOf(const fs::path& checkpoint_dir, const FileGate& files) {
  absl::StatusOr<std::string> fingerprint = files.ReadFile(checkpoint_dir / "fingerprint", 256);
  if (!fingerprint.ok()) return "";
  while (!fingerprint->empty() && std::isspace(static_cast<unsigned char>(fingerprint->back()))) {
    fingerprint->pop_back();
  }
  return *fingerprint;
}

absl::StatusOr<analysis::CheckpointMetrics> FakeExtractor::Extract(
    const fs::path& checkpoint_dir, const analysis::Probe& probe,
    const analysis::ExtractCallbacks& callbacks, const FileGate& files) {
  if (absl::Status opened = files.OpenDirectory(checkpoint_dir).status(); !opened.ok()) {
    return opened;
  }
  const std::string name = checkpoint_dir.filename().string();
  bool fail = false;
  bool block = false;
  bool huge = false;
  absl::Duration delay;
  {
    absl::MutexLock lock(&engine_->mu_);
    delay = engine_->batch_delay_;
    ++engine_->started_;
    fail = engine_->fail_.count(name) > 0;
    block = engine_->block_.count(name) > 0;
    huge = engine_->huge_.count(name) > 0;
  }
  if (fail) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint '", (checkpoint_dir / "model.safetensors").string(),
                     "': tensor 'bert.embeddings.word_embeddings.weight' is truncated"));
  }
  const std::string fingerprint = FakeFingerprintOf(checkpoint_dir, files);
  if (!fingerprint.empty() && callbacks.fingerprinted) callbacks.fingerprinted(fingerprint);
  for (int batch = 0; batch < FakeEngine::kBatches; ++batch) {
    while (true) {
      if (callbacks.cancelled && callbacks.cancelled()) {
        return absl::CancelledError(absl::StrCat("extraction of '", name, "' cancelled"));
      }
      if (!block) break;
      {
        absl::MutexLock lock(&engine_->mu_);
        if (engine_->released_) break;
      }
      absl::SleepFor(absl::Milliseconds(2));
    }
    absl::SleepFor(delay);
    if (callbacks.progress) callbacks.progress(batch + 1, FakeEngine::kBatches);
  }
  {
    absl::MutexLock lock(&engine_->mu_);
    engine_->extracted_.push_back(name);
  }
  analysis::CheckpointMetrics metrics = FakeMetricsFor(checkpoint_dir);
  metrics.fingerprint = fingerprint;
  metrics.groups = probe.metric_groups;  // the values of the others are simply not sent
  if (huge) metrics.final_norm_gain.assign((kMaxMessageBytes / sizeof(double)) + 4096, 1.0);
  return metrics;
}

}  // namespace anisoscope::server::testing
