// Where a series is read from, as the CLI says it: the flags of a checkpoint source, declared
// once for `submit`, `follow` and `audit` (--hub, --hub-repos, --s3 and their narrowing
// --revisions, --glob, --revision), and the CheckpointSource they make. Only what a flag's
// syntax and the flags' combination decide is checked here; what a well-formed source is
// (a repo id, a pattern with one "{}", an s3:// URL) is the server's rule
// (server/sources/source_description.h), whose message the user reads. Pure; no I/O.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "anisoscope/v1/anisoscope.pb.h"
#include "client/flags.h"

namespace anisoscope::client {

// --hub, --hub-repos, --s3, --revisions, --glob, --revision, in the order the help lists them.
std::vector<FlagSpec> SourceFlags();

// A flag that names a series in place of a source: {"checkpoints", "DIR"}.
struct SeriesFlag {
  std::string name;
  std::string value_name;
};

// The source the flags of `args` name, into `source`: false when none of --hub, --hub-repos,
// --s3 is given. INVALID_ARGUMENT, prefixed "COMMAND: ", for a source beside another or
// beside one of `others` ("give one of --checkpoints DIR, --hub ORG/NAME, ..."; `others`
// among themselves are the caller's to check), for --revisions, --glob or --revision
// without the source they narrow, and for an empty name in --revisions.
absl::StatusOr<bool> ReadSource(const ParsedArgs& args, const std::string& command,
                                const std::vector<SeriesFlag>& others,
                                v1::CheckpointSource* source);

// "give one of --checkpoints DIR, --hub ORG/NAME, ...": `others` then the sources.
std::string OneSeriesMessage(const std::string& command, const std::vector<SeriesFlag>& others);

// "hub:ORG/NAME", "hub:ORG/NAME{}" or "s3://BUCKET/PREFIX/", as the server writes it; with
// " (revisions A,B)", " (glob G)", " (revision R)" when narrowed. "" for no source.
std::string DescribeSource(const v1::CheckpointSource& source);

}  // namespace anisoscope::client
