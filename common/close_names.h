// "Did you mean": the names of a list closest to a misspelt one, by edit distance, for
// errors that refuse an unknown name (a metric, ...). Thread-safe; pure.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace anisoscope {

// The Levenshtein distance (insertions, deletions, substitutions) between `a` and `b`.
int EditDistance(std::string_view a, std::string_view b);

// The names of `known` nearest to `given`, in `known`'s order: those at the smallest distance
// when it is at most a third of `given`'s length (at least 1, at most 3); none otherwise.
std::vector<std::string> CloseNames(std::string_view given, const std::vector<std::string>& known);

}  // namespace anisoscope
