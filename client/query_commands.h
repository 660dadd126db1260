// The query commands of the CLI: runs, query, vectors, trajectory (QueryService).
// Each command blocks on one RPC and writes the formatted result to out().
#pragma once

#include <vector>

#include "client/command_context.h"

namespace anisoscope::client {

// The metric names `query --metric` accepts (validated by the server; listed in help).
inline constexpr const char* kHeadMetrics[] = {"q_mean_norm",    "k_mean_norm",  "qk_mean_dot",
                                               "qk_mean_cosine", "attn_entropy", "q_anisotropy",
                                               "k_anisotropy"};
inline constexpr const char* kHiddenMetrics[] = {"hidden_anisotropy", "hidden_mean_norm"};

// runs, query, vectors, trajectory, in the order the help lists them.
std::vector<Command> QueryCommands();

}  // namespace anisoscope::client
