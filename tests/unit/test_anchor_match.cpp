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

// The debug information names an instantiation ("mix<float>"); Clang's walk of the source names
// the template's pattern ("mix"): the same function, where the rewrite edits.
TEST(AnchorMatch, TemplateArgumentsAreNotCompared) {
  EXPECT_EQ(withoutTemplateArguments("mix<float>"), "mix");
  EXPECT_EQ(withoutTemplateArguments("ns::Net<std::vector<int>, 2>::run<at::Tensor>"),
            "ns::Net::run");
  EXPECT_EQ(withoutTemplateArguments("operator<<"), "operator<<");
  EXPECT_EQ(withoutTemplateArguments("Vec::operator< <int>"), "Vec::operator<");
  EXPECT_EQ(withoutTemplateArguments("Vec::operator-><float>"), "Vec::operator->");
  EXPECT_EQ(withoutTemplateArguments("Vec::operator()"), "Vec::operator()");
  EXPECT_EQ(withoutTemplateArguments("operator_helper<int>"), "operator_helper");
  EXPECT_EQ(withoutTemplateArguments("broken<int"), "broken<int");
  EXPECT_EQ(functionNameOnly("at::Tensor (anonymous namespace)::mix<double>"),
            "(anonymous namespace)::mix");
  EXPECT_EQ(functionNameOnly("std::vector<int, std::allocator<int> > ns::make<int>"), "ns::make");
  EXPECT_EQ(functionNameOnly("Vec::operator int"), "Vec::operator int");
  EXPECT_EQ(functionNameOnly("void* Pool::operator new"), "Pool::operator new");
  EXPECT_TRUE(sameFunction("mix<float>", "mix"));
  EXPECT_TRUE(
      sameFunction("at::Tensor (anonymous namespace)::mix<double>", "(anonymous namespace)::mix"));
  EXPECT_TRUE(sameFunction("Mixer<double>::forward<2>", "ns::Mixer::forward"));
  EXPECT_TRUE(sameFunction("forward", "Mixer<double>::forward"));
  EXPECT_FALSE(sameFunction("mix<float>", "remix"));
  EXPECT_FALSE(sameFunction("Vec::operator<", "Vec::operator<<"));
}
