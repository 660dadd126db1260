// ResolveSourceEndpoints: flags over variables over defaults, token and credentials files,
// and errors that name the flag or file and never a secret.
#include "sources/endpoints/source_endpoints.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <map>
#include <optional>
#include <string>

#include "tests/common/test_temp_dir.h"

namespace anisoscope::sources {
namespace {

constexpr const char* kVariables[] = {"HF_ENDPOINT",         "HF_TOKEN",
                                      "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL",
                                      "AWS_REGION",          "AWS_DEFAULT_REGION",
                                      "AWS_ACCESS_KEY_ID",   "AWS_SECRET_ACCESS_KEY",
                                      "AWS_SESSION_TOKEN",   "AWS_SHARED_CREDENTIALS_FILE",
                                      "AWS_PROFILE",         "HOME"};

// Clears the variables the resolution reads (HOME pointed at an empty temp folder) and
// restores them afterwards.
class EndpointsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kVariables) {
      if (const char* value = getenv(name)) saved_[name] = value;
      unsetenv(name);
    }
    setenv("HOME", temp_.path().c_str(), 1);
  }
  void TearDown() override {
    for (const char* name : kVariables) {
      unsetenv(name);
      if (auto it = saved_.find(name); it != saved_.end()) setenv(name, it->second.c_str(), 1);
    }
  }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = temp_.File(name);
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path) << text;
    return path;
  }

  TestTempDir temp_;
  std::map<std::string, std::string> saved_;
};

TEST_F(EndpointsTest, DefaultsArePublicHubAndAwsWithoutCredentials) {
  const absl::StatusOr<SourceEndpoints> resolved = ResolveSourceEndpoints({});
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->hub_endpoint, "https://huggingface.co");
  EXPECT_EQ(resolved->s3_endpoint, "https://s3.us-east-1.amazonaws.com");
  EXPECT_EQ(resolved->s3_region, "us-east-1");
  EXPECT_EQ(resolved->hub.endpoint, "https://huggingface.co");
  EXPECT_TRUE(resolved->hub.bearer_token.empty());
  EXPECT_EQ(resolved->s3.endpoint, resolved->s3_endpoint);
  EXPECT_FALSE(resolved->s3.aws.has_value());
}

TEST_F(EndpointsTest, VariablesApplyWhenNoFlagIsGiven) {
  setenv("HF_ENDPOINT", "http://hub.local:8080/", 1);
  setenv("HF_TOKEN", "hf_env_token\n", 1);
  setenv("AWS_DEFAULT_REGION", "eu-west-3", 1);
  setenv("AWS_ENDPOINT_URL", "http://minio:9000", 1);
  const absl::StatusOr<SourceEndpoints> resolved = ResolveSourceEndpoints({});
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->hub_endpoint, "http://hub.local:8080");
  EXPECT_EQ(resolved->hub.bearer_token, "hf_env_token");
  EXPECT_EQ(resolved->s3_region, "eu-west-3");
  EXPECT_EQ(resolved->s3_endpoint, "http://minio:9000");

  setenv("AWS_REGION", "ap-south-1", 1);
  setenv("AWS_ENDPOINT_URL_S3", "http://s3-only:9000", 1);
  const absl::StatusOr<SourceEndpoints> specific = ResolveSourceEndpoints({});
  ASSERT_TRUE(specific.ok()) << specific.status();
  EXPECT_EQ(specific->s3_region, "ap-south-1");
  EXPECT_EQ(specific->s3_endpoint, "http://s3-only:9000");

  unsetenv("AWS_ENDPOINT_URL_S3");
  unsetenv("AWS_ENDPOINT_URL");
  const absl::StatusOr<SourceEndpoints> regional = ResolveSourceEndpoints({});
  ASSERT_TRUE(regional.ok()) << regional.status();
  EXPECT_EQ(regional->s3_endpoint, "https://s3.ap-south-1.amazonaws.com");
}

