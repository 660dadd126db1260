#include "server/http/static_files.h"

#include <httplib.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/http/http_json.h"

namespace anisoscope::server {

namespace fs = std::filesystem;

std::string ContentTypeFor(const fs::path& file) {
  static const std::map<std::string, std::string>* const kTypes =
      new std::map<std::string, std::string>{
          {".html", "text/html; charset=utf-8"},
          {".js", "text/javascript; charset=utf-8"},
          {".mjs", "text/javascript; charset=utf-8"},
          {".css", "text/css; charset=utf-8"},
          {".svg", "image/svg+xml"},
          {".png", "image/png"},
          {".json", "application/json; charset=utf-8"},
          {".map", "application/json; charset=utf-8"},
          {".txt", "text/plain; charset=utf-8"},
          {".ico", "image/x-icon"},
          {".woff2", "font/woff2"},
      };
  auto it = kTypes->find(absl::AsciiStrToLower(file.extension().string()));
  return it == kTypes->end() ? "application/octet-stream" : it->second;
}

absl::StatusOr<fs::path> ResolveStaticFile(const fs::path& web_dir, const std::string& url_path) {
  std::error_code error;
  if (!fs::is_directory(web_dir, error)) {
    return absl::UnavailableError(absl::StrCat(
        "the dashboard assets are not built: '", web_dir.string(),
        "' does not exist (run scripts/setup.sh, or pass --web-dir); the API under /api/v1/ "
        "works without them"));
  }
  if (url_path.find('\\') != std::string::npos || url_path.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("bad path '", url_path, "'"));
  }
  fs::path relative;
  for (absl::string_view segment : absl::StrSplit(url_path, '/', absl::SkipEmpty())) {
    if (segment == "..") {
      return absl::InvalidArgumentError(absl::StrCat("path '", url_path, "' may not contain '..'"));
    }
    if (segment == ".") continue;
    relative /= std::string(segment);
  }
  const fs::path root = fs::canonical(web_dir, error);
  if (error) return absl::UnavailableError(absl::StrCat("cannot read '", web_dir.string(), "'"));
  fs::path file = root / relative;
  if (fs::is_directory(file, error)) file /= "index.html";
  const fs::path resolved = fs::canonical(file, error);
  if (error || !fs::is_regular_file(resolved, error)) {
    return absl::NotFoundError(absl::StrCat("not found: ", url_path));
  }
  // Symlinks inside web_dir must not lead outside it.
  const auto [root_end, unused] =
      std::mismatch(root.begin(), root.end(), resolved.begin(), resolved.end());
  if (root_end != root.end()) {
    return absl::PermissionDeniedError(absl::StrCat("not served: ", url_path));
  }
  return resolved;
}

void ServeStaticFile(const fs::path& web_dir, const httplib::Request& req, httplib::Response& res) {
  absl::StatusOr<fs::path> file = ResolveStaticFile(web_dir, req.path);
  if (!file.ok()) {
    res.status = HttpStatusFor(file.status().code());
    res.set_content(std::string(file.status().message()) + "\n", "text/plain; charset=utf-8");
    return;
  }
  std::ifstream in(*file, std::ios::binary);
  std::ostringstream content;
  content << in.rdbuf();
  if (!in) {
    res.status = 500;
    res.set_content(absl::StrCat("cannot read ", file->string(), "\n"), "text/plain");
    return;
  }
  res.set_header("Cache-Control", "no-cache");
  res.set_content(content.str(), ContentTypeFor(*file));
}

}  // namespace anisoscope::server
