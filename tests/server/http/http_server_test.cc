// The HTTP API end to end: an in-process AnisoscopeServer with --http-listen on
// 127.0.0.1:0 over a real SQLite file, reached by a real HTTP client over loopback.
#include "server/http/http_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "analysis/metric_catalog/metric_catalog.h"
#include "server/http/http_json.h"
#include "server/http/http_routes.h"
#include "server/http/http_walls.h"
#include "server/http/static_files.h"
#include "tests/server/server_test_util.h"

namespace anisoscope::server::testing {
namespace {

using nlohmann::json;

// A synthetic stored value, so expectations are computed here, independently.
double Value(int64_t step, int layer, int head) { return step * 0.001 + layer + head * 0.1; }

class HttpServerTest : public ServerFixture {
 protected:
  void SetUp() override {
    ServerFixture::SetUp();
    web_dir_ = base_ / "web";
    fs::create_directories(web_dir_ / "js");
    std::ofstream(web_dir_ / "index.html") << "<html>dashboard</html>";
    std::ofstream(web_dir_ / "js" / "app.mjs") << "export const x = 1;";
    std::ofstream(web_dir_ / "style.css") << "body{}";
    std::ofstream(outside_ / "secret.txt") << "secret";
    http_listen_ = "127.0.0.1:0";
    StartServer();
    client_ = std::make_unique<httplib::Client>(server_->http_address());
  }

  void TearDown() override {
    client_.reset();
    ServerFixture::TearDown();
  }

  // Writes run `run` (2 layers x 2 heads, head_dim 3) at `steps` for probe `probe`.
  // `with_samples`: also two token samples per head, Q (s, j, 0) and K (j, -s, 0) for
  // token j, and hidden_mean_norm 1 + hidden * (step + 1) (rising with hidden_anisotropy).
  void WriteRun(const std::string& run, const std::string& probe, const std::vector<int64_t>& steps,
                bool with_samples = false) {
    for (int64_t step : steps) {
      storage::StepResult result;
      result.run = run;
      result.probe.id = probe;
      result.probe.description = "synthetic";
      result.probe.num_samples = 2;
      result.probe.num_tokens = 8;
      result.step = step;
      result.model_family = "bert";
      result.num_layers = 2;
      result.num_heads = 2;
      result.head_dim = 3;
      for (int layer = 0; layer < 2; ++layer) {
        for (int head = 0; head < 2; ++head) {
          result.scalars.push_back({"qk_mean_cosine", layer, head, Value(step, layer, head)});
          const double s = static_cast<double>(step);
          // Q̄ = (s, 1, 0), K̄ = (-1, s, 0): all in the plane z = 0.
          result.vectors.push_back({"q_mean", layer, head, {s, 1, 0}});
          result.vectors.push_back({"k_mean", layer, head, {-1, s, 0}});
          if (with_samples) {
            result.vectors.push_back({"q_sample", layer, head, {s, 0, 0, s, 1, 0}});
            result.vectors.push_back({"k_sample", layer, head, {0, -s, 0, 1, -s, 0}});
          }
        }
      }
      for (int hidden = 0; hidden <= 2; ++hidden) {
        result.scalars.push_back({"hidden_anisotropy", hidden, -1, 0.5 + hidden});
        if (with_samples) {
          result.scalars.push_back(
              {"hidden_mean_norm", hidden, -1, 1.0 + hidden * (static_cast<double>(step) + 1)});
        }
      }
      ASSERT_TRUE(server_->store().WriteStep(result, /*replace=*/false).ok());
    }
  }

  httplib::Result Get(const std::string& path) { return client_->Get(path.c_str()); }

  json GetJson(const std::string& path, int want_status = 200) {
    httplib::Result res = Get(path);
    if (!res) {
      ADD_FAILURE() << "GET " << path << " failed: " << httplib::to_string(res.error());
      return json();
    }
    EXPECT_EQ(res->status, want_status) << path << ": " << res->body;
    EXPECT_EQ(res->get_header_value("Content-Type"), "application/json; charset=utf-8");
    EXPECT_FALSE(res->has_header("Access-Control-Allow-Origin")) << "no CORS by default";
    return json::parse(res->body);
  }

  // The error object of a failed call, after checking its HTTP status and code name.
  json GetError(const std::string& path, int status, const std::string& code) {
    json body = GetJson(path, status);
    EXPECT_EQ(body["error"]["code"], status) << body;
    EXPECT_EQ(body["error"]["status"], code) << body;
    return body["error"];
  }

