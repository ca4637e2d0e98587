// The fast form's entries the packed convolutions convert themselves
// (tspass::packedConvsConvertEntries): on a sample, the model's input handed to its first packed
// convolution as it is, the outputs bit for bit the same.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/ir.h>

#include "xalloc/runtime/packed.h"
#include "xalloc/tspass/region_layouts.h"
#include "xalloc/tspass/regions.h"
#include "xalloc/tspass/rewrite.h"
#include "xalloc/tspass/value_compare.h"

#include "frozen_model.h"

using namespace xalloc;
using namespace xalloc::tspass;
using xalloc::testing::countNodes;
using xalloc::testing::runGraph;

TEST(PackedEntries, TheModelsInputGoesToItsFirstPackedConvolutionAsItIs) {
  if (!runtime::hasPackedConv())
    GTEST_SKIP() << "runtime built without oneDNN";
  xalloc::testing::Frozen f = xalloc::testing::packedSample("densenet");
  ASSERT_FALSE(::testing::Test::HasFailure()) << "every convolution region packed";
  const c10::IValue before = runGraph(f.graph, f.inputs);
  const std::size_t conversions = countNodes(*f.graph, "aten::contiguous");
  torch::jit::Value* input = f.graph->inputs().at(1);
  auto readByPackedConv = [&] {
    for (const auto& u : input->uses())
      if (u.user->kind().toQualString() == std::string("xalloc::conv2d_packed"))
        return true;
    return false;
  };
  ASSERT_FALSE(readByPackedConv()) << "the region's entry converts the input first";

  const std::int64_t dropped = packedConvsConvertEntries(*f.graph);
  EXPECT_GE(dropped, 1);
  EXPECT_EQ(countNodes(*f.graph, "aten::contiguous"), conversions - dropped);
  EXPECT_TRUE(readByPackedConv());
  const c10::IValue after = runGraph(f.graph, f.inputs);
  EXPECT_TRUE(bitwiseEqual({before}, {after}));
  EXPECT_EQ(packedConvsConvertEntries(*f.graph), 0) << "nothing more";
}
