// BlobDownloadTest: a fixture over one fault-server route, "/blob", answering as a BlobPlan
// says, and the request that downloads it into a temp folder: what the download tests share.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "sources/transfer/http_client.h"
#include "tests/common/test_temp_dir.h"
#include "tests/sources/transfer/fault_server.h"

namespace anisoscope::transfer::testing {

class BlobDownloadTest : public ::testing::Test {
 protected:
  // A server with the one route, counting the answers it served in served_.
  std::unique_ptr<FaultServer> Serve(const BlobPlan& plan) {
    return std::make_unique<FaultServer>([this, plan](FaultServer& self, httplib::Server& http) {
      http.Get("/blob",
               [this, plan, &self](const httplib::Request& request, httplib::Response& response) {
                 self.ServeBlob(request, response, plan, &served_);
               });
    });
  }

  // The blob of `size` bytes, its size and sha256 expected; `query` follows "/blob".
  DownloadRequest Request(const FaultServer& server, int64_t size, const std::string& query = "") {
    DownloadRequest request;
    request.url = server.Url("/blob" + query);
    request.path = dir_.File("blob.incomplete");
    request.expected_size = size;
    request.expected_sha256 = BlobSha256(size);
    return request;
  }

  std::atomic<int> served_{0};
  TestTempDir dir_;
};

}  // namespace anisoscope::transfer::testing
