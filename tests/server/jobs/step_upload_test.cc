// The upload check: what a worker encodes (worker/metrics_upload) the server decodes into
// exactly the step it stored before workers moved out of process; lies are refused.
#include "server/jobs/step_upload.h"

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "analysis/metric_catalog/metric_groups.h"
#include "analysis/probe/probe.h"
#include "tests/server/fake_extractor.h"
#include "worker/metrics_upload.h"

namespace anisoscope::server {
namespace {

namespace pb = ::anisoscope::v1;

pb::CompleteWorkRequest UploadOf(const analysis::CheckpointMetrics& metrics) {
  pb::CompleteWorkRequest upload;
  upload.set_lease_id("lease");
  upload.mutable_probe()->set_id("p0123456789abcdef0123456789abcdef");
  upload.mutable_probe()->set_description("tokens probe.jsonl");
  upload.mutable_probe()->set_num_samples(metrics.num_samples);
  upload.mutable_probe()->set_num_tokens(metrics.num_tokens);
  *upload.mutable_metrics() = worker::ToUpload(metrics);
  upload.set_checkpoint_bytes(1234);
  upload.set_seconds(0.5);
  return upload;
}

TEST(StepUploadTest, RoundTripKeepsEveryScalarAndVectorOfEveryHead) {
  const analysis::CheckpointMetrics metrics = testing::FakeMetricsFor("/x/step_5");
  auto result = StepResultFromUpload(UploadOf(metrics), "run", 5, "/x/step_5");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->run, "run");
  EXPECT_EQ(result->step, 5);
  EXPECT_EQ(result->checkpoint_bytes, 1234);
  EXPECT_EQ(result->fingerprint, "");
  EXPECT_EQ(result->probe.id, "p0123456789abcdef0123456789abcdef");
  EXPECT_EQ(result->probe.num_samples, metrics.num_samples);
  EXPECT_EQ(result->model_family, "bert");
  EXPECT_EQ(result->num_layers, 2);
  EXPECT_EQ(result->num_heads, 2);
  EXPECT_EQ(result->head_dim, 4);
  // Every per-head metric of 4 heads, every per-hidden-state one of 3, each per-checkpoint one.
  ASSERT_EQ(result->scalars.size(), 4 * analysis::PerHeadMetricNames().size() +
                                        3 * analysis::PerHiddenStateMetricNames().size() +
                                        analysis::PerCheckpointMetricNames().size());
  // q_mean, k_mean, q_sample, k_sample of 4 heads; 3 spectra; 1 final_norm_gain.
  ASSERT_EQ(result->vectors.size(), 4u * 4 + 3 + 1);
  for (const storage::VectorValue& vector : result->vectors) {
    if (vector.kind == "hidden_spectrum") {
      EXPECT_EQ(vector.head, -1);
      EXPECT_EQ(vector.values, metrics.hidden_states[vector.layer].spectrum);
      continue;
    }
    if (vector.kind == "final_norm_gain") {
      EXPECT_EQ(vector.layer, -1);
      EXPECT_EQ(vector.values, metrics.final_norm_gain);
      continue;
    }
    const analysis::HeadMetrics& head = metrics.heads[vector.layer * 2 + vector.head];
    const std::map<std::string, const std::vector<double>*> want = {{"q_mean", &head.q_mean},
                                                                    {"k_mean", &head.k_mean},
                                                                    {"q_sample", &head.q_sample},
                                                                    {"k_sample", &head.k_sample}};
    ASSERT_EQ(want.count(vector.kind), 1u) << vector.kind;
    EXPECT_EQ(vector.values, *want.at(vector.kind)) << vector.kind;
  }
  for (const storage::ScalarValue& scalar : result->scalars) {
    if (scalar.metric == "qk_mean_cosine") {
      EXPECT_DOUBLE_EQ(scalar.value, metrics.heads[scalar.layer * 2 + scalar.head].qk_mean_cosine);
    }
    if (scalar.metric == "hidden_mean_norm") {
      EXPECT_EQ(scalar.head, -1);
      EXPECT_DOUBLE_EQ(scalar.value, metrics.hidden_states[scalar.layer].mean_norm);
    }
    if (scalar.metric == "embed_partition_isotropy") {
      EXPECT_EQ(scalar.layer, -1);
      EXPECT_EQ(scalar.head, -1);
      EXPECT_DOUBLE_EQ(scalar.value, metrics.embed_partition_isotropy);
    }
  }
}

TEST(StepUploadTest, LyingShapesAreRefusedNamingTheField) {
  const analysis::CheckpointMetrics metrics = testing::FakeMetricsFor("/x/step_5");
  struct Lie {
    std::string expected;
    std::function<void(pb::CompleteWorkRequest*)> tell;
  };
  const std::vector<Lie> lies = {
      {"fingerprint 'md5:abc' is not \"xxh3-128:\" and 32 hex digits",
       [](pb::CompleteWorkRequest* u) { u->set_fingerprint("md5:abc"); }},
      {"fingerprint 'xxh3-128:0123456789ABCDEF0123456789abcdef' is not",
       [](pb::CompleteWorkRequest* u) {
         u->set_fingerprint("xxh3-128:0123456789ABCDEF0123456789abcdef");
       }},
      {"the shape needs 6",
       [](pb::CompleteWorkRequest* u) { u->mutable_metrics()->set_num_heads(3); }},
      {"metrics.num_layers",
       [](pb::CompleteWorkRequest* u) { u->mutable_metrics()->set_num_layers(0); }},
      {"metrics.head_dim",
       [](pb::CompleteWorkRequest* u) { u->mutable_metrics()->set_head_dim(1 << 20); }},
      {"metrics.model_family",
       [](pb::CompleteWorkRequest* u) { u->mutable_metrics()->clear_model_family(); }},
      {"metrics.model_family: 'bert\nfamily=\"x' is not one of bert, gpt2",
       [](pb::CompleteWorkRequest* u) {
         u->mutable_metrics()->set_model_family("bert\nfamily=\"x");
       }},
      {"metrics.num_layers: 2000 is outside 1..1024",
       [](pb::CompleteWorkRequest* u) { u->mutable_metrics()->set_num_layers(2000); }},
      {"probe.description has 2000 bytes",
       [](pb::CompleteWorkRequest* u) {
         u->mutable_probe()->set_description(std::string(2000, 'x'));
       }},
      {"probe.id 'p0123456789abcdef' is not 'p' and 32 hex digits",
       [](pb::CompleteWorkRequest* u) { u->mutable_probe()->set_id("p0123456789abcdef"); }},
      {"seconds must be finite",
       [](pb::CompleteWorkRequest* u) { u->set_seconds(std::numeric_limits<double>::infinity()); }},
      {"per_head[0]",
       [](pb::CompleteWorkRequest* u) {
         u->mutable_metrics()->mutable_per_head(0)->add_values(1);
       }},
      {"'attn_entropy' is missing",
       [](pb::CompleteWorkRequest* u) {
         auto* blocks = u->mutable_metrics()->mutable_per_head();
         for (int i = 0; i < blocks->size(); ++i) {
           if (blocks->Get(i).metric() == "attn_entropy") blocks->DeleteSubrange(i, 1);
         }
       }},
      {"given twice",
       [](pb::CompleteWorkRequest* u) {
         *u->mutable_metrics()->add_per_head() = u->metrics().per_head(0);
       }},
      {"unknown",
       [](pb::CompleteWorkRequest* u) {
         u->mutable_metrics()->mutable_vectors(0)->set_kind("v_mean");
       }},
      {"per_hidden_state",
       [](pb::CompleteWorkRequest* u) {
         u->mutable_metrics()->mutable_per_hidden_state(0)->clear_values();
       }},
      {"probe.id", [](pb::CompleteWorkRequest* u) { u->mutable_probe()->set_id("p12"); }},
      {"num_samples", [](pb::CompleteWorkRequest* u) { u->mutable_probe()->set_num_samples(0); }},
      {"metrics.token_samples",
       [](pb::CompleteWorkRequest* u) { u->mutable_metrics()->set_token_samples(22); }},
      {"samples[0] 'q_sample'",
       [](pb::CompleteWorkRequest* u) { u->mutable_metrics()->set_token_samples(1); }},
      {"'hidden_spectrum' is missing",
       [](pb::CompleteWorkRequest* u) { u->mutable_metrics()->clear_hidden_state_vectors(); }},
      {"hidden_state_vectors[0]",
       [](pb::CompleteWorkRequest* u) { u->mutable_probe()->set_num_tokens(5); }},
      {"metrics.hidden_size",
       [](pb::CompleteWorkRequest* u) { u->mutable_metrics()->set_hidden_size(0); }},
      {"checkpoint_vectors[0]",
       [](pb::CompleteWorkRequest* u) {
         u->mutable_metrics()->mutable_checkpoint_vectors(0)->add_values(1);
       }},
      {"'embed_partition_isotropy' is missing",
       [](pb::CompleteWorkRequest* u) { u->mutable_metrics()->clear_per_checkpoint(); }},
  };
  for (const Lie& lie : lies) {
    pb::CompleteWorkRequest upload = UploadOf(metrics);
    lie.tell(&upload);
    auto result = StepResultFromUpload(upload, "run", 5, "/x/step_5");
    ASSERT_FALSE(result.ok()) << lie.expected;
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(result.status().message().find(lie.expected), std::string::npos) << result.status();
  }
}

// METRICS.md defines every value as a number; only a ratio that is 0/0 in a degenerate case
// (analysis::MayBeUndefined) may be NaN, and nothing may be infinite.
TEST(StepUploadTest, NonFiniteValuesOnlyWhereMetricsMdAllowsThem) {
  const analysis::CheckpointMetrics metrics = testing::FakeMetricsFor("/x/step_5");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  // (field, block name, value, allowed)
  const std::vector<std::tuple<std::string, std::string, double, bool>> cases = {
      {"per_head", "attn_entropy", nan, false},
      {"per_head", "q_mean_norm", inf, false},
      {"per_head", "qk_mean_cosine", nan, true},
      {"per_head", "qk_mean_cosine", -inf, false},
      {"per_head", "q_anisotropy", nan, true},
      {"per_hidden_state", "hidden_mean_norm", nan, false},
      {"per_hidden_state", "hidden_isoscore", nan, true},
      {"per_checkpoint", "embed_partition_isotropy", nan, false},
      {"vectors", "q_mean", nan, false},
      {"samples", "k_sample", inf, false},
      {"hidden_state_vectors", "hidden_spectrum", nan, true},
      {"checkpoint_vectors", "final_norm_gain", nan, false},
  };
  for (const auto& [field, name, value, allowed] : cases) {
    pb::CompleteWorkRequest upload = UploadOf(metrics);
    pb::StepMetrics* m = upload.mutable_metrics();
    bool set = false;
    const auto poison = [&](auto* blocks, auto name_of) {
      for (auto& block : *blocks) {
        if (name_of(block) == name) {
          block.set_values(block.values_size() - 1, value);
          set = true;
        }
      }
    };
    const auto metric = [](const pb::ScalarBlock& b) { return b.metric(); };
    const auto kind = [](const pb::VectorBlock& b) { return b.kind(); };
    if (field == "per_head") poison(m->mutable_per_head(), metric);
    if (field == "per_hidden_state") poison(m->mutable_per_hidden_state(), metric);
    if (field == "per_checkpoint") poison(m->mutable_per_checkpoint(), metric);
    if (field == "vectors") poison(m->mutable_vectors(), kind);
    if (field == "samples") poison(m->mutable_samples(), kind);
    if (field == "hidden_state_vectors") poison(m->mutable_hidden_state_vectors(), kind);
    if (field == "checkpoint_vectors") poison(m->mutable_checkpoint_vectors(), kind);
    ASSERT_TRUE(set) << field << " " << name;
    auto result = StepResultFromUpload(upload, "run", 5, "/x/step_5");
    const std::string where = field + " '" + name + "' = " + std::to_string(value);
    if (allowed) {
      EXPECT_TRUE(result.ok()) << where << ": " << result.status();
    } else {
      ASSERT_FALSE(result.ok()) << where;
      EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << where;
      EXPECT_NE(result.status().message().find("'" + name + "'"), std::string::npos)
          << result.status();
    }
  }
}

// Every name MayBeUndefined allows is a stored metric or vector kind.
TEST(StepUploadTest, TheNamesThatMayBeNanAreMetrics) {
  int undefined = 0;
  for (const auto* names : {&analysis::PerHeadMetricNames(), &analysis::PerHiddenStateMetricNames(),
                            &analysis::PerCheckpointMetricNames(), &analysis::PerBlockMetricNames(),
                            &analysis::AllVectorKinds()}) {
    for (const std::string& name : *names) undefined += analysis::MayBeUndefined(name);
  }
  EXPECT_EQ(undefined, 13);
  EXPECT_FALSE(analysis::MayBeUndefined("attn_entropy"));
}

TEST(StepUploadTest, AnUploadOfSomeGroupsStoresExactlyTheirNames) {
  analysis::CheckpointMetrics metrics = testing::FakeMetricsFor("/x/step_5");
  metrics.groups = analysis::ParseMetricGroups("core,uniformity").value();
  const pb::CompleteWorkRequest upload = UploadOf(metrics);
  EXPECT_EQ(upload.metrics().metric_groups(), "core,uniformity");
  auto result = StepResultFromUpload(upload, "run", 5, "/x/step_5");
  ASSERT_TRUE(result.ok()) << result.status();
  std::set<std::string> names;
  for (const storage::ScalarValue& scalar : result->scalars) names.insert(scalar.metric);
  for (const storage::VectorValue& vector : result->vectors) names.insert(vector.kind);
  std::set<std::string> want;
  for (const auto* list : {&analysis::PerHeadMetricNames(), &analysis::PerHiddenStateMetricNames(),
                           &analysis::PerCheckpointMetricNames(), &analysis::AllVectorKinds()}) {
    for (const std::string& name : *list) {
      const analysis::MetricGroup group = analysis::MetricGroupOf(name);
      if (group == analysis::MetricGroup::kCore || group == analysis::MetricGroup::kUniformity) {
        want.insert(name);
      }
    }
  }
  want.erase("q_mean_pre_rotary");  // a BERT
  want.erase("k_mean_pre_rotary");
  EXPECT_EQ(names, want);
  EXPECT_EQ(names.count("hidden_token_uniformity"), 1u);
  EXPECT_EQ(names.count("attn_max_prob"), 0u);
  EXPECT_EQ(names.count("hidden_spectrum"), 0u);
  EXPECT_EQ(names.count("final_norm_gain"), 0u);

  // The groups' blocks are still required; an unknown group is refused.
  pb::CompleteWorkRequest lacking = upload;
  lacking.mutable_metrics()->set_metric_groups("core,uniformity,spectra");
  auto refused = StepResultFromUpload(lacking, "run", 5, "/x/step_5");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("'hidden_sv_skewness' is missing"), std::string::npos)
      << refused.status();
  lacking.mutable_metrics()->set_metric_groups("core,shiny");
  refused = StepResultFromUpload(lacking, "run", 5, "/x/step_5");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("metrics.metric_groups: unknown metric group"),
            std::string::npos)
      << refused.status();
  // A block of a group not computed is refused as unknown.
  pb::CompleteWorkRequest extra = upload;
  extra.mutable_metrics()->set_metric_groups("core");
  EXPECT_FALSE(StepResultFromUpload(extra, "run", 5, "/x/step_5").ok());
}

