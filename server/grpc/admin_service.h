// AdminService adapter: the audit log, for admin tokens (Action::kAdmin). Callback API;
// handlers do short store reads. `store` and `access` are not owned and outlive the
// grpc::Server.
#pragma once

#include <grpcpp/grpcpp.h>

#include "anisoscope/v1/anisoscope.grpc.pb.h"
#include "server/auth/access_control.h"
#include "storage/metrics_store.h"

namespace anisoscope::server {

class AdminServiceImpl final : public ::anisoscope::v1::AdminService::CallbackService {
 public:
  AdminServiceImpl(storage::MetricsStore* store, AccessControl* access)
      : store_(store), access_(access) {}

  grpc::ServerUnaryReactor* ListAudit(grpc::CallbackServerContext* context,
                                      const ::anisoscope::v1::ListAuditRequest* request,
                                      ::anisoscope::v1::ListAuditResponse* response) override;

 private:
  storage::MetricsStore* const store_;
  AccessControl* const access_;
};

}  // namespace anisoscope::server