  std::unique_ptr<httplib::Client> client_;
};

TEST_F(HttpServerTest, RunsListsModelShapeProbesAndStepsAsStrings) {
  WriteRun("r", "p1", {0, 100});
  json body = GetJson("/api/v1/runs");
  ASSERT_EQ(body["runs"].size(), 1u);
  const json& run = body["runs"][0];
  EXPECT_EQ(run["name"], "r");
  EXPECT_EQ(run["modelFamily"], "bert");
  EXPECT_EQ(run["numLayers"], 2);
  EXPECT_EQ(run["numHeads"], 2);
  EXPECT_EQ(run["headDim"], 3);
  EXPECT_EQ(run["steps"], json::array({"0", "100"}));
  EXPECT_EQ(run["probes"][0]["id"], "p1");
  EXPECT_EQ(run["probes"][0]["numSamples"], "2");
  EXPECT_TRUE(run.contains("createdAt"));
}

TEST_F(HttpServerTest, SeriesFiltersByLayerHeadAndStepRange) {
  WriteRun("r", "p1", {0, 100, 200, 300});
  json body = GetJson(
      "/api/v1/series?run=r&metric=qk_mean_cosine&layer=1&head=0&from_step=100"
      "&to_step=200");
  EXPECT_EQ(body["probeId"], "p1");
  EXPECT_EQ(body["metric"], "qk_mean_cosine");
  EXPECT_EQ(body["downsampled"], false);
  ASSERT_EQ(body["points"].size(), 2u);
  for (const json& point : body["points"]) {
    EXPECT_EQ(point["layer"], 1);
    EXPECT_EQ(point["head"], 0);
    const int64_t step = std::stoll(point["step"].get<std::string>());
    EXPECT_DOUBLE_EQ(point["value"].get<double>(), Value(step, 1, 0));
  }
  EXPECT_EQ(body["points"][0]["step"], "100");

  // Every head, ordered by layer, head, step; lowerCamelCase names accepted too.
  body = GetJson("/api/v1/series?run=r&probeId=p1&metric=qk_mean_cosine");
  ASSERT_EQ(body["points"].size(), 16u);
  EXPECT_EQ(body["points"][4]["head"], 1);
  EXPECT_EQ(body["points"][4]["step"], "0");

  body = GetJson("/api/v1/series?run=r&metric=hidden_anisotropy&layer=2");
  ASSERT_EQ(body["points"].size(), 4u);
  EXPECT_EQ(body["points"][0]["head"], -1);
  EXPECT_DOUBLE_EQ(body["points"][0]["value"].get<double>(), 2.5);
}

TEST_F(HttpServerTest, SinceStepReturnsOnlyLaterSteps) {
  WriteRun("r", "p1", {0, 100, 200});
  json body = GetJson("/api/v1/series?run=r&metric=qk_mean_cosine&since_step=100");
  ASSERT_EQ(body["points"].size(), 4u);
  for (const json& point : body["points"]) EXPECT_EQ(point["step"], "200");
  WriteRun("r", "p1", {300});
  body = GetJson("/api/v1/series?run=r&metric=qk_mean_cosine&since_step=200&layer=0&head=0");
  ASSERT_EQ(body["points"].size(), 1u);
  EXPECT_EQ(body["points"][0]["step"], "300");
  body = GetJson("/api/v1/series?run=r&metric=qk_mean_cosine&since_step=300");
  EXPECT_EQ(body["points"], json::array());
}

TEST_F(HttpServerTest, MaxPointsDownsamplesEachSeriesAndSaysSo) {
  std::vector<int64_t> steps;
  for (int64_t step = 0; step < 20; ++step) steps.push_back(step * 10);
  WriteRun("r", "p1", steps);
  json body = GetJson("/api/v1/series?run=r&metric=qk_mean_cosine&max_points=4");
  EXPECT_EQ(body["downsampled"], true);
  // Values rise with the step: each of the 2 buckets keeps its first and last point.
  ASSERT_EQ(body["points"].size(), 4u * 4u);
  EXPECT_EQ(body["points"][0]["step"], "0");
  EXPECT_EQ(body["points"][1]["step"], "90");
  EXPECT_EQ(body["points"][2]["step"], "100");
  EXPECT_EQ(body["points"][3]["step"], "190");
  body = GetJson("/api/v1/series?run=r&metric=qk_mean_cosine&max_points=20");
  EXPECT_EQ(body["downsampled"], false);
  EXPECT_EQ(body["points"].size(), 80u);
}

TEST_F(HttpServerTest, VectorsAndTrajectoryOfOneHead) {
  WriteRun("r", "p1", {0, 1, 2});
  json vectors = GetJson("/api/v1/vectors?run=r&kind=k_mean&layer=1&head=1&from_step=1");
  ASSERT_EQ(vectors["points"].size(), 2u);
  EXPECT_EQ(vectors["points"][1]["step"], "2");
  EXPECT_EQ(vectors["points"][1]["values"], json::array({-1.0, 2.0, 0.0}));

  json trajectory = GetJson("/api/v1/trajectory?run=r&layer=1&head=1");
  EXPECT_EQ(trajectory["probeId"], "p1");
  ASSERT_EQ(trajectory["points"].size(), 3u);
  EXPECT_NEAR(trajectory["explainedVariance"].get<double>(), 1.0, 1e-12);
  ASSERT_EQ(trajectory["singularValues"].size(), 3u);
  EXPECT_NE(trajectory["basis"].get<std::string>().find("singular"), std::string::npos);
  // Every vector lies in the plane z = 0, so the projection keeps each one's length.
  for (const json& point : trajectory["points"]) {
    const double s = std::stod(point["step"].get<std::string>());
    EXPECT_NEAR(std::hypot(point["qX"].get<double>(), point["qY"].get<double>()),
                std::hypot(s, 1.0), 1e-9);
    EXPECT_NEAR(std::hypot(point["kX"].get<double>(), point["kY"].get<double>()),
                std::hypot(s, 1.0), 1e-9);
  }
}

TEST_F(HttpServerTest, DerivedAnalysesOfTheStoredMetrics) {
  WriteRun("r", "p1", {0, 1, 2}, /*with_samples=*/true);
  json cloud = GetJson("/api/v1/token_cloud?run=r&layer=1&head=0&basis=q");
  EXPECT_EQ(cloud["basis"], "q");
  EXPECT_EQ(cloud["tokenSamples"], 2);
  ASSERT_EQ(cloud["steps"].size(), 3u);
  EXPECT_NE(cloud["description"].get<std::string>().find("Q token samples"), std::string::npos);
  // Every sample lies in the plane z = 0, so the projection keeps each one's length.
  for (const json& step : cloud["steps"]) {
    const double s = std::stod(step["step"].get<std::string>());
    for (int j = 0; j < 2; ++j) {
      EXPECT_NEAR(std::hypot(step["qX"][j].get<double>(), step["qY"][j].get<double>()),
                  std::hypot(s, j), 1e-9);
      EXPECT_NEAR(std::hypot(step["kX"][j].get<double>(), step["kY"][j].get<double>()),
                  std::hypot(s, j), 1e-9);
    }
  }
  EXPECT_NE(GetError("/api/v1/token_cloud?run=r&layer=1&head=0&basis=qk", 400,
                     "INVALID_ARGUMENT")["message"]
                .get<std::string>()
                .find("basis must be union, q or k"),
            std::string::npos);
  GetError("/api/v1/token_cloud?run=r&layer=2&head=0", 400, "INVALID_ARGUMENT");

  // Q̄ = (s, 1, 0) and K̄ = (-1, s, 0) in every head: orthogonal, concatenated or not.
  json concat = GetJson("/api/v1/series?run=r&metric=qk_mean_cosine_concat");
  ASSERT_EQ(concat["points"].size(), 6u);
  EXPECT_EQ(concat["points"][5]["layer"], 1);
  EXPECT_EQ(concat["points"][5]["head"], -1);
  EXPECT_NEAR(concat["points"][5]["value"].get<double>(), 0.0, 1e-12);
  ASSERT_EQ(
      GetJson("/api/v1/series?run=r&metric=qk_mean_cosine_concat&layer=0&since_step=0")["points"]
          .size(),
      2u);
  GetError("/api/v1/series?run=r&metric=qk_mean_cosine_concat&head=0", 400, "INVALID_ARGUMENT");

  json correlation = GetJson("/api/v1/correlation?run=r&from_step=1");
  EXPECT_EQ(correlation["xMetric"], "hidden_mean_norm");
  ASSERT_EQ(correlation["points"].size(), 2u);
  EXPECT_EQ(correlation["points"][0]["hiddenStates"], 3);
  EXPECT_NEAR(correlation["points"][0]["spearmanRho"].get<double>(), 1.0, 1e-12);
  EXPECT_NEAR(correlation["points"][0]["pearsonR"].get<double>(), 1.0, 1e-12);
  GetError("/api/v1/correlation?run=nope", 404, "NOT_FOUND");

  EXPECT_NEAR(GetJson("/api/v1/isotropic_baseline?dimension=64")["cosineP95"].get<double>(),
              0.20582174864473401, 1e-12);
  GetError("/api/v1/isotropic_baseline?dimension=1", 400, "INVALID_ARGUMENT");

  json catalog = GetJson("/api/v1/metrics-catalog");
  ASSERT_EQ(catalog["metrics"].size(), analysis::MetricCatalog().size());
  EXPECT_EQ(catalog["metrics"][0]["name"], analysis::MetricCatalog()[0].name);
  EXPECT_EQ(catalog["metrics"][0]["mayBeUndefined"], false);
  EXPECT_EQ(catalog["groups"][0]["name"], "core");
}

TEST_F(HttpServerTest, JobsListedMostRecentFirstFilteredByRun) {
  const fs::path dir = MakeCheckpoints("ckpt", {0, 10});
  pb::Job first;
  pb::Job second;
  ASSERT_TRUE(Submit(DirRequest("a", dir), &first).ok());
  WaitFinal(first.id());
  ASSERT_TRUE(Submit(DirRequest("b", dir), &second).ok());
  WaitFinal(second.id());

  json all = GetJson("/api/v1/jobs");
  ASSERT_EQ(all["jobs"].size(), 2u);
  EXPECT_EQ(all["jobs"][0]["id"], std::to_string(second.id()));
  json only_a = GetJson("/api/v1/jobs?run=a&limit=5");
  ASSERT_EQ(only_a["jobs"].size(), 1u);
  EXPECT_EQ(only_a["jobs"][0]["run"], "a");
  EXPECT_EQ(only_a["jobs"][0]["state"], "JOB_STATE_SUCCEEDED");
  EXPECT_EQ(only_a["jobs"][0]["stepsTotal"], 2);
  EXPECT_EQ(only_a["jobs"][0]["stepsFinished"], 2);
  EXPECT_EQ(GetJson("/api/v1/jobs?run=nobody")["jobs"], json::array());
  EXPECT_EQ(GetJson("/api/v1/jobs?limit=1")["jobs"].size(), 1u);

  json job = GetJson("/api/v1/jobs/" + std::to_string(first.id()));
  EXPECT_EQ(job["run"], "a");
  ASSERT_EQ(job["checkpoints"].size(), 2u);
  EXPECT_EQ(job["checkpoints"][1]["step"], "10");
  EXPECT_EQ(job["checkpoints"][1]["state"], "STEP_STATE_DONE");
}

TEST_F(HttpServerTest, ErrorsCarryTheirHttpStatusAndJsonBody) {
  WriteRun("r", "p1", {0});
  WriteRun("two", "p1", {0});
  WriteRun("two", "p2", {0});
  EXPECT_NE(GetError("/api/v1/series?run=nope&metric=qk_mean_cosine", 404, "NOT_FOUND")["message"]
                .get<std::string>()
                .find("run 'nope' not found"),
            std::string::npos);
  GetError("/api/v1/series?run=r", 400, "INVALID_ARGUMENT");
  GetError("/api/v1/series?run=r&metric=nope", 400, "INVALID_ARGUMENT");
  GetError("/api/v1/series?run=r&metric=qk_mean_cosine&probe_id=p9", 404, "NOT_FOUND");
  GetError("/api/v1/series?run=two&metric=qk_mean_cosine", 409, "FAILED_PRECONDITION");
  GetError("/api/v1/series?run=r&metric=qk_mean_cosine&from_step=5&to_step=1", 400,
           "INVALID_ARGUMENT");
  GetError("/api/v1/series?run=r&metric=qk_mean_cosine&max_points=-1", 400, "INVALID_ARGUMENT");
  EXPECT_EQ(GetError("/api/v1/series?run=r&metric=qk_mean_cosine&colour=red", 400,
                     "INVALID_ARGUMENT")["message"],
            "unknown parameter 'colour'");
  EXPECT_NE(GetError("/api/v1/series?run=r&metric=qk_mean_cosine&layer=one", 400,
                     "INVALID_ARGUMENT")["message"]
                .get<std::string>()
                .find("parameter 'layer'"),
            std::string::npos);
  GetError("/api/v1/series?run=r&metric=qk_mean_cosine&layer=1&layer=2", 400, "INVALID_ARGUMENT");
  GetError("/api/v1/vectors?run=r&kind=v_mean&layer=0&head=0", 400, "INVALID_ARGUMENT");
  GetError("/api/v1/vectors?run=r&kind=q_mean&layer=-1&head=0", 400, "INVALID_ARGUMENT");
  GetError("/api/v1/trajectory?run=r&layer=7&head=0", 400, "INVALID_ARGUMENT");
  GetError("/api/v1/trajectory?run=nope", 404, "NOT_FOUND");
  GetError("/api/v1/jobs/12345", 404, "NOT_FOUND");
  GetError("/api/v1/jobs/abc", 400, "INVALID_ARGUMENT");
  GetError("/api/v1/jobs/0", 400, "INVALID_ARGUMENT");
  GetError("/api/v1/jobs?limit=-2", 400, "INVALID_ARGUMENT");
  GetError("/api/v1/nothing", 404, "NOT_FOUND");
}

TEST_F(HttpServerTest, AuditListsAFoldersStepsAndSourceParametersExcludeEachOther) {
  const fs::path dir = MakeCheckpoints("audited", {100, 200});
  const json audit = GetJson("/api/v1/audit?checkpoints_dir=" + dir.string());
  ASSERT_EQ(audit["steps"].size(), 2u) << audit.dump();
  EXPECT_EQ(audit["steps"][0]["step"], "100");
  EXPECT_EQ(audit["steps"][1]["step"], "200");
  EXPECT_FALSE(audit["steps"][0].contains("duplicateOf"));  // a folder's weights are not read
  EXPECT_TRUE(audit["problems"].is_array());
  // A source by its fields' names, `revisions` comma-separated; one of hub, hub_repos, s3.
  EXPECT_EQ(GetError("/api/v1/audit?hub=a/b&s3=s3://b/", 400, "INVALID_ARGUMENT")["message"],
            "parameters 'hub' and 's3' exclude each other");
  EXPECT_EQ(GetError("/api/v1/audit?hub=a/b&revisions=x,,y", 400, "INVALID_ARGUMENT")["message"],
            "parameter 'revisions': an empty name in 'x,,y' (comma-separated)");
  EXPECT_EQ(
      GetError("/api/v1/audit?hub=a/b&revisions=x&revisions=y", 400, "INVALID_ARGUMENT")["message"],
      "parameter 'revisions' is given twice");
  EXPECT_EQ(
      GetError("/api/v1/audit?checkpoints_dir=/x&colour=red", 400, "INVALID_ARGUMENT")["message"],
      "unknown parameter 'colour'");
  GetError("/api/v1/audit", 400, "INVALID_ARGUMENT");  // no series
  // This server allows no remote source: the audit's answer, naming it.
  GetError("/api/v1/audit?hub=EleutherAI/pythia-160m&revisions=step1000", 403, "PERMISSION_DENIED");
}

TEST_F(HttpServerTest, StaticFilesAreServedWithTheirContentType) {
  httplib::Result index = Get("/");
  ASSERT_TRUE(index);
  EXPECT_EQ(index->status, 200);
  EXPECT_EQ(index->body, "<html>dashboard</html>");
  EXPECT_EQ(index->get_header_value("Content-Type"), "text/html; charset=utf-8");
  httplib::Result module = Get("/js/app.mjs");
  ASSERT_TRUE(module);
  EXPECT_EQ(module->status, 200);
  EXPECT_EQ(module->get_header_value("Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(Get("/style.css")->get_header_value("Content-Type"), "text/css; charset=utf-8");
  EXPECT_EQ(Get("/missing.js")->status, 404);
}

TEST_F(HttpServerTest, PathsEscapingTheWebDirAreRefused) {
  fs::create_symlink(outside_ / "secret.txt", web_dir_ / "link.txt");
  for (const std::string path :
       {"/../outside/secret.txt", "/%2e%2e/outside/secret.txt", "/js/../../outside/secret.txt",
        "/js/%2E%2E/%2e%2e/outside/secret.txt", "/..%2foutside%2fsecret.txt", "/link.txt",
        "/..\\outside\\secret.txt"}) {
    httplib::Result res = Get(path);
    ASSERT_TRUE(res) << path;
    EXPECT_GE(res->status, 400) << path;
    EXPECT_EQ(res->body.find("secret\n"), std::string::npos) << path;
    EXPECT_NE(res->body, "secret") << path;
  }
}

TEST_F(HttpServerTest, MissingWebDirAnswers503ButTheApiWorks) {
  fs::remove_all(web_dir_);
  httplib::Result res = Get("/");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_NE(res->body.find("scripts/setup.sh"), std::string::npos) << res->body;
  EXPECT_EQ(GetJson("/api/v1/runs")["runs"], json::array());
}

// Browsers keep idle connections open (six each); httplib serves each connection on one
// thread until it closes, so idle keep-alive connections, more of them than the pool
// starts with, must neither hold up a new request nor delay shutdown past their timeout.
TEST_F(HttpServerTest, IdleBrowserConnectionsNeitherStarveRequestsNorDelayShutdown) {
  std::vector<std::unique_ptr<httplib::Client>> idle;
  for (int i = 0; i < 30; ++i) {
    idle.push_back(std::make_unique<httplib::Client>(server_->http_address()));
    idle.back()->set_keep_alive(true);
    idle.back()->set_read_timeout(10, 0);
  }
  const auto start = std::chrono::steady_clock::now();
  for (const auto& client : idle) {
    httplib::Result res = client->Get("/api/v1/runs");
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 200);
  }
  httplib::Result fresh = Get("/api/v1/runs");
  ASSERT_TRUE(fresh);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  const auto stop = std::chrono::steady_clock::now();
  server_->Shutdown(absl::Seconds(1));
  EXPECT_LT(std::chrono::steady_clock::now() - stop, std::chrono::seconds(4));
}

TEST_F(HttpServerTest, AnUnchangedAnswerIs304UntilAStepIsWritten) {
  WriteRun("r", "p1", {0, 100});
  const std::string path = "/api/v1/series?run=r&metric=qk_mean_cosine";
  httplib::Result first = Get(path);
  ASSERT_TRUE(first);
  ASSERT_EQ(first->status, 200);
  const std::string etag = first->get_header_value("ETag");
  EXPECT_EQ(etag.substr(0, 3), "W/\"") << etag;
  EXPECT_EQ(first->get_header_value("Cache-Control"), "no-cache");

  httplib::Result again = client_->Get(path.c_str(), {{"If-None-Match", etag}});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 304);
  EXPECT_TRUE(again->body.empty());
  EXPECT_EQ(again->get_header_value("ETag"), etag);

  WriteRun("r", "p1", {200});
  httplib::Result changed = client_->Get(path.c_str(), {{"If-None-Match", etag}});
  ASSERT_TRUE(changed);
  EXPECT_EQ(changed->status, 200) << "a step was written: the kept answer is stale";
  EXPECT_NE(changed->get_header_value("ETag"), etag);
  EXPECT_EQ(json::parse(changed->body)["points"].size(), 3u * 4u);

  // since_step polls: nothing new answers the same (empty) body, 304 across writes of
  // other runs.
  const std::string poll = path + "&since_step=200";
  httplib::Result empty = Get(poll);
  ASSERT_TRUE(empty);
  WriteRun("other", "p1", {1});
  httplib::Result still =
      client_->Get(poll.c_str(), {{"If-None-Match", empty->get_header_value("ETag")}});
  ASSERT_TRUE(still);
  EXPECT_EQ(still->status, 304);
}

TEST_F(HttpServerTest, LargeAnswersAreGzippedForClientsThatAcceptIt) {
  std::vector<int64_t> steps;
  for (int64_t step = 0; step < 40; ++step) steps.push_back(step * 10);
  WriteRun("r", "p1", steps);
  const std::string path = "/api/v1/series?run=r&metric=qk_mean_cosine";
  httplib::Result plain = Get(path);
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->get_header_value("Content-Encoding"), "");

