// TLS material from PEM files, for gRPC channels (CLI, workers) and the server. Blocking
// file reads; thread-safe.
#pragma once

#include <grpcpp/security/credentials.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace anisoscope {

// The contents of PEM file `path`; INVALID_ARGUMENT naming `flag` when it cannot be read
// or is empty.
absl::StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& flag);

// Channel credentials: plain text when `ca_file` is empty; else TLS trusting the CA of
// `ca_file` (--tls-ca) and, when given, presenting the client certificate `cert_file`
// with key `key_file` (--tls-cert, --tls-key).
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFromFiles(
    const std::string& ca_file, const std::string& cert_file = "",
    const std::string& key_file = "");

}  // namespace anisoscope
