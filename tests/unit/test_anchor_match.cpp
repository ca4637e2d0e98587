// The anchor matchers' shared pieces (formats/anchor_match.h): the tie-break both rewriters use.
#include <vector>

#include <gtest/gtest.h>

#include "xalloc/formats/anchor_match.h"

using namespace xalloc::formats;

TEST(AnchorMatch, OrdinalFirstThenAUniqueLineElseNone) {
  const std::vector<std::int64_t> lines = {10, 12, 12, 15};
  auto line_of = [&](std::size_t i) {
    return lines[i];
  };
  EXPECT_EQ(pickAmongMatches(4, 2, 99, line_of), 2u);  // the ordinal indexes one
  EXPECT_EQ(pickAmongMatches(4, 7, 15, line_of), 3u);  // out of range: the line, unique
  EXPECT_EQ(pickAmongMatches(4, -1, 10, line_of), 0u); // no ordinal (the graph's matches)
  EXPECT_FALSE(pickAmongMatches(4, 7, 12, line_of));   // two on that line: ambiguous
  EXPECT_FALSE(pickAmongMatches(4, -1, 11, line_of));  // none on it
  EXPECT_FALSE(pickAmongMatches(0, 0, 10, line_of));   // nothing matched
}

TEST(AnchorMatch, ExpressionTextAndFunctionNames) {
  EXPECT_EQ(normaliseExpression("  a +\n  b.t( )"), "a+b.t()");
  EXPECT_EQ(normaliseExpression("return   x"), "return x");
  EXPECT_TRUE(sameFunction("forward", "Model::forward"));
  EXPECT_FALSE(sameFunction("forward", "Model::my_forward"));
  EXPECT_TRUE(sameFunction("", ""));
}
