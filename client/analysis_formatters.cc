#include "client/analysis_formatters.h"

#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/formatters.h"
#include "common/json_text.h"

namespace anisoscope::client {
namespace {

// The cell of column `column`: an integer, or `number(value)`.
template <typename Format>
std::string Cell(const NumberTable& table, size_t column, double value, Format number) {
  return column < table.integer_columns ? absl::StrCat(static_cast<int64_t>(value)) : number(value);
}

}  // namespace

std::string NumberTableCsv(const NumberTable& table) {
  std::string text = absl::StrCat(absl::StrJoin(table.columns, ","), "\n");
  for (const std::vector<double>& row : table.rows) {
    for (size_t c = 0; c < row.size(); ++c) {
      absl::StrAppend(&text, c == 0 ? "" : ",", Cell(table, c, row[c], FullPrecision));
    }
    text += "\n";
  }
  return text;
}

std::string NumberTableJson(const NumberTable& table) {
  std::vector<std::string> objects;
  objects.reserve(table.rows.size());
  for (const std::vector<double>& row : table.rows) {
    nlohmann::ordered_json object = nlohmann::ordered_json::object();
    for (size_t c = 0; c < row.size(); ++c) {
      object[table.columns[c]] = c < table.integer_columns
                                     ? nlohmann::ordered_json(static_cast<int64_t>(row[c]))
                                     : JsonDouble(row[c]);
    }
    objects.push_back(JsonLine(object));
  }
  return JsonList(objects);
}

std::string NumberTableText(const NumberTable& table) {
  std::vector<std::string> header;
  for (const std::string& column : table.columns) header.push_back(absl::AsciiStrToUpper(column));
  std::vector<std::vector<std::string>> rows;
  for (const std::vector<double>& row : table.rows) {
    std::vector<std::string>& cells = rows.emplace_back();
    for (size_t c = 0; c < row.size(); ++c) cells.push_back(Cell(table, c, row[c], ShortNumber));
  }
  return RenderTable(header, rows, std::vector<bool>(header.size(), true));
}

NumberTable TokenCloudTable(const v1::QueryTokenCloudResponse& response) {
  NumberTable table{{"step", "token", "q_x", "q_y", "k_x", "k_y"}, 2, {}};
  for (const v1::TokenCloudStep& cloud : response.steps()) {
    for (int j = 0; j < cloud.q_x_size(); ++j) {
      table.rows.push_back({static_cast<double>(cloud.step()), static_cast<double>(j), cloud.q_x(j),
                            cloud.q_y(j), cloud.k_x(j), cloud.k_y(j)});
    }
  }
  return table;
}

NumberTable CorrelationTable(const v1::QueryCorrelationResponse& response) {
  NumberTable table{
      {"step", "hidden_states", "spearman_rho", "spearman_p", "pearson_r", "pearson_p"}, 2, {}};
  for (const v1::CorrelationPoint& point : response.points()) {
    table.rows.push_back({static_cast<double>(point.step()),
                          static_cast<double>(point.hidden_states()), point.spearman_rho(),
                          point.spearman_p(), point.pearson_r(), point.pearson_p()});
  }
  return table;
}

}  // namespace anisoscope::client