  httplib::Client gzip_client(server_->http_address());
  gzip_client.set_decompress(false);
  httplib::Result raw = gzip_client.Get(path.c_str(), {{"Accept-Encoding", "gzip, deflate, br"}});
  ASSERT_TRUE(raw);
  EXPECT_EQ(raw->status, 200);
  EXPECT_EQ(raw->get_header_value("Content-Encoding"), "gzip");
  EXPECT_EQ(raw->get_header_value("Vary"), "Accept-Encoding");
  EXPECT_LT(raw->body.size() * 3, plain->body.size());

  gzip_client.set_decompress(true);
  httplib::Result inflated = gzip_client.Get(path.c_str(), {{"Accept-Encoding", "gzip"}});
  ASSERT_TRUE(inflated);
  EXPECT_EQ(inflated->body, plain->body);
}

TEST(HttpServerCreateTest, BadOrBusyAddressesAreRefused) {
  EXPECT_EQ(HttpServer::Create({"nonsense"}, nullptr, nullptr, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HttpServer::Create({"127.0.0.1:http"}, nullptr, nullptr, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto first = HttpServer::Create({"127.0.0.1:0"}, nullptr, nullptr, nullptr);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = HttpServer::Create({"127.0.0.1:" + std::to_string((*first)->port())}, nullptr,
                                   nullptr, nullptr);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
}

TEST(HttpRoutesTest, StatusCodesMapOneToOne) {
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kResourceExhausted), 429);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kPermissionDenied), 403);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kNotFound), 404);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kFailedPrecondition), 409);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kInternal), 500);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kAlreadyExists), 500);
  EXPECT_EQ(
      json::parse(ErrorJson(absl::UnavailableError("draining \"now\""))),
      json::parse(R"({"error":{"code":503,"status":"UNAVAILABLE","message":"draining \"now\""}})"));
  EXPECT_EQ(json::parse(ErrorJson(absl::PermissionDeniedError("no")))["error"]["code"], 403);
}

