#include "common/close_names.h"

#include <gtest/gtest.h>

namespace anisoscope {
namespace {

TEST(CloseNamesTest, EditDistanceCountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(EditDistance("", ""), 0);
  EXPECT_EQ(EditDistance("qk_mean_cosin", "qk_mean_cosine"), 1);
  EXPECT_EQ(EditDistance("attn_entropi", "attn_entropy"), 1);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
  EXPECT_EQ(EditDistance("abc", ""), 3);
}

TEST(CloseNamesTest, SuggestsTheNearestNamesOnly) {
  const std::vector<std::string> known = {"qk_mean_cosine", "q_mean_norm", "k_mean_norm",
                                          "attn_entropy"};
  EXPECT_EQ(CloseNames("qk_mean_cosin", known), std::vector<std::string>{"qk_mean_cosine"});
  EXPECT_EQ(CloseNames("x_mean_norm", known),
            (std::vector<std::string>{"q_mean_norm", "k_mean_norm"}));
  EXPECT_TRUE(CloseNames("loss", known).empty());
  EXPECT_TRUE(CloseNames("", known).empty());
}

}  // namespace
}  // namespace anisoscope
