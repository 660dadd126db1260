// Rendering of the derived analyses (token clouds, correlation tests) for the CLI: each
// response becomes a NumberTable, printed as a table for humans or CSV / JSON for tools.
// Pure functions of their inputs; each returns the complete text, ending with a newline.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "anisoscope/v1/anisoscope.pb.h"

namespace anisoscope::client {

// Rows of numbers under named columns; the first `integer_columns` hold integers (steps,
// token indices).
struct NumberTable {
  std::vector<std::string> columns;
  size_t integer_columns = 1;
  std::vector<std::vector<double>> rows;
};

// Header `columns` joined by commas, then the rows at full precision.
std::string NumberTableCsv(const NumberTable& table);
// A JSON list of {column: value}, one object per line; null for non-finite values.
std::string NumberTableJson(const NumberTable& table);
// A table: upper-case column names, values to 4 significant digits.
std::string NumberTableText(const NumberTable& table);

// step, token, q_x, q_y, k_x, k_y: one row per step and sampled token.
NumberTable TokenCloudTable(const v1::QueryTokenCloudResponse& response);
// step, hidden_states, spearman_rho, spearman_p, pearson_r, pearson_p.
NumberTable CorrelationTable(const v1::QueryCorrelationResponse& response);

}  // namespace anisoscope::client