TEST(HttpRoutesTest, SeriesJsonIsExactlyTheLibrarysProtoJson) {
  pb::QuerySeriesResponse response;
  response.set_probe_id("p0123456789abcdef");
  response.set_metric("qk_mean_cosine");
  const double values[] = {0,
                           1,
                           -2.5,
                           0.1,
                           1.0 / 3,
                           1e-300,
                           6.02214076e23,
                           -0.0,
                           123456789.123456789,
                           std::nan(""),
                           INFINITY,
                           -INFINITY};
  int i = 0;
  for (double value : values) {
    pb::SeriesPoint* point = response.add_points();
    point->set_step(i * 20000 - 1);
    point->set_layer(i % 3);
    point->set_head(i % 4 - 1);
    point->set_value(value);
    ++i;
  }
  EXPECT_EQ(SeriesToJson(response), MessageToJson(response));
  response.set_downsampled(true);
  EXPECT_EQ(SeriesToJson(response), MessageToJson(response));
  response.clear_points();
  EXPECT_EQ(SeriesToJson(response), MessageToJson(response));
  response.set_metric("needs \"escaping\" <here>");
  EXPECT_EQ(SeriesToJson(response), MessageToJson(response));
}

TEST(HttpRoutesTest, ContentTypesByExtension) {
  EXPECT_EQ(ContentTypeFor("a/b.js"), "text/javascript; charset=utf-8");
  EXPECT_EQ(ContentTypeFor("x.svg"), "image/svg+xml");
  EXPECT_EQ(ContentTypeFor("x.PNG"), "image/png");
  EXPECT_EQ(ContentTypeFor("x.json"), "application/json; charset=utf-8");
  EXPECT_EQ(ContentTypeFor("x.js.map"), "application/json; charset=utf-8");
  EXPECT_EQ(ContentTypeFor("x.bin"), "application/octet-stream");
}

