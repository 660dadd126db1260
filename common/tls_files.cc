#include "common/tls_files.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace anisoscope {

absl::StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& flag) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in || text.str().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " '", path, "' cannot be read"));
  }
  return text.str();
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFromFiles(
    const std::string& ca_file, const std::string& cert_file, const std::string& key_file) {
  if (ca_file.empty()) {
    if (!cert_file.empty()) {
      return absl::InvalidArgumentError("--tls-cert needs --tls-ca (the server's CA)");
    }
    return grpc::InsecureChannelCredentials();
  }
  if (cert_file.empty() != key_file.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  grpc::SslCredentialsOptions options;
  ASSIGN_OR_RETURN(options.pem_root_certs, ReadPemFile(ca_file, "--tls-ca"));
  if (!cert_file.empty()) {
    ASSIGN_OR_RETURN(options.pem_cert_chain, ReadPemFile(cert_file, "--tls-cert"));
    ASSIGN_OR_RETURN(options.pem_private_key, ReadPemFile(key_file, "--tls-key"));
  }
  return grpc::SslCredentials(options);
}

}  // namespace anisoscope
