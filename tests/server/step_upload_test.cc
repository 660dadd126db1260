// The upload check: what a worker encodes (worker/metrics_upload) the server decodes into
// exactly the step it stored before workers moved out of process; lies are refused.
#include "server/step_upload.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tests/server/fake_extractor.h"
#include "worker/metrics_upload.h"

namespace anisoscope::server {
namespace {

namespace pb = ::anisoscope::v1;

pb::CompleteWorkRequest UploadOf(const analysis::CheckpointMetrics& metrics) {
  pb::CompleteWorkRequest upload;
  upload.set_lease_id("lease");
  upload.mutable_probe()->set_id("p0123456789abcdef");
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
  EXPECT_EQ(result->probe.id, "p0123456789abcdef");
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

}  // namespace
}  // namespace anisoscope::server
