#include "tests/sources/transfer/fault_server.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "sources/transfer/sha256_stream.h"

namespace anisoscope::transfer::testing {

char BlobByte(int64_t i) { return static_cast<char>((i * 131 + (i >> 9) * 7) & 0xFF); }

std::string BlobBytes(int64_t start, int64_t count) {
  std::string bytes(static_cast<size_t>(count), '\0');
  for (int64_t i = 0; i < count; ++i) bytes[static_cast<size_t>(i)] = BlobByte(start + i);
  return bytes;
}

std::string BlobSha256(int64_t size) {
  Sha256Stream hasher;
  for (int64_t at = 0; at < size; at += 1 << 20) {
    hasher.Update(BlobBytes(at, std::min<int64_t>(1 << 20, size - at)));
  }
  return hasher.HexDigest();
}

std::string RecordedRequest::Header(const std::string& name) const {
  const auto it = headers.find(name);
  return it == headers.end() ? "" : it->second;
}

bool RecordedRequest::Has(const std::string& name) const { return headers.count(name) > 0; }

FaultServer::FaultServer(const Routes& routes) {
  server_.set_pre_routing_handler([this](const httplib::Request& request, httplib::Response&) {
    RecordedRequest recorded{request.method, request.path, {}};
    for (const auto& [name, value] : request.headers) recorded.headers.emplace(name, value);
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(std::move(recorded));
    return httplib::Server::HandlerResponse::Unhandled;
  });
  routes(*this, server_);
  port_ = server_.bind_to_any_port("127.0.0.1");
  if (port_ <= 0) throw std::runtime_error("the fault server cannot bind 127.0.0.1");
  // bind_to_any_port already listens: connections wait in the backlog until the loop runs.
  thread_ = std::thread([this] { server_.listen_after_bind(); });
  // httplib's stop() does nothing before the loop runs: wait for it, so that the destructor
  // always ends it.
  while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

FaultServer::~FaultServer() {
  stopping_ = true;
  server_.stop();
  thread_.join();
}

std::string FaultServer::Url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + path;
}

std::vector<RecordedRequest> FaultServer::requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

void FaultServer::ServeBlob(const httplib::Request&, httplib::Response& response,
                            const BlobPlan& plan, std::atomic<int>* served) {
  const int index = served->fetch_add(1);
  const int64_t cut_after = index < plan.cut_requests ? plan.cut_after : -1;
  // `offset` counts from the start of the blob (httplib turns Range into it); `sent` counts
  // this answer's body.
  auto sent = std::make_shared<int64_t>(0);
  auto provide = [this, plan, cut_after, sent](size_t offset, httplib::DataSink& sink) {
    const int pause_ms = (*sent == 0 ? plan.stall_ms : 0) + plan.piece_delay_ms;
    if (pause_ms > 0) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(pause_ms);
      while (std::chrono::steady_clock::now() < until && !stopping_ && sink.is_writable()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    if (stopping_) return false;
    int64_t count = std::min<int64_t>(64 << 10, plan.size - static_cast<int64_t>(offset));
    if (cut_after >= 0) count = std::min(count, cut_after - *sent);
    if (count <= 0) {
      if (cut_after >= 0 && *sent >= cut_after) return false;  // the cut: close mid-body
      sink.done();
      return true;
    }
    const std::string bytes = BlobBytes(static_cast<int64_t>(offset), count);
    if (!sink.write(bytes.data(), bytes.size())) return false;
    *sent += count;
    body_bytes_sent_ += count;
    return true;
  };
  if (plan.ignore_range || plan.chunked) {
    response.status = 200;
    response.set_chunked_content_provider("application/octet-stream", provide);
    return;
  }
  response.set_content_provider(
      static_cast<size_t>(plan.size), "application/octet-stream",
      [provide](size_t offset, size_t, httplib::DataSink& sink) { return provide(offset, sink); });
}

}  // namespace anisoscope::transfer::testing