TEST(HttpRoutesTest, RoutePatternsMatchOneSegmentPerParameter) {
  EXPECT_EQ(RoutePattern("/api/v1/jobs/{id}"), "/api/v1/jobs/([^/]+)");
  EXPECT_EQ(RoutePattern("/api/v1/runs"), "/api/v1/runs");
}

TEST(HttpRoutesTest, OpenApiDocumentsExactlyTheServedPaths) {
  const char* source_dir = std::getenv("ANISOSCOPE_SOURCE_DIR");
  ASSERT_NE(source_dir, nullptr) << "ANISOSCOPE_SOURCE_DIR is set by ctest";
  const std::string path = std::string(source_dir) + "/docs/openapi.yaml";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot read " << path;
  // The path keys: two-space indented under `paths:`.
  std::set<std::string> documented;
  bool in_paths = false;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != ' ') in_paths = line == "paths:";
    if (in_paths && line.size() > 4 && line.rfind("  /", 0) == 0 && line.back() == ':') {
      documented.insert(line.substr(2, line.size() - 3));
    }
  }
  std::set<std::string> served = {kMetricsPath};
  for (const ApiRoute& route : ApiRoutes({})) served.insert(route.path);
  EXPECT_EQ(documented, served) << path;
}

// The walls through the real server (loopback, no tokens): refusals are JSON, close the
// connection, and never carry `Access-Control-Allow-Origin: *`.
TEST_F(HttpServerTest, RequestsThatWouldReadABodyOrComeFromAForeignPageAreRefused) {
  httplib::Result post = client_->Post("/api/v1/runs", "{}", "application/json");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 413) << post->body;  // the body is refused before the method
  httplib::Result put = client_->Put("/api/v1/runs");
  ASSERT_TRUE(put);
  EXPECT_EQ(put->status, 405);
  EXPECT_EQ(put->get_header_value("Allow"), "GET, HEAD");
  EXPECT_EQ(put->get_header_value("Connection"), "close");
  EXPECT_EQ(json::parse(put->body)["error"]["code"], 405);
  httplib::Result body = client_->Get("/api/v1/runs", {{"Content-Length", "3"}});
  ASSERT_TRUE(body);
  EXPECT_EQ(body->status, 413);
  httplib::Result page = client_->Get("/api/v1/runs", {{"Origin", "https://evil.example"}});
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 403);
  EXPECT_FALSE(page->has_header("Access-Control-Allow-Origin"));
  httplib::Result own =
      client_->Get("/api/v1/runs", {{"Origin", "http://" + server_->http_address()}});
  ASSERT_TRUE(own);
  EXPECT_EQ(own->status, 200);
  EXPECT_EQ(GetJson("/api/v1/runs")["runs"], json::array());
}

