#include "client/formatters.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/json_text.h"

namespace anisoscope::client {
namespace {

std::string TrimRight(std::string line) {
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

// "L3H1" per head, "L3" per hidden state, "value" per checkpoint (layer -1).
std::string ColumnName(int32_t layer, int32_t head) {
  if (layer < 0) return "value";
  return head < 0 ? absl::StrCat("L", layer) : absl::StrCat("L", layer, "H", head);
}

}  // namespace

std::string JsonLine(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

std::string JsonList(const std::vector<std::string>& objects) {
  if (objects.empty()) return "[]\n";
  return absl::StrCat("[\n  ", absl::StrJoin(objects, ",\n  "), "\n]\n");
}

namespace {

// Columns a cell takes: its UTF-8 code points ("·" is one), not its bytes.
size_t DisplayWidth(const std::string& cell) {
  size_t width = 0;
  for (const char c : cell) width += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return width;
}

}  // namespace

std::string RenderTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows,
                        const std::vector<bool>& right_align) {
  std::vector<size_t> widths(header.size(), 0);
  for (size_t c = 0; c < header.size(); ++c) widths[c] = DisplayWidth(header[c]);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size() && c < widths.size(); ++c) {
      widths[c] = std::max(widths[c], DisplayWidth(row[c]));
    }
  }
  auto render_row = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t c = 0; c < widths.size(); ++c) {
      const std::string cell = c < cells.size() ? cells[c] : "";
      const std::string pad(widths[c] - DisplayWidth(cell), ' ');
      if (c > 0) line += "  ";
      const bool right = c < right_align.size() && right_align[c];
      line += right ? pad + cell : cell + pad;
    }
    return TrimRight(line) + "\n";
  };
  std::string text = render_row(header);
  for (const auto& row : rows) text += render_row(row);
  return text;
}

std::string FullPrecision(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return absl::StrFormat("%.17g", value);
}

