// The CLI end to end in-process: RunCli against a fake server over a real socket.
#include "client/cli.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <sstream>
#include <thread>

#include "client/job_commands.h"
#include "common/version.h"
#include "tests/client/cli_run.h"
#include "tests/client/fake_server.h"

namespace anisoscope::client {
namespace {

class CliTest : public ::testing::Test {
 protected:
  // Runs `anisoscope --server <fake> args...`; fills out_ and err_.
  int Run(std::vector<std::string> args, bool with_server = true) {
    testing::CliRun run = testing::RunCliAt(with_server ? server_.address() : "", std::move(args));
    out_ = std::move(run.out);
    err_ = std::move(run.err);
    return run.code;
  }

  static v1::Job MakeJob(v1::JobState state, std::vector<v1::StepState> steps) {
    v1::Job job;
    job.set_id(7);
    job.set_run("r");
    job.set_state(state);
    job.set_steps_total(static_cast<int32_t>(steps.size()));
    for (size_t i = 0; i < steps.size(); ++i) {
      v1::CheckpointStatus* checkpoint = job.add_checkpoints();
      checkpoint->set_step(static_cast<int64_t>(i) * 100);
      checkpoint->set_state(steps[i]);
      checkpoint->set_seconds(1.5);
      if (steps[i] == v1::STEP_STATE_FAILED) checkpoint->set_error("bad file");
    }
    return job;
  }

  // A stream: snapshot of `initial`, one STEP_FINISHED per checkpoint of `final_job`,
  // then JOB_FINISHED.
  void SetWatchStream(const v1::Job& initial, const v1::Job& final_job) {
    v1::JobEvent snapshot;
    snapshot.set_kind(v1::JobEvent::KIND_SNAPSHOT);
    *snapshot.mutable_job() = initial;
    server_.replies().events = {snapshot};
    for (const v1::CheckpointStatus& checkpoint : final_job.checkpoints()) {
      v1::JobEvent event;
      event.set_kind(v1::JobEvent::KIND_STEP_FINISHED);
      *event.mutable_job() = final_job;
      *event.mutable_checkpoint() = checkpoint;
      server_.replies().events.push_back(event);
    }
    v1::JobEvent finished;
    finished.set_kind(v1::JobEvent::KIND_JOB_FINISHED);
    *finished.mutable_job() = final_job;
    server_.replies().events.push_back(finished);
  }