RequestHead Head(std::string method, std::vector<std::pair<std::string, std::string>> headers) {
  return {std::move(method), std::move(headers)};
}

TEST(HttpWallsTest, ABodyIsRefusedWhateverTheMethod) {
  const BrowserPolicy open;  // tokens: no Host or Origin check
  for (const char* method : {"GET", "POST", "PUT", "HEAD"}) {
    for (const auto& header :
         std::vector<std::pair<std::string, std::string>>{{"Content-Length", "1073741824"},
                                                          {"content-length", "1"},
                                                          {"Content-Length", "x"},
                                                          {"Content-Length", ""},
                                                          {"Transfer-Encoding", "chunked"},
                                                          {"TRANSFER-ENCODING", "gzip, chunked"}}) {
      const WallAnswer answer = CheckRequest(Head(method, {header}), open);
      EXPECT_EQ(answer.http_status, 413) << method << " " << header.first;
      EXPECT_EQ(answer.error.code(), absl::StatusCode::kResourceExhausted);
      EXPECT_TRUE(answer.close);
    }
  }
  EXPECT_EQ(CheckRequest(Head("GET", {{"Content-Length", "0"}}), open).http_status, 0);
  EXPECT_EQ(CheckRequest(Head("GET", {{"Content-Length", "0"}, {"Content-Length", "7"}}), open)
                .http_status,
            413);
}

