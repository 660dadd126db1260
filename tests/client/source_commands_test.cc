// Remote sources in the CLI: the source flags of submit and follow, `audit` against a fake
// server over a real socket, its table and JSON, a step's origin in `status` and `runs`, and
// a remote step's download in the progress lines.
#include <gtest/gtest.h>

#include <chrono>
#include <sstream>

#include "client/audit_commands.h"
#include "client/cli.h"
#include "client/job_commands.h"
#include "client/job_formatters.h"
#include "client/progress_printer.h"
#include "client/source_formatters.h"
#include "tests/client/cli_run.h"
#include "tests/client/fake_server.h"

namespace anisoscope::client {
namespace {

// The request `submit` (or `follow`) builds from `args`, or the usage error's message.
std::string SubmitError(std::vector<std::string> args, bool follow = false) {
  const Command command = JobCommands().at(follow ? 1 : 0);
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(command.spec, args);
  if (!parsed.ok()) return std::string(parsed.status().message());
  absl::StatusOr<v1::SubmitJobRequest> request = BuildSubmitRequest(*parsed, "/w", follow);
  return request.ok() ? "ok" : std::string(request.status().message());
}

v1::SubmitJobRequest SubmitRequest(std::vector<std::string> args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(JobCommands().at(0).spec, args);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  absl::StatusOr<v1::SubmitJobRequest> request = BuildSubmitRequest(*parsed, "/w");
  EXPECT_TRUE(request.ok()) << request.status();
  return request.ok() ? *request : v1::SubmitJobRequest();
}

TEST(SourceFlagsTest, EachSourceFillsTheRequestsSource) {
  const std::vector<std::string> probe = {"--run", "r", "--probe-tokens", "t"};
  auto with = [&](std::vector<std::string> args) {
    args.insert(args.begin(), probe.begin(), probe.end());
    return SubmitRequest(args);
  };
  v1::SubmitJobRequest hub = with(
      {"--hub", "EleutherAI/pythia-160m", "--revisions", "step1000,step2000", "--glob", "step*"});
  EXPECT_EQ(hub.source().hub(), "EleutherAI/pythia-160m");
  EXPECT_EQ(
      std::vector<std::string>(hub.source().revisions().begin(), hub.source().revisions().end()),
      (std::vector<std::string>{"step1000", "step2000"}));
  EXPECT_EQ(hub.source().glob(), "step*");
  EXPECT_TRUE(hub.checkpoints_dir().empty());
  v1::SubmitJobRequest suite =
      with({"--hub-repos", "google/multiberts-seed_0-step_{}k", "--revision", "v1"});
  EXPECT_EQ(suite.source().hub_repos(), "google/multiberts-seed_0-step_{}k");
  EXPECT_EQ(suite.source().revision(), "v1");
  EXPECT_EQ(with({"--s3", "s3://bucket/run/"}).source().s3(), "s3://bucket/run/");
  EXPECT_FALSE(with({"--checkpoints", "d"}).has_source());
}

TEST(SourceFlagsTest, OneSeriesAndNarrowingOnlyWithItsSourceAreUsageErrors) {
  const std::string one_of =
      "give one of --checkpoints DIR, --hf-cache DIR, --checkpoint STEP=PATH, --hub ORG/NAME, "
      "--hub-repos PATTERN, --s3 s3://BUCKET/PREFIX/";
  EXPECT_EQ(SubmitError({"--run", "r", "--hub", "a/b", "--s3", "s3://b/", "--probe-text", "t"}),
            "submit: " + one_of);
  EXPECT_EQ(SubmitError({"--run", "r", "--hub", "a/b", "--checkpoints", "d", "--probe-text", "t"}),
            "submit: " + one_of);
  EXPECT_EQ(
      SubmitError({"--run", "r", "--s3", "s3://b/", "--checkpoint", "1=a", "--probe-text", "t"}),
      "submit: " + one_of);
  EXPECT_EQ(SubmitError({"--run", "r", "--hub", "a/b", "--hf-cache", "c", "--probe-text", "t"},
                        /*follow=*/true),
            "follow: give one of --checkpoints DIR, --hf-cache DIR, --hub ORG/NAME, --hub-repos "
            "PATTERN, --s3 s3://BUCKET/PREFIX/");
  EXPECT_EQ(SubmitError({"--run", "r", "--checkpoints", "d", "--glob", "s*", "--probe-text", "t"}),
            "submit: --glob narrows --hub, --hub-repos or --s3; none is given");
  EXPECT_EQ(SubmitError({"--run", "r", "--hub", "a/b", "--revision", "v1", "--probe-text", "t"}),
            "submit: --revision is the revision of each repo of --hub-repos (with --hub or --s3, "
            "--revisions names the steps)");
  EXPECT_EQ(SubmitError({"--run", "r", "--hub", "a/b", "--revisions", "a,,b", "--probe-text", "t"}),
            "--revisions: an empty name in 'a,,b' (names are comma-separated)");
  // What a well-formed source is, is the server's rule: these go to it as given.
  EXPECT_EQ(SubmitError({"--run", "r", "--hub", "not a repo", "--probe-text", "t"}), "ok");
  EXPECT_EQ(SubmitError({"--run", "r", "--hub", "a/b", "--probe-text", "t"}, true), "ok");
}

class SourceCliTest : public ::testing::Test {
 protected:
  int Run(std::vector<std::string> args) {
    testing::CliRun run = testing::RunCliAt(server_.address(), std::move(args));
    out_ = std::move(run.out);
    err_ = std::move(run.err);
    return run.code;
  }