  FakeServer server_;
  std::string out_, err_;
};

const std::vector<std::string> kSubmit = {"submit", "--run",        "r",          "--checkpoints",
                                          "ckpts",  "--probe-text", "/data/p.txt"};

TEST_F(CliTest, HelpGoesToStdoutAndExitsZero) {
  EXPECT_EQ(Run({"--help"}, false), 0);
  EXPECT_EQ(out_, TopLevelUsage());
  EXPECT_EQ(err_, "");
  const std::string top = out_;
  for (const char* command :
       {"submit", "status", "jobs", "cancel", "watch", "runs", "query", "vectors"}) {
    EXPECT_NE(top.find(std::string("  ") + command + " "), std::string::npos) << command;
    EXPECT_EQ(Run({command, "--help"}, false), 0) << command;
    EXPECT_EQ(out_.rfind(std::string("usage: anisoscope [--server HOST:PORT] ") + command, 0), 0u)
        << out_;
  }
  EXPECT_EQ(Run({"query", "--help"}, false), 0);
  EXPECT_NE(out_.find("qk_mean_cosine"), std::string::npos);
  EXPECT_NE(out_.find("hidden_mean_norm"), std::string::npos);
  EXPECT_EQ(Run({"help", "runs"}, false), 0);
  EXPECT_EQ(out_.rfind("usage: anisoscope [--server HOST:PORT] runs", 0), 0u);
}

TEST_F(CliTest, UsageErrorsExitTwoWithOneLine) {
  EXPECT_EQ(Run({}, false), 2);
  EXPECT_EQ(err_, "anisoscope: missing COMMAND (see 'anisoscope --help')\n");
  EXPECT_EQ(Run({"frobnicate"}), 2);
  EXPECT_EQ(err_, "anisoscope: unknown command 'frobnicate' (see 'anisoscope --help')\n");
  EXPECT_EQ(Run({"--verbose", "jobs"}, false), 2);
  EXPECT_EQ(err_, "anisoscope: unknown flag --verbose (see 'anisoscope --help')\n");
  EXPECT_EQ(Run({"jobs", "--bogus"}), 2);
  EXPECT_EQ(err_, "anisoscope: unknown flag --bogus for 'jobs' (see 'anisoscope jobs --help')\n");
  EXPECT_EQ(Run({"query", "--run", "r", "--metric", "m", "--layer", "x"}), 2);
  EXPECT_EQ(err_, "anisoscope: --layer: expected an integer, got 'x'\n");
  EXPECT_EQ(Run({"query", "--run", "r"}), 2);
  EXPECT_EQ(err_, "anisoscope: query: --metric is required\n");
  EXPECT_EQ(Run({"vectors", "--run", "r", "--kind", "q_mean", "--head", "0"}), 2);
  EXPECT_EQ(err_, "anisoscope: vectors: --layer is required for --kind q_mean\n");
  EXPECT_EQ(Run({"vectors", "--run", "r", "--kind", "hidden_spectrum"}), 2);
  EXPECT_EQ(err_, "anisoscope: vectors: --layer is required for --kind hidden_spectrum\n");
  EXPECT_EQ(Run({"status", "abc"}), 2);
  EXPECT_EQ(err_, "anisoscope: JOB: expected a job id (a positive integer), got 'abc'\n");
  EXPECT_EQ(Run({"submit", "--run", "r", "--checkpoints", "d", "--probe-tokens", "t",
                 "--probe-text", "u"}),
            2);
  EXPECT_EQ(err_, "anisoscope: submit: give --probe-tokens F or --probe-text F, not both\n");
  EXPECT_TRUE(server_.requests().submits.empty());
}

TEST_F(CliTest, UnreachableServerIsOneClearLine) {
  // A port that was free a moment ago.
  std::string address;
  {
    FakeServer gone;
    address = gone.address();
  }
  EXPECT_EQ(Run({"--server", address, "jobs"}, false), 1);
  EXPECT_EQ(err_, "anisoscope: cannot reach anisoscope server at " + address +
                      " (set --server or ANISOSCOPE_SERVER)\n");
}

TEST_F(CliTest, ServerErrorsShowTheCodeNameAndExitOne) {
  server_.replies().status =
      grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                   "checkpoint '/etc' resolves to '/etc', outside every --allow-root");
  EXPECT_EQ(Run(kSubmit), 1);
  EXPECT_EQ(err_,
            "anisoscope: PERMISSION_DENIED: checkpoint '/etc' resolves to '/etc', outside "
            "every --allow-root\n");
  server_.replies().status = grpc::Status(grpc::StatusCode::NOT_FOUND, "no job 99");
  EXPECT_EQ(Run({"status", "99"}), 1);
  EXPECT_EQ(err_, "anisoscope: NOT_FOUND: no job 99\n");
}

TEST_F(CliTest, SubmitSendsAbsolutePathsAndPrintsTheJob) {
  server_.replies().job =
      MakeJob(v1::JOB_STATE_QUEUED, {v1::STEP_STATE_PENDING, v1::STEP_STATE_PENDING});
  EXPECT_EQ(Run({"submit", "--run", "r", "--checkpoint", "0=ckpt/s0", "--checkpoint",
                 "100=/abs/s100", "--probe-text", "./probe.txt", "--probe-mode", "lines",
                 "--samples", "32", "--seq-len", "64", "--force"}),
            0);
  EXPECT_EQ(out_, "job 7 submitted: 2 checkpoints of run r\n");
  ASSERT_EQ(server_.requests().submits.size(), 1u);
  const v1::SubmitJobRequest request = server_.requests().submits[0];
  EXPECT_EQ(request.run(), "r");
  ASSERT_EQ(request.checkpoints_size(), 2);
  EXPECT_EQ(request.checkpoints(0).path(), "/home/me/work/ckpt/s0");
  EXPECT_EQ(request.checkpoints(1).step(), 100);
  EXPECT_EQ(request.checkpoints(1).path(), "/abs/s100");
  EXPECT_EQ(request.probe().source(), v1::PROBE_SOURCE_TEXT);
  EXPECT_EQ(request.probe().path(), "/home/me/work/probe.txt");
  EXPECT_EQ(request.probe().mode(), v1::PROBE_MODE_LINES);
  EXPECT_EQ(request.probe().samples(), 32);
  EXPECT_EQ(request.probe().seq_len(), 64);
  EXPECT_TRUE(request.force());
  EXPECT_TRUE(server_.requests().job_ids.empty());  // no --wait: no watch
}

TEST_F(CliTest, SubmitWaitExitsZeroWhenEveryStepDoneOrSkipped) {
  server_.replies().job =
      MakeJob(v1::JOB_STATE_QUEUED, {v1::STEP_STATE_PENDING, v1::STEP_STATE_PENDING});
  SetWatchStream(server_.replies().job,
                 MakeJob(v1::JOB_STATE_SUCCEEDED, {v1::STEP_STATE_DONE, v1::STEP_STATE_SKIPPED}));
  std::vector<std::string> args = kSubmit;
  args.push_back("--wait");
  EXPECT_EQ(Run(args), 0) << err_;
  EXPECT_EQ(out_,
            "job 7 submitted: 2 checkpoints of run r\n"
            "job 7 succeeded: 1 done, 1 skipped (2 checkpoints)\n");
  EXPECT_EQ(err_,
            "[1/2] step 0 done 1.5 s\n"
            "[2/2] step 100 skipped (already stored)\n");
  EXPECT_EQ(server_.requests().job_ids, std::vector<int64_t>{7});
  EXPECT_EQ(server_.requests().submits[0].checkpoints_dir(), "/home/me/work/ckpts");
}

TEST_F(CliTest, CtrlCDuringSubmitWaitLeavesTheJobAndSaysHowToWatchOrCancelIt) {
  server_.replies().job = MakeJob(v1::JOB_STATE_RUNNING, {v1::STEP_STATE_PENDING});
  server_.replies().watch_hangs = true;
  std::thread interrupter([this] {
    // The guard is up once the watch has reached the server.
    while (server_.requests().job_ids.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    kill(getpid(), SIGINT);
  });
  std::vector<std::string> args = kSubmit;
  args.push_back("--wait");
  EXPECT_EQ(Run(args), 130);
  interrupter.join();
  EXPECT_EQ(out_, "job 7 submitted: 1 checkpoint of run r\n");
  EXPECT_EQ(err_, "job 7 continues: `anisoscope watch 7`, `anisoscope cancel 7`\n");
  EXPECT_EQ(server_.requests().job_ids, std::vector<int64_t>{7});  // the watch; no cancel
}

TEST_F(CliTest, HelpTextsFitAndSayWhatTheirCommandDoes) {
  EXPECT_EQ(Run({"vectors", "--help"}, false), 0);
  std::istringstream lines(out_);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_LE(line.size(), 110u) << line;
  }
  EXPECT_EQ(Run({"follow", "--help"}, false), 0);
  EXPECT_NE(out_.find("--until-step N              end after step N is analysed (later steps "
                      "are ignored)\n"),
            std::string::npos)
      << out_;
  EXPECT_EQ(out_.find("with --follow"), std::string::npos) << out_;
  EXPECT_EQ(Run({"runs", "--help"}, false), 0);
  EXPECT_EQ(out_.substr(0, out_.find('\n') + 1), "usage: anisoscope [--server HOST:PORT] runs\n");
}

TEST_F(CliTest, VersionPrintsTheProjectVersion) {
  EXPECT_EQ(Run({"--version"}, false), 0);
  EXPECT_EQ(out_, "anisoscope " + std::string(ProjectVersion()) + " (database schema " +
                      std::to_string(kDatabaseSchemaVersion) + ")\n");
  EXPECT_NE(std::string(ProjectVersion()), "unknown");
  EXPECT_EQ(err_, "");
}

TEST_F(CliTest, SubmitWaitExitsOneWhenAStepFails) {
  server_.replies().job =
      MakeJob(v1::JOB_STATE_QUEUED, {v1::STEP_STATE_PENDING, v1::STEP_STATE_PENDING});
  SetWatchStream(server_.replies().job,
                 MakeJob(v1::JOB_STATE_FAILED, {v1::STEP_STATE_DONE, v1::STEP_STATE_FAILED}));
  std::vector<std::string> args = kSubmit;
  args.push_back("--wait");
  EXPECT_EQ(Run(args), 1);
  EXPECT_NE(err_.find("[2/2] step 100 FAILED: bad file\n"), std::string::npos) << err_;
  EXPECT_NE(out_.find("job 7 failed: 1 done, 1 failed (2 checkpoints)\n"), std::string::npos);
}

TEST_F(CliTest, WatchOfACancelledJobExitsOne) {
  const v1::Job cancelled =
      MakeJob(v1::JOB_STATE_CANCELLED, {v1::STEP_STATE_DONE, v1::STEP_STATE_CANCELLED});
  SetWatchStream(cancelled, cancelled);
  EXPECT_EQ(Run({"watch", "7"}), 1);
  EXPECT_EQ(err_, "[1/2] step 0 done 1.5 s\n[2/2] step 100 cancelled\n");
  EXPECT_EQ(out_, "job 7 cancelled: 1 done, 1 cancelled (2 checkpoints)\n");
}

TEST_F(CliTest, WatchCutShortIsAnError) {
  v1::Job running = MakeJob(v1::JOB_STATE_RUNNING, {v1::STEP_STATE_RUNNING});
  SetWatchStream(running, running);
  server_.replies().events.resize(1);  // the snapshot only
  server_.replies().watch_end = grpc::Status(grpc::StatusCode::UNAVAILABLE, "draining");
  EXPECT_EQ(Run({"watch", "7"}), 1);
  EXPECT_EQ(err_, "anisoscope: UNAVAILABLE: draining\n");
  server_.replies().watch_end = grpc::Status::OK;
  EXPECT_EQ(Run({"watch", "7"}), 1);
  EXPECT_EQ(err_, "anisoscope: the server ended the watch of job 7 before the job finished\n");
}

TEST_F(CliTest, StatusJobsCancelAndRuns) {
  server_.replies().job = MakeJob(v1::JOB_STATE_RUNNING, {v1::STEP_STATE_DONE});
  EXPECT_EQ(Run({"status", "7"}), 0);
  EXPECT_EQ(out_.rfind("job 7\n  run:      r\n  state:    running", 0), 0u) << out_;
  server_.replies().jobs = {server_.replies().job};
  EXPECT_EQ(Run({"jobs", "--limit", "5"}), 0);
  EXPECT_EQ(out_.rfind("ID  RUN  STATE    FINISHED  CREATED\n 7  r    running", 0), 0u) << out_;
  EXPECT_EQ(server_.requests().list_limits, std::vector<int32_t>{5});
  server_.replies().job.set_state(v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(Run({"cancel", "7"}), 0);
  EXPECT_EQ(out_, "job 7 cancelled\n");
  v1::Run run;
  run.set_name("pythia");
  server_.replies().runs = {run};
  EXPECT_EQ(Run({"runs"}), 0);
  EXPECT_NE(out_.find("pythia"), std::string::npos);
}

TEST_F(CliTest, RunsNamesEachProbeByItsLabelThenItsId) {
  v1::Run run;
  run.set_name("pythia");
  v1::Probe* probe = run.add_probes();
  probe->set_id("p0123456789abcdef0123456789abcdef");
  probe->set_description("wiki.test.raw · 128 windows x 512");
  server_.replies().runs = {run};
  EXPECT_EQ(Run({"runs"}), 0);
  EXPECT_NE(out_.find("  wiki.test.raw · 128 windows x 512 (p0123456789abcdef0123456789abcdef)  "),
            std::string::npos)
      << out_;
}

TEST_F(CliTest, QuerySendsFiltersAndPrintsEachFormat) {
  v1::SeriesPoint* point = server_.replies().series.add_points();
  point->set_step(10);
  point->set_layer(2);
  point->set_head(-1);
  point->set_value(0.1);
  server_.replies().series.set_probe_id("p");
  server_.replies().series.set_metric("hidden_anisotropy");
  const std::vector<std::string> query = {
      "query",       "--run", "r",       "--metric", "hidden_anisotropy", "--layer", "2",
      "--from-step", "5",     "--probe", "p"};
  std::vector<std::string> csv = query;
  csv.insert(csv.end(), {"--format", "csv"});
  EXPECT_EQ(Run(csv), 0);
  EXPECT_EQ(out_, "step,layer,head,value\n10,2,,0.10000000000000001\n");
  const v1::QuerySeriesRequest request = server_.requests().series.at(0);
  EXPECT_EQ(request.run(), "r");
  EXPECT_EQ(request.metric(), "hidden_anisotropy");
  EXPECT_EQ(request.probe_id(), "p");
  ASSERT_TRUE(request.has_layer());
  EXPECT_EQ(request.layer(), 2);
  EXPECT_FALSE(request.has_head());
  EXPECT_EQ(request.from_step(), 5);
  EXPECT_FALSE(request.has_to_step());
  std::vector<std::string> json = query;
  json.push_back("--format=json");
  EXPECT_EQ(Run(json), 0);
  EXPECT_EQ(out_, "[\n  {\"step\":10,\"layer\":2,\"head\":null,\"value\":0.1}\n]\n");
  EXPECT_EQ(Run(query), 0);
  EXPECT_EQ(out_, "run r  probe p  metric hidden_anisotropy\nSTEP   L2\n  10  0.1\n");
}

TEST_F(CliTest, VectorsPrintsJsonByDefaultAndCsv) {
  v1::VectorPoint* point = server_.replies().vectors.add_points();
  point->set_step(3);
  point->add_values(1);
  point->add_values(-0.5);
  EXPECT_EQ(Run({"vectors", "--run", "r", "--kind", "k_mean", "--layer", "1", "--head", "2"}), 0);
  EXPECT_EQ(out_, "[\n  {\"step\":3,\"values\":[1.0,-0.5]}\n]\n");
  const v1::QueryVectorsRequest request = server_.requests().vectors.at(0);
  EXPECT_EQ(request.kind(), "k_mean");
  EXPECT_EQ(request.layer(), 1);
  EXPECT_EQ(request.head(), 2);
  EXPECT_EQ(Run({"vectors", "--run", "r", "--kind", "q_mean", "--layer", "1", "--head", "2",
                 "--format", "csv"}),
            0);
  EXPECT_EQ(out_, "step,v0,v1\n3,1,-0.5\n");
  EXPECT_EQ(Run({"vectors", "--run", "r", "--kind", "v_mean", "--layer", "1", "--head", "2"}), 2);
  EXPECT_EQ(
      err_,
      "anisoscope: --kind: expected one of q_mean, k_mean, q_mean_pre_rotary, k_mean_pre_rotary, "
      "q_sample, k_sample, hidden_spectrum, final_norm_gain; "
      "got 'v_mean'\n");
}

TEST(SubmitRequestTest, PathsAreMadeAbsoluteAgainstTheClientCwd) {
  EXPECT_EQ(AbsolutePath("a/./b", "/w"), "/w/a/b");
  EXPECT_EQ(AbsolutePath("/x/y", "/w"), "/x/y");
  EXPECT_EQ(AbsolutePath("../up", "/w/v"), "/w/v/../up");
}

TEST(SubmitRequestTest, ConflictingOrMalformedFlagsAreUsageErrors) {
  const Command submit = JobCommands().at(0);
  auto error = [&](std::vector<std::string> args) {
    absl::StatusOr<ParsedArgs> parsed = ParseArgs(submit.spec, args);
    if (!parsed.ok()) return std::string(parsed.status().message());
    absl::StatusOr<v1::SubmitJobRequest> request = BuildSubmitRequest(*parsed, "/w");
    return request.ok() ? std::string("ok") : std::string(request.status().message());
  };
  // The job's rules are the server's (server/jobs/job_request.cc): these requests go to it as they
  // are, and its INVALID_ARGUMENT is what the user reads.
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--checkpoints", "d", "--probe-text", "t"},
           {"--run", "r", "--probe-text", "t"},
           {"--run", "r", "--checkpoints", "d", "--checkpoint", "1=a", "--probe-text", "t"},
           {"--run", "r", "--checkpoint", "1=a", "--checkpoint", "1=b", "--probe-text", "t"},
           {"--run", "r", "--checkpoints", "d"},
           {"--run", "r", "--checkpoints", "d", "--probe-tokens", "t", "--probe-mode", "lines"},
           {"--run", "r", "--checkpoints", "d", "--probe-tokens", "t", "--until-step", "5"}}) {
    EXPECT_EQ(error(args), "ok") << args.back();
  }
  // What one field cannot hold, and a flag's syntax, are refused before any call.
  EXPECT_EQ(error({"--run", "r", "--checkpoint", "-1=a", "--probe-text", "t"}),
            "--checkpoint requires a value (STEP=PATH)");
  EXPECT_EQ(error({"--run", "r", "--checkpoints", "d", "--hf-cache", "c", "--probe-text", "t"}),
            "submit: give one of --checkpoints DIR, --hf-cache DIR, --checkpoint STEP=PATH, "
            "--hub ORG/NAME, --hub-repos PATTERN, --s3 s3://BUCKET/PREFIX/");
  EXPECT_EQ(error({"--run", "r", "--checkpoint", "x=a", "--probe-text", "t"}),
            "--checkpoint: expected STEP=PATH with STEP >= 0, got 'x=a'");
  EXPECT_EQ(error({"--run", "r", "--checkpoints", "d", "--probe-tokens", "t", "--probe-text", "u"}),
            "submit: give --probe-tokens F or --probe-text F, not both");
  EXPECT_EQ(error({"--run", "r", "--checkpoints", "d", "--probe-tokens", "t", "--samples", "0"}),
            "--samples: must be at least 1, got 0");
  EXPECT_EQ(error({"--run", "r", "--checkpoints", "d", "--probe-tokens", "t"}), "ok");
}

TEST(SubmitRequestTest, MetricGroupsGoToTheServerAsGiven) {
  const Command submit = JobCommands().at(0);
  auto request_of = [&](std::vector<std::string> args) {
    absl::StatusOr<ParsedArgs> parsed = ParseArgs(submit.spec, args);
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    absl::StatusOr<v1::SubmitJobRequest> request = BuildSubmitRequest(*parsed, "/w");
    EXPECT_TRUE(request.ok()) << request.status();
    return request.ok() ? *request : v1::SubmitJobRequest();
  };
  const std::vector<std::string> base = {"--run", "r", "--checkpoints", "d", "--probe-tokens", "t"};
  EXPECT_EQ(request_of(base).probe().metrics(), "");  // all
  std::vector<std::string> core = base;
  core.insert(core.end(), {"--metrics", "core,spectra"});
  EXPECT_EQ(request_of(core).probe().metrics(), "core,spectra");
  // An unknown group is the server's to refuse (server/jobs/job_request.cc), with its message.
  std::vector<std::string> unknown = base;
  unknown.insert(unknown.end(), {"--metrics", "shiny"});
  EXPECT_EQ(request_of(unknown).probe().metrics(), "shiny");
}

}  // namespace
}  // namespace anisoscope::client