TEST(HttpWallsTest, OnlyGetAndHeadAndTheCorsPreflightOfAListedOrigin) {
  BrowserPolicy policy;
  EXPECT_EQ(CheckRequest(Head("GET", {}), policy).http_status, 0);
  EXPECT_EQ(CheckRequest(Head("HEAD", {}), policy).http_status, 0);
  for (const char* method : {"POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT"}) {
    const WallAnswer answer = CheckRequest(Head(method, {}), policy);
    EXPECT_EQ(answer.http_status, 405) << method;
    EXPECT_TRUE(answer.close);
    EXPECT_NE(answer.error.message().find(method), absl::string_view::npos);
    EXPECT_EQ(answer.headers, (decltype(answer.headers){{"Allow", "GET, HEAD"}}));
  }
  policy.cors_origins = {"https://dash.example"};
  const WallAnswer preflight = CheckRequest(
      Head("OPTIONS",
           {{"Origin", "https://dash.example"}, {"Access-Control-Request-Method", "GET"}}),
      policy);
  EXPECT_EQ(preflight.http_status, 204);
  EXPECT_TRUE(preflight.error.ok());
  EXPECT_FALSE(preflight.close);
  const std::vector<std::pair<std::string, std::string>> want = {
      {"Vary", "Origin"},
      {"Access-Control-Allow-Origin", "https://dash.example"},
      {"Access-Control-Allow-Methods", "GET, HEAD"},
      {"Access-Control-Allow-Headers", "Authorization, If-None-Match"},
      {"Access-Control-Max-Age", "600"}};
  EXPECT_EQ(preflight.headers, want);
  for (const auto& headers : std::vector<std::vector<std::pair<std::string, std::string>>>{
           {{"Origin", "https://other.example"}, {"Access-Control-Request-Method", "GET"}},
           {{"Origin", "https://dash.example"}, {"Access-Control-Request-Method", "POST"}},
           {{"Origin", "https://dash.example"}}}) {
    const WallAnswer answer = CheckRequest(Head("OPTIONS", headers), policy);
    EXPECT_EQ(answer.http_status, 405);
  }
}

