// Text probes on causal checkpoints: the checkpoint's own tokenizer (byte-level BPE without
// special tokens for GPT-NeoX and GPT-2; SentencePiece with <s> first for LLaMA), and the
// default length when --seq-len is not given: the model's maximum (max_position_embeddings
// or n_positions) where it is shorter than kDefaultSeqLen, as in these fixtures.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "analysis/extractor/extractor.h"
#include "nlohmann/json.hpp"

namespace anisoscope::analysis {
namespace {

namespace fs = std::filesystem;

struct Suite {
  const char* name;        // a key of wikitext_windows_golden.json
  const char* checkpoint;  // under the causal_runs fixture
  std::vector<int64_t> prefix;  // the special tokens before each window
};

class CausalTextProbeTest : public ::testing::TestWithParam<Suite> {};

TEST_P(CausalTextProbeTest, WindowsOfTheModelsMaximumLengthWithTheTokenizersFraming) {
  const char* fixtures = std::getenv("ANISOSCOPE_FIXTURES");
  const char* shared = std::getenv("ANISOSCOPE_SHARED_DATA");
  const char* source = std::getenv("ANISOSCOPE_SOURCE_DIR");
  ASSERT_NE(fixtures, nullptr);
  ASSERT_NE(source, nullptr);
  const fs::path checkpoint = fs::path(fixtures) / "causal_runs" / GetParam().checkpoint;
  const fs::path text = fs::path(shared ? shared : "") / "corpora/wikitext-2/wiki.test.raw";
  if (shared == nullptr || !fs::exists(text)) {
    GTEST_SKIP() << "../shared/data absent: the causal fixtures carry no tokenizer files";
  }
  std::ifstream golden_file(fs::path(source) /
                            "tests/analysis/probe/testdata/wikitext_windows_golden.json");
  const nlohmann::json golden = nlohmann::json::parse(golden_file);
  const auto first_ids = golden[GetParam().name]["first_ids"].get<std::vector<int64_t>>();
  std::ifstream config_file(checkpoint / "config.json");
  const nlohmann::json config = nlohmann::json::parse(config_file);
  const int64_t length =
      std::min(config.contains("n_positions") ? config["n_positions"].get<int64_t>()
                                              : config["max_position_embeddings"].get<int64_t>(),
               kDefaultSeqLen);
  ASSERT_LE(2 * length, static_cast<int64_t>(first_ids.size()));

  auto extractor = CreateTorchExtractor(TorchExtractorOptions());
  ASSERT_TRUE(extractor.ok()) << extractor.status();
  ProbeSpec spec;
  spec.source = ProbeSource::kText;
  spec.file = text;
  spec.samples = 2;  // seq_len 0: the default length
  auto probe = (*extractor)->BuildProbe(checkpoint, spec, FileGate::Host());
  ASSERT_TRUE(probe.ok()) << probe.status();
  ASSERT_EQ(probe->samples.size(), 2u);
  const std::vector<int64_t>& prefix = GetParam().prefix;
  const int64_t body = length - static_cast<int64_t>(prefix.size());
  for (int s = 0; s < 2; ++s) {
    std::vector<int64_t> expected = prefix;
    expected.insert(expected.end(), first_ids.begin() + s * body,
                    first_ids.begin() + (s + 1) * body);
    EXPECT_EQ(probe->samples[s], expected) << "sample " << s;
  }
  EXPECT_TRUE((*extractor)->Extract(checkpoint, *probe, {}, FileGate::Host()).ok());
}

INSTANTIATE_TEST_SUITE_P(Suites, CausalTextProbeTest,
                         ::testing::Values(Suite{"pythia", "pythia/step100", {}},
                                           Suite{"gpt2", "crfm/checkpoint-100", {}},
                                           Suite{"llama", "llama/step100", {1}}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace anisoscope::analysis
