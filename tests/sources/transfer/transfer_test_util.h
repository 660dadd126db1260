// What the transfer tests share: options that keep a test fast, and a file's bytes.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "sources/transfer/http_client.h"

namespace anisoscope::transfer::testing {

// Retries after a few milliseconds, a stall noticed in half a second.
inline TransferOptions FastOptions() {
  TransferOptions options;
  options.max_attempts = 4;
  options.initial_backoff = absl::Milliseconds(2);
  options.max_backoff = absl::Milliseconds(20);
  options.connect_timeout = absl::Seconds(5);
  options.stall_timeout = absl::Milliseconds(500);
  options.progress_interval = absl::Milliseconds(10);
  return options;
}

inline std::unique_ptr<HttpClient> MakeClient(const TransferOptions& options,
                                              const Credentials& credentials = {}) {
  absl::StatusOr<std::unique_ptr<HttpClient>> client = HttpClient::Create(options, credentials);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace anisoscope::transfer::testing