// A unit's probe as the server sends it: token ids of lengths 5, 3 and 13 (21 tokens).
pb::UnitProbe TokenUnitProbe() {
  pb::UnitProbe probe;
  probe.set_samples(128);
  probe.set_token_samples(128);
  for (const std::vector<int64_t>& sample : std::vector<std::vector<int64_t>>{
           {1, 2, 3, 4, 5}, {6, 7, 8}, {9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21}}) {
    probe.mutable_tokens()->add_samples()->mutable_ids()->Add(sample.begin(), sample.end());
  }
  return probe;
}

TEST(StepUploadTest, AnUploadMustCarryTheProbeOfItsUnit) {
  const analysis::CheckpointMetrics metrics = testing::FakeMetricsFor("/x/step_5");
  const pb::UnitProbe unit = TokenUnitProbe();
  const std::string whole = analysis::ComputeProbeId(
      {{1, 2, 3, 4, 5}, {6, 7, 8}, {9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21}});
  pb::CompleteWorkRequest upload = UploadOf(metrics);  // 3 samples, 21 tokens
  upload.mutable_probe()->set_id(whole);
  EXPECT_TRUE(CheckUploadMatchesUnit(upload, unit, "").ok());
  EXPECT_TRUE(CheckUploadMatchesUnit(upload, unit, whole).ok());
  // Cut to a model's 7 positions: 5 + 3 + 7 = 15 tokens.
  upload.mutable_probe()->set_num_tokens(15);
  upload.mutable_probe()->set_id(
      analysis::ComputeProbeId({{1, 2, 3, 4, 5}, {6, 7, 8}, {9, 10, 11, 12, 13, 14, 15}}));
  EXPECT_TRUE(CheckUploadMatchesUnit(upload, unit, "").ok());

  struct Lie {
    std::string expected;
    std::function<void(pb::CompleteWorkRequest*, pb::UnitProbe*, std::string*)> tell;
  };
  const std::vector<Lie> lies = {
      {"is not the id of the unit's token probe",  // another namespace's probe id, say
       [](pb::CompleteWorkRequest* u, pb::UnitProbe*, std::string*) {
         u->mutable_probe()->set_id("p00000000000000000000000000000001");
       }},
      {"this lease's heartbeat reported",
       [](pb::CompleteWorkRequest*, pb::UnitProbe*, std::string* reported) {
         *reported = "p00000000000000000000000000000001";
       }},
      {"probe.num_tokens 12 is not the unit's token probe",
       [](pb::CompleteWorkRequest* u, pb::UnitProbe*, std::string*) {
         u->mutable_probe()->set_num_tokens(12);
       }},
      {"probe.num_tokens 21 is not the unit's token probe (3 samples of up to 13 ids) cut to any "
       "one length (its seq_len is 4)",
       [](pb::CompleteWorkRequest*, pb::UnitProbe* p, std::string*) { p->set_seq_len(4); }},
      {"probe.num_samples 2 is not the unit's 3",
       [](pb::CompleteWorkRequest* u, pb::UnitProbe*, std::string*) {
         u->mutable_probe()->set_num_samples(2);
       }},
      {"probe.num_samples 3 is more than the unit's 2",
       [](pb::CompleteWorkRequest*, pb::UnitProbe* p, std::string*) {
         p->clear_tokens();
         p->mutable_text()->set_path("/x/probe.txt");
         p->set_samples(2);
       }},
      {"metrics.token_samples: 2 is more than the unit's 1",
       [](pb::CompleteWorkRequest*, pb::UnitProbe* p, std::string*) { p->set_token_samples(1); }},
      {"metrics.metric_groups: 'core' lacks some of the unit's 'core,spectra'",
       [](pb::CompleteWorkRequest* u, pb::UnitProbe* p, std::string*) {
         u->mutable_metrics()->set_metric_groups("core");
         p->set_metrics("core,spectra");
       }},
  };
  for (const Lie& lie : lies) {
    pb::CompleteWorkRequest told = UploadOf(metrics);
    told.mutable_probe()->set_id(whole);
    pb::UnitProbe probe = unit;
    std::string reported;
    lie.tell(&told, &probe, &reported);
    const absl::Status status = CheckUploadMatchesUnit(told, probe, reported);
    ASSERT_FALSE(status.ok()) << lie.expected;
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find(lie.expected), std::string::npos) << status;
  }
}

}  // namespace
}  // namespace anisoscope::server
