// The project's version, from the top-level CMakeLists.txt's project(VERSION), and the
// database schema's: the one home of the numbers every binary's --version prints (the Python package repeats it in
// python/pyproject.toml and anisoscope/__init__.py; tests/python/client_test.py ties them).
#pragma once

#include <string>
#include <string_view>

namespace anisoscope {

// "0.1.0"; "unknown" in a build that does not start at the top-level CMakeLists.txt.
std::string_view ProjectVersion();

// The database schema this build writes: the number of storage/schema.cc's migrations
// (tests/storage/schema_test.cc ties the two), here so that every binary can print it.
inline constexpr int kDatabaseSchemaVersion = 10;

// "PROGRAM VERSION (database schema N)", the first line of each binary's --version.
std::string VersionLine(std::string_view program);

}  // namespace anisoscope