TEST_F(EndpointsTest, FlagsWinOverVariables) {
  setenv("HF_ENDPOINT", "http://from-env", 1);
  setenv("HF_TOKEN", "env_token", 1);
  setenv("AWS_REGION", "eu-west-3", 1);
  setenv("AWS_ENDPOINT_URL_S3", "http://env-s3", 1);
  SourceEndpointFlags flags;
  flags.hub_endpoint = "https://hub.example.org/mirror/";
  flags.hub_token_file = Write("token", "  hf_file_token\n");
  flags.s3_endpoint = "http://127.0.0.1:9000";
  flags.s3_region = "us-west-2";
  const absl::StatusOr<SourceEndpoints> resolved = ResolveSourceEndpoints(flags);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->hub_endpoint, "https://hub.example.org/mirror");
  EXPECT_EQ(resolved->hub.bearer_token, "hf_file_token");
  EXPECT_EQ(resolved->s3_endpoint, "http://127.0.0.1:9000");
  EXPECT_EQ(resolved->s3_region, "us-west-2");
}

TEST_F(EndpointsTest, BadEndpointNamesItsFlagOrVariable) {
  SourceEndpointFlags flags;
  flags.hub_endpoint = "ftp://hub";
  absl::StatusOr<SourceEndpoints> resolved = ResolveSourceEndpoints(flags);
  ASSERT_EQ(resolved.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(resolved.status().message().find("--hub-endpoint"), std::string::npos);

  setenv("AWS_ENDPOINT_URL", "http://user:secretpw@minio:9000", 1);
  resolved = ResolveSourceEndpoints({});
  ASSERT_EQ(resolved.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(resolved.status().message().find("$AWS_ENDPOINT_URL"), std::string::npos);
  EXPECT_EQ(resolved.status().message().find("secretpw"), std::string::npos);

  unsetenv("AWS_ENDPOINT_URL");
  flags = {};
  flags.s3_endpoint = "http://minio:9000/?x=1";
  resolved = ResolveSourceEndpoints(flags);
  ASSERT_EQ(resolved.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(resolved.status().message().find("--s3-endpoint"), std::string::npos);

  flags = {};
  flags.s3_region = "us-east-1\nHost: x";
  resolved = ResolveSourceEndpoints(flags);
  ASSERT_EQ(resolved.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(resolved.status().message().find("--s3-region"), std::string::npos);
}

TEST_F(EndpointsTest, TokenFileErrorsNameTheFileNeverTheToken) {
  SourceEndpointFlags flags;
  flags.hub_token_file = temp_.File("missing");
  absl::StatusOr<SourceEndpoints> resolved = ResolveSourceEndpoints(flags);
  ASSERT_EQ(resolved.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(resolved.status().message().find("--hub-token-file"), std::string::npos);
  EXPECT_NE(resolved.status().message().find("missing"), std::string::npos);

  flags.hub_token_file = Write("empty", "\n\n");
  resolved = ResolveSourceEndpoints(flags);
  ASSERT_EQ(resolved.status().code(), absl::StatusCode::kInvalidArgument);

  flags.hub_token_file = Write("two", "hf_secret_one\r\nX-Injected: hf_secret_two\n");
  resolved = ResolveSourceEndpoints(flags);
  ASSERT_EQ(resolved.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(resolved.status().message().find("hf_secret"), std::string::npos);

  flags.hub_token_file = Write("huge", std::string(kMaxTokenFileBytes + 1, 'a'));
  resolved = ResolveSourceEndpoints(flags);
  ASSERT_EQ(resolved.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(resolved.status().message().find("at most"), std::string::npos);
}

TEST_F(EndpointsTest, AwsKeysFromTheEnvironmentBeatTheFile) {
  Write(".aws/credentials",
        "[default]\naws_access_key_id = FILEKEY\naws_secret_access_key = FILESECRET\n");
  setenv("AWS_ACCESS_KEY_ID", "ENVKEY", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "ENVSECRET", 1);
  setenv("AWS_SESSION_TOKEN", "ENVSESSION", 1);
  setenv("AWS_REGION", "eu-central-1", 1);
  const absl::StatusOr<SourceEndpoints> resolved = ResolveSourceEndpoints({});
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  ASSERT_TRUE(resolved->s3.aws.has_value());
  EXPECT_EQ(resolved->s3.aws->access_key_id, "ENVKEY");
  EXPECT_EQ(resolved->s3.aws->secret_access_key, "ENVSECRET");
  EXPECT_EQ(resolved->s3.aws->session_token, "ENVSESSION");
  EXPECT_EQ(resolved->s3.aws->region, "eu-central-1");
  EXPECT_EQ(resolved->s3.aws->service, "s3");

  unsetenv("AWS_SECRET_ACCESS_KEY");
  const absl::StatusOr<SourceEndpoints> half = ResolveSourceEndpoints({});
  ASSERT_EQ(half.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(half.status().message().find("ENVKEY"), std::string::npos);
}

TEST_F(EndpointsTest, AwsKeysFromTheHomeFileAndNamedProfile) {
  Write(
      ".aws/credentials",
      "# comment\n[default]\naws_access_key_id = DEFKEY\naws_secret_access_key=DEFSECRET\n\n"
      "[team]\r\n; another\r\naws_access_key_id = TEAMKEY\r\naws_secret_access_key = TEAMSECRET\r\n"
      "aws_session_token = TEAMSESSION\r\n");
  absl::StatusOr<SourceEndpoints> resolved = ResolveSourceEndpoints({});
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  ASSERT_TRUE(resolved->s3.aws.has_value());
  EXPECT_EQ(resolved->s3.aws->access_key_id, "DEFKEY");
  EXPECT_EQ(resolved->s3.aws->secret_access_key, "DEFSECRET");
  EXPECT_TRUE(resolved->s3.aws->session_token.empty());

  setenv("AWS_PROFILE", "team", 1);
  resolved = ResolveSourceEndpoints({});
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->s3.aws->access_key_id, "TEAMKEY");
  EXPECT_EQ(resolved->s3.aws->session_token, "TEAMSESSION");

  setenv("AWS_PROFILE", "nobody", 1);
  resolved = ResolveSourceEndpoints({});
  ASSERT_EQ(resolved.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(resolved.status().message().find("nobody"), std::string::npos);
}

TEST_F(EndpointsTest, SharedCredentialsFileVariableAndMissingFileMeansUnsigned) {
  setenv("AWS_SHARED_CREDENTIALS_FILE", temp_.File("nowhere").c_str(), 1);
  absl::StatusOr<SourceEndpoints> resolved = ResolveSourceEndpoints({});
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_FALSE(resolved->s3.aws.has_value());

  const std::string path = Write("creds", "[default]\naws_access_key_id = ONLYKEY\n");
  setenv("AWS_SHARED_CREDENTIALS_FILE", path.c_str(), 1);
  resolved = ResolveSourceEndpoints({});
  ASSERT_EQ(resolved.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(resolved.status().message().find(path), std::string::npos);
  EXPECT_EQ(resolved.status().message().find("ONLYKEY"), std::string::npos);
}

TEST(ParseAwsCredentialsTest, SectionsKeysAndHostileBytes) {
  const auto parsed = ParseAwsCredentials(
      "[other]\naws_access_key_id=A\naws_secret_access_key=B\n[default]\n"
      "AWS_ACCESS_KEY_ID = C\naws_secret_access_key = D\n[broken\naws_access_key_id = E\n",
      "default", "f");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_TRUE(parsed->has_value());
  EXPECT_EQ((*parsed)->access_key_id, "C");
  EXPECT_EQ((*parsed)->secret_access_key, "D");

  const auto none = ParseAwsCredentials("[x]\naws_access_key_id=A\n", "default", "f");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  const auto spaced = ParseAwsCredentials(
      "[default]\naws_access_key_id=A B\naws_secret_access_key=S\n", "default", "f");
  ASSERT_EQ(spaced.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(spaced.status().message().find("A B"), std::string::npos);
}

TEST_F(EndpointsTest, ClientsAreMadeForBothSources) {
  setenv("HF_TOKEN", "hf_token", 1);
  setenv("AWS_ACCESS_KEY_ID", "K", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "S", 1);
  const absl::StatusOr<SourceEndpoints> resolved = ResolveSourceEndpoints({});
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  absl::StatusOr<SourceClients> clients = MakeSourceClients(*resolved, {});
  ASSERT_TRUE(clients.ok()) << clients.status();
  EXPECT_NE(clients->hub, nullptr);
  EXPECT_NE(clients->s3, nullptr);

  transfer::TransferOptions bad;
  bad.max_attempts = 0;
  EXPECT_EQ(MakeSourceClients(*resolved, bad).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace anisoscope::sources
