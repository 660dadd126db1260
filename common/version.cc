#include "common/version.h"

#ifndef ANISOSCOPE_VERSION
#define ANISOSCOPE_VERSION "unknown"
#endif

namespace anisoscope {

std::string_view ProjectVersion() { return ANISOSCOPE_VERSION; }

std::string VersionLine(std::string_view program) {
  std::string line(program);
  line.append(" ").append(ProjectVersion());
  line.append(" (database schema ").append(std::to_string(kDatabaseSchemaVersion)).append(")");
  return line;
}

}  // namespace anisoscope
