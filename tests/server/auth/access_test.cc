// Every RPC of every service and every HTTP API route, called without a token, with a
// revoked one, with each role and with another namespace's token. The tables are built
// from the services' descriptors and from ApiRoutes, so a method or route added later
// without an entry here (and without its check) fails this test.
#include <gmock/gmock.h>
#include <httplib.h>

#include <chrono>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "server/auth/bearer_token.h"
#include "server/host_commands.h"
#include "server/http/http_routes.h"
#include "storage/metrics_store.h"
#include "tests/server/server_test_util.h"

namespace anisoscope::server::testing {
namespace {

// What a caller presents: a token (or none) and the namespace it names.
struct Caller {
  std::string label;
  std::string token;  // empty: no authorization header
  Role role = Role::kReader;
  std::string ns;  // the token's namespace
};

// One RPC: the action it needs, whether it names team-a's run or job, and the call.
struct RpcCase {
  Action action;
  bool names_team_a;  // another namespace's caller gets NOT_FOUND
  std::function<grpc::Status(grpc::ClientContext*)> call;
};

class AccessTest : public ServerFixture {
 protected:
  void SetUp() override {
    ServerFixture::SetUp();
    auth_ = "tokens";
    http_listen_ = "127.0.0.1:0";
    StartServer(/*workers=*/0);  // jobs stay queued: nothing runs behind the calls
    storage::MetricsStore& store = server_->store();
    for (const auto& [label, role, ns] : std::vector<std::tuple<std::string, Role, std::string>>{
             {"reader-a", Role::kReader, "team-a"},
             {"writer-a", Role::kWriter, "team-a"},
             {"worker-a", Role::kWorker, "team-a"},
             {"admin-a", Role::kAdmin, "team-a"},
             {"writer-b", Role::kWriter, "team-b"},
             {"worker-b", Role::kWorker, "team-b"},
             {"worker-any", Role::kWorker, storage::kAnyNamespace},
             {"revoked-a", Role::kAdmin, "team-a"}}) {
      const std::string token = NewBearerToken();
      storage::TokenRecord record;
      record.name = label;
      record.ns = ns;
      record.role = RoleName(role);
      record.sha256 = TokenSha256(token);
      ASSERT_TRUE(store.CreateToken(record).ok());
      callers_.push_back({label, token, role, ns});
    }
    ASSERT_TRUE(store.RevokeToken("revoked-a").ok());
    callers_.push_back({"no token", "", Role::kReader, ""});

    // team-a has a stored run "r" and job 1.
    storage::StepResult step;
    step.ns = "team-a";
    step.run = "r";
    step.probe = {"p1", "probe", 2, 7};
    step.step = 10;
    step.model_family = "bert";
    step.num_layers = 1;
    step.num_heads = 1;
    step.head_dim = 2;
    step.scalars = {{"qk_mean_cosine", 0, 0, 0.5},
                    {"hidden_mean_norm", 0, -1, 1.0},
                    {"hidden_mean_norm", 1, -1, 2.0},
                    {"hidden_anisotropy", 0, -1, 0.1},
                    {"hidden_anisotropy", 1, -1, 0.3}};
    step.vectors = {{"q_mean", 0, 0, {1, 0}},
                    {"k_mean", 0, 0, {0, 1}},
                    {"q_sample", 0, 0, {1, 0, 0.5, 0.5}},
                    {"k_sample", 0, 0, {0, 1, 0.5, -0.5}}};
    ASSERT_TRUE(store.WriteStep(step, false).ok());
    pb::Job job;
    grpc::ClientContext context;
    Authorize(&context, Find("writer-a"));
    ASSERT_TRUE(
        jobs_->SubmitJob(&context, DirRequest("r", MakeCheckpoints("r", {1, 2})), &job).ok());
    ASSERT_EQ(job.id(), 1);
  }

  const Caller& Find(const std::string& label) const {
    for (const Caller& caller : callers_) {
      if (caller.label == label) return caller;
    }
    ADD_FAILURE() << "no caller " << label;
    return callers_.front();
  }

  static void Authorize(grpc::ClientContext* context, const Caller& caller) {
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!caller.token.empty()) context->AddMetadata("authorization", "Bearer " + caller.token);
  }

