// The commands an operator runs on the server host, against the database file itself:
//   anisoscope-server tokens create|list|revoke --db FILE ...
//   anisoscope-server namespaces set|list --db FILE ...
//   anisoscope-server backup --db FILE --out FILE
// They are safe while a server uses the same file (SQLite's locks; the backup is a
// consistent snapshot). Token changes are audited as "host:USER".
#pragma once

#include <ostream>

namespace anisoscope::server {

// True when argv[1] names a host command.
bool IsHostCommand(int argc, const char* const* argv);

// Runs the host command of argv, writing results to `out` and messages to `err`. Returns
// the exit code: 0 success, 1 failure, 2 usage error.
int RunHostCommand(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace anisoscope::server