std::string ByteSize(double bytes) {
  if (!std::isfinite(bytes) || bytes < 1024) {
    return absl::StrCat(static_cast<int64_t>(std::isfinite(bytes) ? bytes : 0), " B");
  }
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  size_t unit = 0;
  bytes /= 1024;
  while (bytes >= 1024 && unit + 1 < std::size(kUnits)) {
    bytes /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", bytes, kUnits[unit]);
}

std::string ShortNumber(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return absl::StrFormat("%.4g", value);
}

std::string SeriesCsv(const v1::QuerySeriesResponse& response) {
  std::string text = "step,layer,head,value\n";
  for (const v1::SeriesPoint& point : response.points()) {
    absl::StrAppend(&text, point.step(), ",", point.layer(), ",",
                    point.head() < 0 ? "" : absl::StrCat(point.head()), ",",
                    FullPrecision(point.value()), "\n");
  }
  return text;
}

std::string SeriesJson(const v1::QuerySeriesResponse& response) {
  std::vector<std::string> objects;
  objects.reserve(response.points_size());
  for (const v1::SeriesPoint& point : response.points()) {
    nlohmann::ordered_json object = {{"step", point.step()}, {"layer", point.layer()}};
    object["head"] =
        point.head() < 0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(point.head());
    object["value"] = JsonDouble(point.value());
    objects.push_back(JsonLine(object));
  }
  return JsonList(objects);
}

std::string SeriesTable(const std::string& run, const v1::QuerySeriesResponse& response,
                        size_t width) {
  std::string text = absl::StrCat("run ", run, "  probe ", response.probe_id(), "  metric ",
                                  response.metric(), "\n");
  if (response.points_size() == 0) return text + "(no points)\n";
  // Cells keyed by step, then by (layer, head).
  std::map<std::pair<int32_t, int32_t>, size_t> columns;
  std::map<int64_t, std::map<size_t, double>> cells;
  for (const v1::SeriesPoint& point : response.points()) {
    columns.emplace(std::make_pair(point.layer(), point.head()), 0);
  }
  std::vector<std::string> names;
  for (auto& [key, index] : columns) {
    index = names.size();
    names.push_back(ColumnName(key.first, key.second));
  }
  for (const v1::SeriesPoint& point : response.points()) {
    cells[point.step()][columns.at({point.layer(), point.head()})] = point.value();
  }
  // Rendered cells and column widths.
  std::vector<std::vector<std::string>> rendered;
  std::vector<size_t> widths(names.size());
  for (size_t c = 0; c < names.size(); ++c) widths[c] = names[c].size();
  size_t step_width = 4;
  for (const auto& [step, row] : cells) {
    std::vector<std::string> line(names.size(), "-");
    for (const auto& [c, value] : row) line[c] = ShortNumber(value);
    for (size_t c = 0; c < names.size(); ++c) widths[c] = std::max(widths[c], line[c].size());
    step_width = std::max(step_width, absl::StrCat(step).size());
    rendered.push_back(std::move(line));
  }
  // Greedy blocks of columns that fit the width (at least one column per block).
  for (size_t first = 0; first < names.size();) {
    size_t last = first;
    size_t used = step_width + 2 + widths[first];
    while (last + 1 < names.size() && used + 2 + widths[last + 1] <= width) {
      used += 2 + widths[++last];
    }
    std::vector<std::string> header = {"STEP"};
    header.insert(header.end(), names.begin() + first, names.begin() + last + 1);
    std::vector<std::vector<std::string>> rows;
    size_t r = 0;
    for (const auto& entry : cells) {
      std::vector<std::string> row = {absl::StrCat(entry.first)};
      row.insert(row.end(), rendered[r].begin() + first, rendered[r].begin() + last + 1);
      rows.push_back(std::move(row));
      ++r;
    }
    if (first > 0) text += "\n";
    text += RenderTable(header, rows, std::vector<bool>(header.size(), true));
    first = last + 1;
  }
  return text;
}

std::string VectorsJson(const v1::QueryVectorsResponse& response) {
  std::vector<std::string> objects;
  objects.reserve(response.points_size());
  for (const v1::VectorPoint& point : response.points()) {
    nlohmann::ordered_json values = nlohmann::ordered_json::array();
    for (double value : point.values()) values.push_back(JsonDouble(value));
    objects.push_back(JsonLine({{"step", point.step()}, {"values", std::move(values)}}));
  }
  return JsonList(objects);
}

std::string VectorsCsv(const v1::QueryVectorsResponse& response) {
  int dims = 0;
  for (const v1::VectorPoint& point : response.points()) {
    dims = std::max(dims, point.values_size());
  }
  std::string text = "step";
  for (int i = 0; i < dims; ++i) absl::StrAppend(&text, ",v", i);
  text += "\n";
  for (const v1::VectorPoint& point : response.points()) {
    absl::StrAppend(&text, point.step());
    for (double value : point.values()) absl::StrAppend(&text, ",", FullPrecision(value));
    for (int i = point.values_size(); i < dims; ++i) text += ",";
    text += "\n";
  }
  return text;
}

std::string TrajectoryCsv(const v1::QueryTrajectoryResponse& response) {
  std::string text = "step,q_x,q_y,k_x,k_y\n";
  for (const v1::TrajectoryPoint& point : response.points()) {
    absl::StrAppend(&text, point.step(), ",", FullPrecision(point.q_x()), ",",
                    FullPrecision(point.q_y()), ",", FullPrecision(point.k_x()), ",",
                    FullPrecision(point.k_y()), "\n");
  }
  return text;
}

std::string TrajectoryJson(const v1::QueryTrajectoryResponse& response) {
  std::vector<std::string> objects;
  objects.reserve(response.points_size());
  for (const v1::TrajectoryPoint& point : response.points()) {
    objects.push_back(JsonLine({{"step", point.step()},
                                {"q_x", JsonDouble(point.q_x())},
                                {"q_y", JsonDouble(point.q_y())},
                                {"k_x", JsonDouble(point.k_x())},
                                {"k_y", JsonDouble(point.k_y())}}));
  }
  return JsonList(objects);
}

std::string TrajectoryTable(const std::string& run, int32_t layer, int32_t head,
                            const v1::QueryTrajectoryResponse& response) {
  std::string text =
      absl::StrCat("run ", run, "  layer ", layer, "  head ", head, "  probe ", response.probe_id(),
                   "  explained variance ", ShortNumber(response.explained_variance()), "\n",
                   response.basis(), "\n");
  std::vector<std::vector<std::string>> rows;
  for (const v1::TrajectoryPoint& point : response.points()) {
    rows.push_back({absl::StrCat(point.step()), ShortNumber(point.q_x()), ShortNumber(point.q_y()),
                    ShortNumber(point.k_x()), ShortNumber(point.k_y())});
  }
  return text + RenderTable({"STEP", "Q_X", "Q_Y", "K_X", "K_Y"}, rows, std::vector<bool>(5, true));
}

}  // namespace anisoscope::client