  // Every RPC of the four services, by full method name.
  std::map<std::string, RpcCase> Rpcs() {
    auto admin = pb::AdminService::NewStub(channel_);
    std::shared_ptr<pb::AdminService::Stub> admin_stub(std::move(admin));
    pb::QueryTrajectoryRequest trajectory;
    trajectory.set_run("r");
    pb::QuerySeriesRequest series;
    series.set_run("r");
    series.set_metric("qk_mean_cosine");
    pb::ListAlarmsRequest alarms;
    alarms.set_run("r");
    pb::QueryVectorsRequest vectors;
    vectors.set_run("r");
    vectors.set_kind("q_mean");
    pb::GetJobRequest get;
    get.set_id(1);
    pb::CancelJobRequest cancel;
    cancel.set_id(1);
    pb::WatchJobRequest watch;
    watch.set_id(1);
    pb::HeartbeatRequest heartbeat;
    heartbeat.set_lease_id("no-such-lease");
    pb::CompleteWorkRequest complete;
    complete.set_lease_id("no-such-lease");
    pb::FailWorkRequest fail;
    fail.set_lease_id("no-such-lease");
    const std::string dir = (root_ / "r").string();
    return {
        {"anisoscope.v1.JobService.SubmitJob",
         {Action::kWrite, false,
          [this](grpc::ClientContext* c) {
            pb::Job job;
            return jobs_->SubmitJob(c, DirRequest("other", MakeCheckpoints("other", {5})), &job);
          }}},
        {"anisoscope.v1.JobService.GetJob",
         {Action::kRead, true,
          [this, get](grpc::ClientContext* c) {
            pb::Job job;
            return jobs_->GetJob(c, get, &job);
          }}},
        {"anisoscope.v1.JobService.ListJobs",
         {Action::kRead, false,
          [this](grpc::ClientContext* c) {
            pb::ListJobsResponse response;
            grpc::Status status = jobs_->ListJobs(c, pb::ListJobsRequest(), &response);
            for (const pb::Job& job : response.jobs())
              listed_namespaces_.push_back(job.namespace_());
            return status;
          }}},
        {"anisoscope.v1.JobService.CancelJob",
         {Action::kWrite, true,
          [this, cancel](grpc::ClientContext* c) {
            pb::Job job;
            return jobs_->CancelJob(c, cancel, &job);
          }}},
        {"anisoscope.v1.JobService.WatchJob",
         {Action::kRead, true,
          [this, watch](grpc::ClientContext* c) {
            c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
            auto reader = jobs_->WatchJob(c, watch);
            pb::JobEvent event;
            const bool any = reader->Read(&event);
            if (any) c->TryCancel();  // the job is queued: its stream would not end by itself
            const grpc::Status status = reader->Finish();
            return any ? grpc::Status::OK : status;
          }}},
        {"anisoscope.v1.JobService.AuditSource",
         {Action::kWrite, false,
          [this, dir](grpc::ClientContext* c) {
            pb::AuditSourceRequest request;
            request.set_checkpoints_dir(dir);
            pb::AuditSourceResponse response;
            return jobs_->AuditSource(c, request, &response);
          }}},
        {"anisoscope.v1.QueryService.ListRuns",
         {Action::kRead, false,
          [this](grpc::ClientContext* c) {
            pb::ListRunsResponse response;
            grpc::Status status = queries_->ListRuns(c, pb::ListRunsRequest(), &response);
            for (const pb::Run& run : response.runs())
              listed_namespaces_.push_back(run.namespace_());
            return status;
          }}},
        {"anisoscope.v1.QueryService.ListAlarms",
         {Action::kRead, true,
          [this, alarms](grpc::ClientContext* c) {
            pb::ListAlarmsResponse response;
            return queries_->ListAlarms(c, alarms, &response);
          }}},
        {"anisoscope.v1.QueryService.QuerySeries",
         {Action::kRead, true,
          [this, series](grpc::ClientContext* c) {
            pb::QuerySeriesResponse response;
            return queries_->QuerySeries(c, series, &response);
          }}},
        {"anisoscope.v1.QueryService.QueryVectors",
         {Action::kRead, true,
          [this, vectors](grpc::ClientContext* c) {
            pb::QueryVectorsResponse response;
            return queries_->QueryVectors(c, vectors, &response);
          }}},
        {"anisoscope.v1.QueryService.QueryTrajectory",
         {Action::kRead, true,
          [this, trajectory](grpc::ClientContext* c) {
            pb::QueryTrajectoryResponse response;
            return queries_->QueryTrajectory(c, trajectory, &response);
          }}},
        {"anisoscope.v1.QueryService.QueryTokenCloud",
         {Action::kRead, true,
          [this, trajectory](grpc::ClientContext* c) {
            pb::QueryTokenCloudRequest request;
            request.set_run(trajectory.run());
            pb::QueryTokenCloudResponse response;
            return queries_->QueryTokenCloud(c, request, &response);
          }}},
        {"anisoscope.v1.QueryService.QueryCorrelation",
         {Action::kRead, true,
          [this, trajectory](grpc::ClientContext* c) {
            pb::QueryCorrelationRequest request;
            request.set_run(trajectory.run());
            pb::QueryCorrelationResponse response;
            return queries_->QueryCorrelation(c, request, &response);
          }}},
        {"anisoscope.v1.QueryService.QueryIsotropicBaseline",
         {Action::kRead, false,
          [this](grpc::ClientContext* c) {
            pb::QueryIsotropicBaselineRequest request;
            request.set_dimension(64);
            pb::QueryIsotropicBaselineResponse response;
            return queries_->QueryIsotropicBaseline(c, request, &response);
          }}},
        {"anisoscope.v1.QueryService.ListMetrics",
         {Action::kRead, false,
          [this](grpc::ClientContext* c) {
            pb::ListMetricsRequest request;
            pb::ListMetricsResponse response;
            return queries_->ListMetrics(c, request, &response);
          }}},
        {"anisoscope.v1.WorkerService.LeaseWork",
         {Action::kWork, false,
          [this](grpc::ClientContext* c) {
            pb::LeaseWorkRequest request;  // wait_ms 0; a unit, if granted, is given back
            pb::LeaseWorkResponse response;
            grpc::Status status = workers_->LeaseWork(c, request, &response);
            if (status.ok() && response.has_unit()) leased_.push_back(response.unit().lease_id());
            return status;
          }}},
        {"anisoscope.v1.WorkerService.Heartbeat",
         {Action::kWork, false,
          [this, heartbeat](grpc::ClientContext* c) {
            pb::HeartbeatResponse response;
            return workers_->Heartbeat(c, heartbeat, &response);
          }}},
        {"anisoscope.v1.WorkerService.CompleteWork",
         {Action::kWork, false,
          [this, complete](grpc::ClientContext* c) {
            pb::CompleteWorkResponse response;
            return workers_->CompleteWork(c, complete, &response);
          }}},
        {"anisoscope.v1.WorkerService.FailWork",
         {Action::kWork, false,
          [this, fail](grpc::ClientContext* c) {
            pb::FailWorkResponse response;
            return workers_->FailWork(c, fail, &response);
          }}},
        {"anisoscope.v1.AdminService.ListAudit",
         {Action::kAdmin, false,
          [admin_stub](grpc::ClientContext* c) {
            pb::ListAuditResponse response;
            return admin_stub->ListAudit(c, pb::ListAuditRequest(), &response);
          }}},
    };
  }

