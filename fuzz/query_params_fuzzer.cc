// The HTTP API's query parameters: a raw query string split and percent-decoded as the
// server does it (httplib's parse_query_text), then set on every request message of the
// API (server/http/query_params.h), whatever the names, repetitions and values.
#include <httplib.h>

#include "anisoscope/v1/anisoscope.pb.h"
#include "fuzz/amplification_guard.h"
#include "fuzz/fuzz_input.h"
#include "server/http/query_params.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const anisoscope::fuzz::AmplificationGuard guard("query_params_fuzzer", size);
  namespace pb = ::anisoscope::v1;
  const std::string query(anisoscope::fuzz::AsText(data, size));
  httplib::Params params;
  httplib::detail::parse_query_text(query, params);
  pb::ListRunsRequest runs;
  pb::QuerySeriesRequest series;
  pb::QueryVectorsRequest vectors;
  pb::QueryTrajectoryRequest trajectory;
  pb::QueryTokenCloudRequest token_cloud;
  pb::QueryCorrelationRequest correlation;
  pb::QueryIsotropicBaselineRequest baseline;
  pb::ListJobsRequest jobs;
  pb::GetJobRequest job;
  for (google::protobuf::Message* request : std::initializer_list<google::protobuf::Message*>{
           &runs, &series, &vectors, &trajectory, &token_cloud, &correlation, &baseline, &jobs,
           &job}) {
    (void)anisoscope::server::MessageFromParams(params, request);
  }
  return 0;
}
