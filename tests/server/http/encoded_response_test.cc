#include "server/http/encoded_response.h"

#include <gtest/gtest.h>

#include <string>

namespace anisoscope::server {
namespace {

std::string SeriesLikeJson(int points) {
  std::string json = "{\"points\":[";
  for (int i = 0; i < points; ++i) {
    json += "{\"step\":\"" + std::to_string(i * 1000) + "\",\"layer\":" + std::to_string(i % 12) +
            ",\"head\":3,\"value\":0." + std::to_string(123456789 + i * 7919) + "},";
  }
  return json + "]}";
}

TEST(EncodedResponseTest, LargeBodiesAreGzippedAndInflateBackExactly) {
  const std::string body = SeriesLikeJson(2000);
  const EncodedResponse encoded = EncodeResponse(body);
  EXPECT_EQ(encoded.body, body);
  ASSERT_FALSE(encoded.gzip.empty());
  EXPECT_LT(encoded.gzip.size() * 4, body.size()) << "JSON should shrink at least fourfold";
  EXPECT_EQ(Gunzip(encoded.gzip), body);
}

TEST(EncodedResponseTest, SmallBodiesAndAnswersForClientsWithoutGzipAreLeftPlain) {
  EXPECT_TRUE(EncodeResponse("{\"runs\":[]}").gzip.empty());
  EXPECT_TRUE(EncodeResponse(SeriesLikeJson(2000), /*with_gzip=*/false).gzip.empty());
}

TEST(EncodedResponseTest, TheTagFollowsTheBodyAndOnlyTheBody) {
  const EncodedResponse a = EncodeResponse("{\"a\":1}");
  EXPECT_EQ(a.etag, EncodeResponse("{\"a\":1}").etag);
  EXPECT_NE(a.etag, EncodeResponse("{\"a\":2}").etag);
  EXPECT_EQ(a.etag.substr(0, 3), "W/\"");
  EXPECT_EQ(a.etag.size(), 3u + 16u + 1u) << a.etag;
}

TEST(EncodedResponseTest, IfNoneMatchComparesWeaklyAndAcceptsListsAndTheWildcard) {
  const std::string tag = "W/\"00112233aabbccdd\"";
  EXPECT_TRUE(IfNoneMatchHits(tag, tag));
  EXPECT_TRUE(IfNoneMatchHits("\"00112233aabbccdd\"", tag));
  EXPECT_TRUE(IfNoneMatchHits("W/\"ffff\", W/\"00112233aabbccdd\"", tag));
  EXPECT_TRUE(IfNoneMatchHits("*", tag));
  EXPECT_FALSE(IfNoneMatchHits("", tag));
  EXPECT_FALSE(IfNoneMatchHits("W/\"00112233aabbccde\"", tag));
  EXPECT_FALSE(IfNoneMatchHits(",", tag));
}

TEST(EncodedResponseTest, GzipIsAcceptedUnlessItsQualityIsZero) {
  EXPECT_TRUE(AcceptsGzip("gzip"));
  EXPECT_TRUE(AcceptsGzip("gzip, deflate, br"));
  EXPECT_TRUE(AcceptsGzip("br;q=1.0, GZIP;q=0.5"));
  EXPECT_TRUE(AcceptsGzip("*"));
  EXPECT_FALSE(AcceptsGzip(""));
  EXPECT_FALSE(AcceptsGzip("br, deflate"));
  EXPECT_FALSE(AcceptsGzip("gzip;q=0"));
  EXPECT_FALSE(AcceptsGzip("gzip;q=0.000"));
  EXPECT_FALSE(AcceptsGzip("identity"));
}

}  // namespace
}  // namespace anisoscope::server