  std::vector<Caller> callers_;
  std::vector<std::string> listed_namespaces_;
  std::vector<std::string> leased_;
};

TEST_F(AccessTest, EveryRpcChecksTokenRoleAndNamespace) {
  std::map<std::string, RpcCase> rpcs = Rpcs();
  const auto* pool = google::protobuf::DescriptorPool::generated_pool();
  size_t methods = 0;
  for (const char* service_name : {"anisoscope.v1.JobService", "anisoscope.v1.QueryService",
                                   "anisoscope.v1.WorkerService", "anisoscope.v1.AdminService"}) {
    const google::protobuf::ServiceDescriptor* service = pool->FindServiceByName(service_name);
    ASSERT_NE(service, nullptr) << service_name;
    for (int m = 0; m < service->method_count(); ++m, ++methods) {
      const std::string method = service->method(m)->full_name();
      auto it = rpcs.find(method);
      ASSERT_NE(it, rpcs.end()) << method << " has no row in this test's table";
      const RpcCase& rpc = it->second;
      for (const Caller& caller : callers_) {
        listed_namespaces_.clear();
        grpc::ClientContext context;
        Authorize(&context, caller);
        const grpc::Status status = rpc.call(&context);
        const std::string where = method + " as " + caller.label + ": " + status.error_message();
        if (caller.label == "no token" || caller.label == "revoked-a") {
          EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << where;
        } else if (!RoleMay(caller.role, rpc.action)) {
          EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << where;
        } else if (caller.ns != "team-a" && rpc.names_team_a) {
          EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << where;
        } else {
          EXPECT_NE(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << where;
          EXPECT_NE(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << where;
          for (const std::string& ns : listed_namespaces_) EXPECT_EQ(ns, caller.ns) << where;
        }
        if (!caller.token.empty()) {
          EXPECT_EQ(status.error_message().find(caller.token), std::string::npos) << where;
        }
      }
    }
  }
  EXPECT_EQ(methods, rpcs.size()) << "rows for methods the services no longer have";
}

TEST_F(AccessTest, OnlyAdminsMayNameAnotherNamespace) {
  const auto list_runs = [this](const Caller& caller, const std::string& ns,
                                pb::ListRunsResponse* response) {
    grpc::ClientContext context;
    Authorize(&context, caller);
    context.AddMetadata("anisoscope-namespace", ns);
    return queries_->ListRuns(&context, pb::ListRunsRequest(), response);
  };
  pb::ListRunsResponse runs;
  EXPECT_EQ(list_runs(Find("writer-b"), "team-a", &runs).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(list_runs(Find("admin-a"), "bad ns!", &runs).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  ASSERT_TRUE(list_runs(Find("admin-a"), "team-a", &runs).ok());
  ASSERT_EQ(runs.runs_size(), 1);
  EXPECT_EQ(runs.runs(0).name(), "r");
  EXPECT_EQ(runs.runs(0).namespace_(), "team-a");
  ASSERT_TRUE(list_runs(Find("admin-a"), "team-b", &runs).ok());
  EXPECT_EQ(runs.runs_size(), 0);
}

TEST_F(AccessTest, EveryHttpRouteChecksTokenRoleAndNamespace) {
  httplib::Client client(server_->http_address());
  const std::vector<ApiRoute> routes = ApiRoutes({});
  ASSERT_FALSE(routes.empty());
  for (const ApiRoute& route : routes) {
    // Routes that name team-a's run "r" or job 1; the list routes answer 200 and filter, the
    // isotropic baseline and the metric catalogue name no run, the audit a folder of the
    // server's roots (this fixture's, in place of the example's).
    const bool audit = route.path == "/api/v1/audit";
    const bool names_team_a = route.example != "/api/v1/runs" && route.example != "/api/v1/jobs" &&
                              route.path != "/api/v1/isotropic_baseline" &&
                              route.path != "/api/v1/metrics-catalog" && !audit;
    const std::string url =
        audit ? "/api/v1/audit?checkpoints_dir=" + (root_ / "r").string() : route.example;
    EXPECT_EQ(route.action, audit ? Action::kWrite : Action::kRead) << route.path;
    for (const Caller& caller : callers_) {
      httplib::Headers headers;
      if (!caller.token.empty()) headers.emplace("Authorization", "Bearer " + caller.token);
      httplib::Result res = client.Get(url.c_str(), headers);
      ASSERT_TRUE(res) << url;
      const std::string where = url + " as " + caller.label + ": " + res->body;
      if (caller.label == "no token" || caller.label == "revoked-a") {
        EXPECT_EQ(res->status, 401) << where;
        EXPECT_EQ(res->get_header_value("WWW-Authenticate"), "Bearer realm=\"anisoscope\"");
      } else if (!RoleMay(caller.role, route.action)) {
        EXPECT_EQ(res->status, 403) << where;
      } else if (caller.ns != "team-a" && names_team_a) {
        EXPECT_EQ(res->status, 404) << where;
      } else {
        EXPECT_EQ(res->status, 200) << where;
        if (caller.ns != "team-a") {
          EXPECT_EQ(res->body.find("team-a"), std::string::npos) << where;
        }
      }
      if (!caller.token.empty()) {
        EXPECT_EQ(res->body.find(caller.token), std::string::npos);
      }
    }
  }
}

TEST_F(AccessTest, MetricsNeedATokenThatMayRead) {
  httplib::Client client(server_->http_address());
  for (const Caller& caller : callers_) {
    httplib::Headers headers;
    if (!caller.token.empty()) headers.emplace("Authorization", "Bearer " + caller.token);
    httplib::Result res = client.Get(kMetricsPath, headers);
    ASSERT_TRUE(res);
    const int expected = caller.label == "no token" || caller.label == "revoked-a" ? 401
                         : !RoleMay(caller.role, Action::kRead)                    ? 403
                                                                                   : 200;
    EXPECT_EQ(res->status, expected) << caller.label << ": " << res->body;
  }
}

TEST_F(AccessTest, SubmitCancelAndTokensAreAudited) {
  grpc::ClientContext context;
  Authorize(&context, Find("writer-a"));
  pb::CancelJobRequest cancel;
  cancel.set_id(1);
  pb::Job job;
  ASSERT_TRUE(jobs_->CancelJob(&context, cancel, &job).ok());
  grpc::ClientContext audit_context;
  Authorize(&audit_context, Find("admin-a"));
  pb::ListAuditResponse audit;
  ASSERT_TRUE(pb::AdminService::NewStub(channel_)
                  ->ListAudit(&audit_context, pb::ListAuditRequest(), &audit)
                  .ok());
  ASSERT_GE(audit.entries_size(), 2);
  EXPECT_EQ(audit.entries(0).action(), "cancel");
  EXPECT_EQ(audit.entries(0).actor(), "writer-a");
  EXPECT_EQ(audit.entries(0).target(), "job 1");
  EXPECT_EQ(audit.entries(1).action(), "submit");
  EXPECT_EQ(audit.entries(1).namespace_(), "team-a");
}

TEST_F(AccessTest, ANamespaceReadsOnlyFromItsOwnRoots) {
  const fs::path allowed = MakeCheckpoints("nlp", {1});
  const fs::path other = MakeCheckpoints("vision", {1});
  fs::copy_file(probe_, allowed / "probe.jsonl");
  ASSERT_TRUE(server_->store().SetNamespaceRoots("team-a", {allowed.string()}).ok());
  const auto submit = [this, &allowed](const fs::path& dir) {
    grpc::ClientContext context;
    Authorize(&context, Find("writer-a"));
    pb::SubmitJobRequest request = DirRequest("x", dir);
    request.mutable_probe()->set_path((allowed / "probe.jsonl").string());
    pb::Job job;
    return jobs_->SubmitJob(&context, request, &job);
  };
  EXPECT_TRUE(submit(allowed).ok());
  const grpc::Status refused = submit(other);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED) << refused.error_message();
  EXPECT_NE(refused.error_message().find("checkpoints_dir"), std::string::npos)
      << refused.error_message();
  ASSERT_TRUE(server_->store().SetNamespaceRoots("team-a", {outside_.string()}).ok());
  const grpc::Status outside = submit(allowed);
  EXPECT_EQ(outside.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(outside.error_message().find("outside the server's --allow-root"), std::string::npos)
      << outside.error_message();
}

// A worker's call with a token, naming no namespace (as anisoscope-worker does).
grpc::Status LeaseAs(pb::WorkerService::Stub* workers, const std::string& token, int wait_ms,
                     pb::LeaseWorkResponse* response) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  context.AddMetadata("authorization", "Bearer " + token);
  pb::LeaseWorkRequest request;
  request.mutable_worker()->set_name("w");
  request.set_wait_ms(wait_ms);
  return workers->LeaseWork(&context, request, response);
}

// A worker token made with --namespace NS leases only NS's units (and so sees only its
// paths and probes); one made with '*' leases any namespace's.
TEST_F(AccessTest, AWorkerTokenLeasesOnlyItsNamespacesUnits) {
  pb::Job job_b;
  {
    grpc::ClientContext context;
    Authorize(&context, Find("writer-b"));
    ASSERT_TRUE(
        jobs_->SubmitJob(&context, DirRequest("rb", MakeCheckpoints("rb", {7})), &job_b).ok());
  }
  // team-a's job 1 (steps 1 and 2) is older: an unscoped worker would get it first.
  pb::LeaseWorkResponse b;
  ASSERT_TRUE(LeaseAs(workers_.get(), Find("worker-b").token, 0, &b).ok());
  ASSERT_TRUE(b.has_unit());
  EXPECT_EQ(b.unit().job_id(), job_b.id());
  EXPECT_EQ(b.unit().step(), 7);
  // Nothing of team-b is left: a long poll ends empty although team-a's steps are pending.
  pb::LeaseWorkResponse none;
  ASSERT_TRUE(LeaseAs(workers_.get(), Find("worker-b").token, 300, &none).ok());
  EXPECT_FALSE(none.has_unit());
  pb::LeaseWorkResponse a;
  ASSERT_TRUE(LeaseAs(workers_.get(), Find("worker-a").token, 0, &a).ok());
  ASSERT_TRUE(a.has_unit());
  EXPECT_EQ(a.unit().job_id(), 1);
  pb::LeaseWorkResponse any;
  ASSERT_TRUE(LeaseAs(workers_.get(), Find("worker-any").token, 0, &any).ok());
  ASSERT_TRUE(any.has_unit());
  EXPECT_EQ(any.unit().job_id(), 1);
  EXPECT_EQ(any.unit().step(), 2);
}

// A waiting worker of team-b is not woken by team-a's new work, and is by team-b's.
TEST_F(AccessTest, AScopedLongPollWaitsForItsOwnNamespace) {
  pb::LeaseWorkResponse taken;  // job 1's two steps go to team-a's worker first
  ASSERT_TRUE(LeaseAs(workers_.get(), Find("worker-a").token, 0, &taken).ok());
  ASSERT_TRUE(LeaseAs(workers_.get(), Find("worker-a").token, 0, &taken).ok());
  std::thread submitter([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    for (const auto& [writer, run] : {std::pair{"writer-a", "ra"}, std::pair{"writer-b", "rb"}}) {
      grpc::ClientContext context;
      Authorize(&context, Find(writer));
      pb::Job job;
      EXPECT_TRUE(
          jobs_->SubmitJob(&context, DirRequest(run, MakeCheckpoints(run, {3})), &job).ok());
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  pb::LeaseWorkResponse b;
  const grpc::Status status = LeaseAs(workers_.get(), Find("worker-b").token, 5000, &b);
  submitter.join();
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_TRUE(b.has_unit());
  EXPECT_EQ(b.unit().run(), "rb");
}

// Heartbeat, complete and fail of a lease come from the identity that took it: another worker
// token (even one of every namespace) is refused, naming no token, and changes nothing.
TEST_F(AccessTest, ALeaseIsBoundToTheIdentityThatTookIt) {
  pb::LeaseWorkResponse leased;
  ASSERT_TRUE(LeaseAs(workers_.get(), Find("worker-a").token, 0, &leased).ok());
  ASSERT_TRUE(leased.has_unit());
  const std::string lease_id = leased.unit().lease_id();
  for (const char* other : {"worker-any", "worker-b", "admin-a"}) {
    const auto as = [&](grpc::ClientContext* context) { Authorize(context, Find(other)); };
    grpc::ClientContext beat_context;
    as(&beat_context);
    pb::HeartbeatRequest beat;
    beat.set_lease_id(lease_id);
    beat.set_probe_id("p00000000000000000000000000000001");
    pb::HeartbeatResponse beat_response;
    const grpc::Status heartbeat = workers_->Heartbeat(&beat_context, beat, &beat_response);
    grpc::ClientContext complete_context;
    as(&complete_context);
    pb::CompleteWorkRequest complete;
    complete.set_lease_id(lease_id);
    pb::CompleteWorkResponse complete_response;
    const grpc::Status completed =
        workers_->CompleteWork(&complete_context, complete, &complete_response);
    grpc::ClientContext fail_context;
    as(&fail_context);
    pb::FailWorkRequest fail;
    fail.set_lease_id(lease_id);
    fail.set_kind(pb::FailWorkRequest::KIND_FAILED);
    pb::FailWorkResponse fail_response;
    const grpc::Status failed = workers_->FailWork(&fail_context, fail, &fail_response);
    for (const grpc::Status& status : {heartbeat, completed, failed}) {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
          << other << ": " << status.error_message();
      EXPECT_THAT(status.error_message(), ::testing::HasSubstr("another worker identity"));
      EXPECT_EQ(status.error_message().find("worker-a"), std::string::npos);
    }
  }
  grpc::ClientContext context;
  Authorize(&context, Find("worker-a"));
  pb::HeartbeatRequest beat;
  beat.set_lease_id(lease_id);
  pb::HeartbeatResponse response;
  const grpc::Status own = workers_->Heartbeat(&context, beat, &response);
  ASSERT_TRUE(own.ok()) << own.error_message();
  EXPECT_EQ(response.verdict(), pb::HeartbeatResponse::VERDICT_CONTINUE);
  grpc::ClientContext job_context;
  Authorize(&job_context, Find("writer-a"));
  pb::GetJobRequest get;
  get.set_id(1);
  pb::Job job;
  ASSERT_TRUE(jobs_->GetJob(&job_context, get, &job).ok());
  EXPECT_EQ(job.checkpoints(0).state(), pb::STEP_STATE_RUNNING);
  EXPECT_EQ(job.checkpoints(0).probe_id(), "");  // the other identity's report was not taken
}

// `tokens create --role worker` must say whose units the token leases: --namespace NS, or
// '*' for every namespace; '*' is for worker tokens only.
TEST_F(AccessTest, AWorkerTokenNeedsItsNamespaceSaid) {
  const std::string db = (base_ / "host.db").string();
  const auto run = [&db](std::vector<std::string> args, std::string* err) {
    args.insert(args.begin(), {"anisoscope-server", "tokens", "create", "--db", db});
    std::vector<const char*> argv;
    for (const std::string& arg : args) argv.push_back(arg.c_str());
    std::ostringstream out, errors;
    const int code = RunHostCommand(static_cast<int>(argv.size()), argv.data(), out, errors);
    *err = errors.str();
    return code;
  };
  std::string err;
  EXPECT_EQ(run({"--name", "w0", "--role", "worker"}, &err), 2);
  EXPECT_THAT(err, ::testing::HasSubstr("a worker token needs --namespace"));
  EXPECT_EQ(run({"--name", "w1", "--role", "worker", "--namespace", "nlp"}, &err), 0) << err;
  EXPECT_EQ(run({"--name", "w2", "--role", "worker", "--namespace", "*"}, &err), 0) << err;
  EXPECT_EQ(run({"--name", "r1", "--role", "reader", "--namespace", "*"}, &err), 1);
  EXPECT_EQ(run({"--name", "r2", "--role", "reader"}, &err), 0) << err;  // default: default
  auto store = storage::MetricsStore::Open({db});
  ASSERT_TRUE(store.ok()) << store.status();
  auto tokens = (*store)->ListTokens(true);
  ASSERT_TRUE(tokens.ok());
  std::vector<std::string> made;
  for (const storage::TokenRecord& token : *tokens) made.push_back(token.name + ":" + token.ns);
  EXPECT_EQ(made, (std::vector<std::string>{"w1:nlp", "w2:*", "r2:default"}));
}

TEST(AccessModeTest, NoTokensOnlyOnLoopback) {
  ServerOptions options;
  options.listen = "127.0.0.1:0";
  EXPECT_EQ(*AuthModeFor(options), AuthMode::kNone);
  options.http_listen = "[::1]:8080";
  EXPECT_EQ(*AuthModeFor(options), AuthMode::kNone);
  options.http_listen = "0.0.0.0:8080";
  EXPECT_EQ(*AuthModeFor(options), AuthMode::kTokens);
  options.auth = "none";
  const absl::StatusOr<AuthMode> refused = AuthModeFor(options);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("0.0.0.0:8080"), absl::string_view::npos);
  options.http_listen.clear();
  options.auth = "tokens";
  EXPECT_EQ(*AuthModeFor(options), AuthMode::kTokens);
}

TEST(BearerTokenTest, TokensAreRandomAndOnlyTheirHashesCompare) {
  const std::string a = NewBearerToken();
  const std::string b = NewBearerToken();
  EXPECT_NE(a, b);
  EXPECT_EQ(a.size(), 5u + 43u);
  EXPECT_EQ(TokenSha256("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_TRUE(DigestsEqual(TokenSha256(a), TokenSha256(a)));
  EXPECT_FALSE(DigestsEqual(TokenSha256(a), TokenSha256(b)));
  EXPECT_EQ(*TokenFromAuthorization("bearer  xyz "), "xyz");
  const absl::StatusOr<std::string> bad = TokenFromAuthorization("Basic secret-value");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(bad.status().message().find("secret-value"), absl::string_view::npos);
}

}  // namespace
}  // namespace anisoscope::server::testing
