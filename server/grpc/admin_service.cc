#include "server/grpc/admin_service.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/grpc/call_credentials.h"

namespace anisoscope::server {
namespace {

namespace pb = ::anisoscope::v1;

constexpr int kDefaultAuditLimit = 100;

absl::StatusOr<pb::ListAuditResponse> ListAuditCore(storage::MetricsStore& store,
                                                    const pb::ListAuditRequest& request) {
  if (request.limit() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("limit must be >= 0, got ", request.limit()));
  }
  ASSIGN_OR_RETURN(const std::vector<storage::AuditEntry> entries,
                   store.ListAudit(request.limit() == 0 ? kDefaultAuditLimit : request.limit()));
  pb::ListAuditResponse response;
  for (const storage::AuditEntry& entry : entries) {
    pb::AuditEntry* out = response.add_entries();
    out->set_id(entry.id);
    out->set_at(entry.at);
    out->set_actor(entry.actor);
    out->set_namespace_(entry.ns);
    out->set_action(entry.action);
    out->set_target(entry.target);
    out->set_detail(entry.detail);
  }
  return response;
}

}  // namespace

grpc::ServerUnaryReactor* AdminServiceImpl::ListAudit(grpc::CallbackServerContext* context,
                                                      const pb::ListAuditRequest* request,
                                                      pb::ListAuditResponse* response) {
  return RespondAuthorized(*access_, context, Action::kAdmin, response,
                           [&](const Principal&) { return ListAuditCore(*store_, *request); });
}

}  // namespace anisoscope::server