TEST(HttpWallsTest, CorsEchoesOnlyAListedOriginAndNeverAWildcard) {
  BrowserPolicy policy;
  policy.cors_origins = {"https://dash.example", "http://localhost:5173"};
  const WallAnswer listed = CheckRequest(Head("GET", {{"Origin", "HTTPS://Dash.Example"}}), policy);
  EXPECT_EQ(listed.http_status, 0);
  EXPECT_EQ(listed.headers,
            (decltype(listed.headers){{"Vary", "Origin"},
                                      {"Access-Control-Allow-Origin", "https://dash.example"}}));
  for (const char* origin : {"https://evil.example", "null", "*", "https://dash.example.evil",
                             "http://dash.example", "https://dash.example:443"}) {
    const WallAnswer other = CheckRequest(Head("GET", {{"Origin", origin}}), policy);
    EXPECT_EQ(other.http_status, 0) << "tokens: the Origin alone refuses nothing";
    EXPECT_EQ(other.headers, (decltype(other.headers){{"Vary", "Origin"}})) << origin;
  }
  EXPECT_TRUE(CheckRequest(Head("GET", {{"Origin", "https://dash.example"}}), {}).headers.empty());
}

TEST(HttpWallsTest, WithoutTokensOnlyLoopbackHostsAndTheServersOwnOrAListedOrigin) {
  BrowserPolicy policy;
  policy.loopback_only = true;
  policy.cors_origins = {"https://dash.example"};
  for (const char* host : {"127.0.0.1:8080", "localhost:8080", "[::1]:8080", "127.3.2.1"}) {
    EXPECT_EQ(CheckRequest(Head("GET", {{"Host", host}}), policy).http_status, 0) << host;
  }
  for (const char* host : {"evil.example:8080", "127.0.0.1.evil.example:8080", "127.1:8080", ""}) {
    const WallAnswer answer = CheckRequest(Head("GET", {{"Host", host}}), policy);
    EXPECT_EQ(answer.http_status, 403) << host;
    EXPECT_EQ(answer.error.code(), absl::StatusCode::kPermissionDenied);
    EXPECT_NE(answer.error.message().find("--auth none"), absl::string_view::npos);
  }
  EXPECT_EQ(CheckRequest(Head("GET", {}), policy).http_status, 403) << "no Host";
  EXPECT_EQ(CheckRequest(Head("GET", {{"Host", "localhost"}, {"Host", "evil.example"}}), policy)
                .http_status,
            403);
  const auto from = [&](const char* origin) {
    return CheckRequest(Head("GET", {{"Host", "localhost:8080"}, {"Origin", origin}}), policy)
        .http_status;
  };
  EXPECT_EQ(from("http://localhost:8080"), 0);  // the dashboard itself
  EXPECT_EQ(from("https://dash.example"), 0);
  EXPECT_EQ(from("https://localhost:8080"), 403);  // not this server's scheme
  EXPECT_EQ(from("http://localhost:8081"), 403);
  EXPECT_EQ(from("http://127.0.0.1:8080"), 403);
  EXPECT_EQ(from("https://evil.example"), 403);
  EXPECT_EQ(from("null"), 403);
  policy.tls = true;
  EXPECT_EQ(from("https://localhost:8080"), 0);
  EXPECT_EQ(from("http://localhost:8080"), 403);
}

TEST(HttpWallsTest, OriginsAreSchemeHostAndPortOnly) {
  EXPECT_EQ(*NormalizeOrigin("HTTPS://Dash.Example:8443"), "https://dash.example:8443");
  EXPECT_EQ(*NormalizeOrigin("http://[::1]:8080"), "http://[::1]:8080");
  EXPECT_EQ(*NormalizeOrigin("http://127.0.0.1"), "http://127.0.0.1");
  for (const char* bad : {"*", "null", "", "dash.example", "ftp://dash.example", "https://",
                          "https://dash.example/", "https://dash.example/app",
                          "https://user@dash.example", "https://dash.example:", "https://:80",
                          "https://dash.example:80:80", "https://dash.example?x"}) {
    EXPECT_EQ(NormalizeOrigin(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace anisoscope::server::testing
