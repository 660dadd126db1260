// UnitProbeFromSpec's bounds on a hostile token file, and ProbeLabel (server/jobs/unit_probe.h):
// a stored probe's label from the job's unit and the samples and tokens the worker ran.
#include "server/jobs/unit_probe.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/process_memory.h"

namespace anisoscope::server {
namespace {

namespace pb = ::anisoscope::v1;

pb::UnitProbe TokenUnit(const std::vector<int>& lengths) {
  pb::UnitProbe unit;
  unit.mutable_tokens()->set_file_name("probe.jsonl");
  for (const int length : lengths) {
    pb::TokenSample* sample = unit.mutable_tokens()->add_samples();
    for (int i = 0; i < length; ++i) sample->add_ids(i);
  }
  return unit;
}

pb::UnitProbe TextUnit(pb::ProbeMode mode, int64_t seq_len) {
  pb::UnitProbe unit;
  unit.mutable_text()->set_path("/data/probes/wiki.test.raw");
  unit.mutable_text()->set_mode(mode);
  unit.set_seq_len(seq_len);
  return unit;
}


// Issue 37: a probe-tokens file of 16 lines of 8 MB cost the server +653 MiB per submit. The
// lines are cut to seq_len as read (or refused at --max-probe-tokens): the unit holds the
// kept ids only, and the submit's peak memory stays near them.
TEST(UnitProbeFromSpecTest, HugeTokenLinesCostTheKeptIdsOnly) {
  const std::filesystem::path file = std::filesystem::temp_directory_path() /
                                     ("unit_probe_test_" + std::to_string(::getpid()) + ".jsonl");
  {
    std::string line = "[5";
    for (int i = 0; i < (1 << 21); ++i) line += ",1";  // 4 MiB, 2M ids
    line += "]\n";
    std::ofstream out(file, std::ios::binary);
    for (int i = 0; i < 16; ++i) out << line;
  }
  storage::JobSpec spec;
  spec.probe_source = "tokens";
  spec.probe_path = file.string();
  spec.samples = 128;
  spec.seq_len = 64;
  const int64_t peak_before = PeakResidentBytes();
  absl::StatusOr<pb::UnitProbe> unit = UnitProbeFromSpec(spec, FileGate::Host(), 262144);
  const int64_t growth = PeakResidentBytes() - peak_before;
  ASSERT_TRUE(unit.ok()) << unit.status();
  ASSERT_EQ(unit->tokens().samples_size(), 16);
  for (const pb::TokenSample& sample : unit->tokens().samples()) {
    ASSERT_EQ(sample.ids_size(), 64);
    EXPECT_EQ(sample.ids(0), 5);
  }
  EXPECT_LT(growth, 16 << 20) << "peak RSS grew by " << growth << " bytes";

  // Without a seq_len the samples are kept whole: the first line passes the bound, refused.
  spec.seq_len = 0;
  unit = UnitProbeFromSpec(spec, FileGate::Host(), 262144);
  EXPECT_EQ(unit.status().code(), absl::StatusCode::kResourceExhausted) << unit.status();
  EXPECT_NE(unit.status().message().find("line 1"), std::string::npos) << unit.status();
  std::filesystem::remove(file);
}

TEST(ProbeLabelTest, TokenProbeOfEqualSamplesIsFileSamplesByLength) {
  EXPECT_EQ(ProbeLabel(TokenUnit({512, 512, 512}), 3, 1536), "probe.jsonl · 3 x 512");
  // Longer samples cut by the worker to the model's length count as that length.
  EXPECT_EQ(ProbeLabel(TokenUnit({900, 600, 512, 20}), 3, 1536), "probe.jsonl · 3 x 512");
}

TEST(ProbeLabelTest, TokenProbeOfUnequalSamplesCountsSamplesAndTokens) {
  EXPECT_EQ(ProbeLabel(TokenUnit({600, 400}), 2, 1000), "probe.jsonl · 2 samples, 1,000 tokens");
  EXPECT_EQ(ProbeLabel(TokenUnit({30000, 30000, 10}), 3, 60010),
            "probe.jsonl · 3 samples, 60,010 tokens");
  EXPECT_EQ(ProbeLabel(TokenUnit({7}), 1, 7), "probe.jsonl · 1 x 7");
}

TEST(ProbeLabelTest, TextProbeSaysWindowsOrLinesAndTheLengthOnlyWhenEverySampleHasIt) {
  EXPECT_EQ(ProbeLabel(TextUnit(pb::PROBE_MODE_WINDOWS, 512), 128, 65536),
            "wiki.test.raw · 128 windows x 512");
  EXPECT_EQ(ProbeLabel(TextUnit(pb::PROBE_MODE_LINES, 64), 128, 8192),
            "wiki.test.raw · 128 lines x 64");
  // Shorter lines, or no --seq-len to compare with: samples and tokens.
  EXPECT_EQ(ProbeLabel(TextUnit(pb::PROBE_MODE_LINES, 64), 128, 6000),
            "wiki.test.raw · 128 lines, 6,000 tokens");
  EXPECT_EQ(ProbeLabel(TextUnit(pb::PROBE_MODE_UNSPECIFIED, 0), 2, 1024),
            "wiki.test.raw · 2 windows, 1,024 tokens");
  EXPECT_EQ(ProbeLabel(TextUnit(pb::PROBE_MODE_WINDOWS, 0), 1, 1024),
            "wiki.test.raw · 1 window x 1,024");
}

}  // namespace
}  // namespace anisoscope::server
