#include "client/source_flags.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace anisoscope::client {
namespace {

// The sources, with the value names the help shows: the one list of them.
const std::vector<SeriesFlag>& Sources() {
  static const auto* sources = new std::vector<SeriesFlag>{
      {"hub", "ORG/NAME"}, {"hub-repos", "PATTERN"}, {"s3", "s3://BUCKET/PREFIX/"}};
  return *sources;
}

}  // namespace

std::vector<FlagSpec> SourceFlags() {
  return {
      StringFlag("hub", "ORG/NAME",
                 "a Hugging Face Hub repo: every branch whose name carries a step\n"
                 "(step1000, stage1-step1000-tokens4B, checkpoint-200, ...), read from the\n"
                 "server's and workers' --hub-endpoint"),
      StringFlag("hub-repos", "PATTERN",
                 "a repo per step, '{}' standing for the step's part\n"
                 "(google/multiberts-seed_0-step_{}k)"),
      StringFlag("s3", "s3://BUCKET/PREFIX/",
                 "an S3 (or S3-compatible) prefix with one folder per step, named as\n"
                 "--checkpoints folders are (the server's and workers' --s3-endpoint)"),
      StringFlag("revisions", "A,B,...",
                 "only these branches (--hub), folders (--s3) or '{}' values (--hub-repos)"),
      StringFlag("glob", "PATTERN",
                 "only the branches, folders or repos whose name matches (fnmatch: *, ?, [..])"),
      StringFlag("revision", "R", "with --hub-repos: the revision of each repo (default main)"),
  };
}

std::string OneSeriesMessage(const std::string& command, const std::vector<SeriesFlag>& others) {
  std::vector<std::string> names;
  for (const std::vector<SeriesFlag>* list : {&others, &Sources()}) {
    for (const SeriesFlag& flag : *list) {
      names.push_back(absl::StrCat("--", flag.name, " ", flag.value_name));
    }
  }
  return absl::StrCat(command, ": give one of ", absl::StrJoin(names, ", "));
}

absl::StatusOr<bool> ReadSource(const ParsedArgs& args, const std::string& command,
                                const std::vector<SeriesFlag>& others,
                                v1::CheckpointSource* source) {
  int given = 0;
  for (const std::vector<SeriesFlag>* list : {&others, &Sources()}) {
    for (const SeriesFlag& flag : *list) given += args.Has(flag.name) ? 1 : 0;
  }
  const bool remote = args.Has("hub") || args.Has("hub-repos") || args.Has("s3");
  if (remote && given > 1) return absl::InvalidArgumentError(OneSeriesMessage(command, others));
  if (!remote) {
    for (const char* narrowing : {"revisions", "glob", "revision"}) {
      if (args.Has(narrowing)) {
        return absl::InvalidArgumentError(absl::StrCat(
            command, ": --", narrowing, " narrows --hub, --hub-repos or --s3; none is given"));
      }
    }
    return false;
  }
  source->Clear();
  if (args.Has("hub")) source->set_hub(args.GetString("hub"));
  if (args.Has("hub-repos")) source->set_hub_repos(args.GetString("hub-repos"));
  if (args.Has("s3")) source->set_s3(args.GetString("s3"));
  if (args.Has("revision") && !args.Has("hub-repos")) {
    return absl::InvalidArgumentError(absl::StrCat(
        command,
        ": --revision is the revision of each repo of --hub-repos (with --hub or --s3, "
        "--revisions names the steps)"));
  }
  if (args.Has("revisions")) {
    for (absl::string_view name : absl::StrSplit(args.GetString("revisions"), ',')) {
      if (name.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("--revisions: an empty name in '",
                                                       args.GetString("revisions"),
                                                       "' (names are comma-separated)"));
      }
      source->add_revisions(std::string(name));
    }
  }
  source->set_glob(args.GetString("glob"));
  source->set_revision(args.GetString("revision"));
  return true;
}

std::string DescribeSource(const v1::CheckpointSource& source) {
  std::string text;
  switch (source.kind_case()) {
    case v1::CheckpointSource::kHub:
      text = absl::StrCat("hub:", source.hub());
      break;
    case v1::CheckpointSource::kHubRepos:
      text = absl::StrCat("hub:", source.hub_repos());
      break;
    case v1::CheckpointSource::kS3:
      text = source.s3();
      break;
    case v1::CheckpointSource::KIND_NOT_SET:
      return "";
  }
  if (source.revisions_size() > 0) {
    absl::StrAppend(&text, " (revisions ", absl::StrJoin(source.revisions(), ","), ")");
  }
  if (!source.glob().empty()) absl::StrAppend(&text, " (glob ", source.glob(), ")");
  if (!source.revision().empty()) absl::StrAppend(&text, " (revision ", source.revision(), ")");
  return text;
}

}  // namespace anisoscope::client