  static v1::AuditSourceResponse Audit() {
    v1::AuditSourceResponse audit;
    audit.set_source("hub:EleutherAI/pythia-160m");
    for (const int64_t step : {1000, 2000}) {
      v1::AuditStep* row = audit.add_steps();
      row->set_step(step);
      row->set_name("step" + std::to_string(step));
      row->set_revision(row->name());
      row->set_commit("0123456789abcdef0123456789abcdef01234567");
      v1::RemoteFile* file = row->add_files();
      file->set_path("model.safetensors");
      file->set_size(3 << 20);
      file->set_sha256(std::string(64, 'a'));
      row->set_size_bytes(3 << 20);
    }
    audit.mutable_steps(1)->set_duplicate_of(1000);
    v1::AuditProblem* problem = audit.add_problems();
    problem->set_name("step3000");
    problem->set_step(3000);
    problem->set_reason("EleutherAI/pythia-160m@step3000: no config.json");
    audit.add_without_step("main");
    audit.set_requests(4);
    audit.set_seconds(0.25);
    return audit;
  }

  FakeServer server_;
  std::string out_, err_;
};

TEST_F(SourceCliTest, AuditPrintsEveryStepThenProblemsAndNamesWithoutAStep) {
  server_.replies().audit = Audit();
  ASSERT_EQ(Run({"audit", "--hub", "EleutherAI/pythia-160m", "--glob", "step*"}), 0) << err_;
  EXPECT_EQ(out_,
            "hub:EleutherAI/pythia-160m: 2 steps\n"
            "\n"
            "STEP  NAME      REVISION  COMMIT        FILES     SIZE  SAME AS\n"
            "1000  step1000  step1000  0123456789ab      1  3.0 MiB        -\n"
            "2000  step2000  step2000  0123456789ab      1  3.0 MiB     1000\n"
            "\n"
            "problems:\n"
            "  step 3000 (step3000): EleutherAI/pythia-160m@step3000: no config.json\n"
            "\n"
            "names without a step:\n"
            "  main\n"
            "\n"
            "2 steps, 6.0 MiB in all; 1 with an earlier step's weights (--dedupe skips it); "
            "1 problem; 4 listing requests in 0.2 s, no weight byte read\n");
  ASSERT_EQ(server_.requests().audits.size(), 1u);
  EXPECT_EQ(server_.requests().audits[0].source().hub(), "EleutherAI/pythia-160m");
  EXPECT_EQ(server_.requests().audits[0].source().glob(), "step*");
}

TEST_F(SourceCliTest, AuditJsonIsTheProtoJsonMappingAndAFolderIsMadeAbsolute) {
  server_.replies().audit = Audit();
  ASSERT_EQ(Run({"audit", "--checkpoints", "ckpts", "--format", "json"}), 0) << err_;
  EXPECT_EQ(
      out_.rfind("{\"source\":\"hub:EleutherAI/pythia-160m\",\"steps\":[{\"step\":\"1000\"", 0), 0u)
      << out_;
  EXPECT_NE(out_.find("\"duplicateOf\":\"1000\""), std::string::npos) << out_;
  EXPECT_EQ(out_.back(), '\n');
  EXPECT_EQ(server_.requests().audits.at(0).checkpoints_dir(), "/home/me/work/ckpts");
  EXPECT_FALSE(server_.requests().audits.at(0).has_source());
}

TEST_F(SourceCliTest, AuditOfTwoSeriesOrMixedWithTheLogsFlagsIsAUsageError) {
  EXPECT_EQ(Run({"audit", "--hub", "a/b", "--checkpoints", "d"}), 2);
  EXPECT_EQ(err_,
            "anisoscope: audit: give one of --checkpoints DIR, --hub ORG/NAME, --hub-repos "
            "PATTERN, --s3 s3://BUCKET/PREFIX/\n");
  EXPECT_EQ(Run({"audit", "--hub", "a/b", "--limit", "5"}), 2);
  EXPECT_EQ(err_, "anisoscope: audit: --limit applies to the audit log (given no series)\n");
  EXPECT_EQ(Run({"audit", "--format", "json"}), 2);
  EXPECT_EQ(Run({"audit", "--glob", "x"}), 2);
  EXPECT_TRUE(server_.requests().audits.empty());
  server_.replies().status =
      grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "source hub:a/b: not in --allow-source");
  EXPECT_EQ(Run({"audit", "--hub", "a/b"}), 1);
  EXPECT_EQ(err_, "anisoscope: PERMISSION_DENIED: source hub:a/b: not in --allow-source\n");
}

TEST_F(SourceCliTest, FollowOfARemoteSourceNamesIt) {
  v1::Job job;
  job.set_id(7);
  job.set_run("r");
  job.set_state(v1::JOB_STATE_SUCCEEDED);
  server_.replies().job = job;
  v1::JobEvent finished;
  finished.set_kind(v1::JobEvent::KIND_JOB_FINISHED);
  *finished.mutable_job() = job;
  server_.replies().events = {finished};
  EXPECT_EQ(Run({"follow", "--run", "r", "--hub", "a/b", "--probe-tokens", "t"}), 0) << err_;
  EXPECT_EQ(out_.rfind("job 7 follows hub:a/b for run r: 0 whole checkpoints so far", 0), 0u)
      << out_;
  EXPECT_TRUE(server_.requests().submits.at(0).follow());
}

TEST_F(SourceCliTest, HelpTellsOfTheSources) {
  ASSERT_EQ(Run({"audit", "--help"}), 0);
  EXPECT_NE(out_.find("--hub-repos PATTERN"), std::string::npos) << out_;
  EXPECT_NE(out_.find("reads no weight byte"), std::string::npos) << out_;
  ASSERT_EQ(Run({"submit", "--help"}), 0);
  EXPECT_NE(out_.find("--s3 s3://BUCKET/PREFIX/"), std::string::npos) << out_;
  EXPECT_NE(TopLevelUsage().find("  audit "), std::string::npos);
}

TEST(SourceFormattersTest, StatusAndRunsShowWhereRemoteStepsCameFrom) {
  v1::Job job;
  job.set_id(3);
  job.mutable_source()->set_hub("EleutherAI/pythia-160m");
  job.mutable_source()->add_revisions("step1000");
  v1::CheckpointStatus* checkpoint = job.add_checkpoints();
  checkpoint->set_step(1000);
  checkpoint->set_state(v1::STEP_STATE_DONE);
  checkpoint->set_revision("step1000");
  checkpoint->set_commit("0123456789abcdef0123456789abcdef01234567");
  const std::string details = JobDetails(job);
  EXPECT_NE(details.find("  source:   hub:EleutherAI/pythia-160m (revisions step1000)\n"),
            std::string::npos)
      << details;
  EXPECT_NE(details.find("REVISION  COMMIT        ERROR"), std::string::npos) << details;
  EXPECT_NE(details.find("step1000  0123456789ab"), std::string::npos) << details;
  v1::Run run;
  run.set_name("pythia");
  for (const int64_t step : {1000, 2000}) {
    v1::StepOrigin* origin = run.add_origins();
    origin->set_step(step);
    origin->set_source("hub:EleutherAI/pythia-160m");
  }
  v1::Run local;
  local.set_name("local");
  const std::string table = RunsTable({run, local});
  EXPECT_NE(table.find("FROM\n"), std::string::npos) << table;
  EXPECT_NE(table.find("hub:EleutherAI/pythia-160m (2 steps)\n"), std::string::npos) << table;
  EXPECT_EQ(RunsTable({local}).find("FROM"), std::string::npos);
  EXPECT_EQ(OriginText("hub:a/b", "step1", "0123456789abcdef"),
            "hub:a/b@step1 (commit 0123456789ab)");
  EXPECT_EQ(OriginText("s3://b", "run/step1/", ""), "s3://b@run/step1/");
  EXPECT_EQ(OriginText("", "", ""), "");
}

TEST(SourceProgressTest, AFetchingStepShowsItsRateAndTheCacheOnATtyOnly) {
  v1::JobEvent event;
  event.set_kind(v1::JobEvent::KIND_STEP_FETCHING);
  event.mutable_job()->set_steps_total(12);
  event.mutable_checkpoint()->set_step(5);
  event.mutable_fetch()->set_bytes_done(int64_t{1} << 30);
  event.mutable_fetch()->set_bytes_total(int64_t{3} << 30);
  event.mutable_fetch()->set_bytes_per_second(180.0 * (1 << 20));
  event.mutable_fetch()->set_cache_bytes(int64_t{12} << 30);
  ProgressPrinter tty(/*tty=*/true);
  EXPECT_EQ(tty.Render(event),
            "\r\033[K[1/12] step 5 fetching 1.0 GiB/3.0 GiB at 180.0 MiB/s, cache 12.0 GiB");
  ProgressPrinter plain(/*tty=*/false);
  EXPECT_EQ(plain.Render(event), "");
}

}  // namespace
}  // namespace anisoscope::client
