#include "common/close_names.h"

#include <algorithm>
#include <numeric>

namespace anisoscope {

int EditDistance(std::string_view a, std::string_view b) {
  std::vector<int> row(b.size() + 1);
  std::iota(row.begin(), row.end(), 0);
  for (size_t i = 1; i <= a.size(); ++i) {
    int diagonal = row[0];
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const int above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::vector<std::string> CloseNames(std::string_view given, const std::vector<std::string>& known) {
  const int most = std::clamp(static_cast<int>(given.size()) / 3, 1, 3);
  int best = most + 1;
  std::vector<std::string> nearest;
  for (const std::string& name : known) {
    const int distance = EditDistance(given, name);
    if (distance < best) {
      best = distance;
      nearest.clear();
    }
    if (distance == best) nearest.push_back(name);
  }
  return nearest;
}

}  // namespace anisoscope
