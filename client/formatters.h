// Rendering of query results for the CLI (tables for humans, CSV and JSON for tools) and
// the shared table/number helpers. Pure functions of their inputs (no I/O, no clock); each returns
// the complete text, ending with a newline.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "anisoscope/v1/anisoscope.pb.h"

namespace anisoscope::client {

// A plain-text table: columns padded to their widest cell (in UTF-8 code points), two spaces
// apart; cells of the columns marked in `right_align` are right-aligned. Trailing spaces are
// trimmed.
std::string RenderTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows,
                        const std::vector<bool>& right_align = {});

// `%.17g` (round-trips a double); "nan", "inf", "-inf" for non-finite values.
std::string FullPrecision(double value);
// `%.4g`, for tables.
std::string ShortNumber(double value);
// A byte count for people, in binary units: "512 B", "1.5 KiB", "3.2 MiB", "24.0 GiB".
std::string ByteSize(double bytes);
// `value` as one line of compact JSON (nlohmann-json; doubles as common/json_text.h's
// JsonDouble writes them: "NaN", "Infinity", "-Infinity" when not finite, as the HTTP API).
std::string JsonLine(const nlohmann::ordered_json& value);
// Joins JSON objects (each one line) into a list, one object per line.
std::string JsonList(const std::vector<std::string>& objects);

// QuerySeries as CSV: header `step,layer,head,value`, one line per point in response
// order; `head` is empty for per-hidden-state points (head == -1).
std::string SeriesCsv(const v1::QuerySeriesResponse& response);
// QuerySeries as a JSON list of {"step","layer","head","value"}, one object per line;
// head is null for per-hidden-state points; a value not finite is "NaN", "Infinity" or
// "-Infinity" (the HTTP API's convention).
std::string SeriesJson(const v1::QuerySeriesResponse& response);
// QuerySeries as a wide table: a caption line, then one row per step and one column per
// (layer, head) named `L0H3` (`L0` for hidden-state metrics), values to 4 significant
// digits, "-" where a step lacks a value. Columns that do not fit `width` characters
// wrap into further blocks, each repeating the step column.
std::string SeriesTable(const std::string& run, const v1::QuerySeriesResponse& response,
                        size_t width = 100);

// QueryVectors as a JSON list of {"step": S, "values": [...]}, one object per line.
std::string VectorsJson(const v1::QueryVectorsResponse& response);
// QueryVectors as CSV: header `step,v0,v1,...` (as many as the longest vector).
std::string VectorsCsv(const v1::QueryVectorsResponse& response);

// QueryTrajectory as CSV: header `step,q_x,q_y,k_x,k_y`, full precision.
std::string TrajectoryCsv(const v1::QueryTrajectoryResponse& response);
// QueryTrajectory as a JSON list of {"step","q_x","q_y","k_x","k_y"}, one object per line.
std::string TrajectoryJson(const v1::QueryTrajectoryResponse& response);
// QueryTrajectory as a table: a caption (run, head, probe, explained variance, basis), then
// one row per step, values to 4 significant digits.
std::string TrajectoryTable(const std::string& run, int32_t layer, int32_t head,
                            const v1::QueryTrajectoryResponse& response);

}  // namespace anisoscope::client
