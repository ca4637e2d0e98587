// xprof run's pieces that do not need a program: which sources are the user's, and function
// names from the symbolizer as Clang writes them.
#include <gtest/gtest.h>

#include "xalloc/profiler/run_program.h"

namespace xp = xalloc::profiler;

TEST(RunProgram, UserSourcesAreNotLibtorchOrTheSystem) {
  EXPECT_TRUE(xp::isUserSource("/home/me/model/attention.cpp"));
  EXPECT_TRUE(xp::isUserSource("samples/minigpt_cpp/minigpt.h"));
  EXPECT_FALSE(xp::isUserSource("/usr/include/ATen/core/TensorBody.h"));
  EXPECT_FALSE(xp::isUserSource("/usr/include/c++/12/bits/shared_ptr.h"));
  EXPECT_FALSE(xp::isUserSource("/opt/libtorch/include/torch/csrc/api/include/torch/nn/module.h"));
  EXPECT_FALSE(xp::isUserSource("/opt/libtorch/include/ATen/ops/matmul.h"));
  EXPECT_FALSE(
      xp::isUserSource("/venv/lib/python3.11/site-packages/torch/include/c10/util/Optional.h"));
  EXPECT_FALSE(xp::isUserSource(""));
  EXPECT_FALSE(xp::isUserSource("??"));
}

TEST(RunProgram, FunctionNamesLoseTheirParameters) {
  EXPECT_EQ(xp::functionWithoutParameters("minigpt::Attn::forward(at::Tensor const&)"),
            "minigpt::Attn::forward");
  EXPECT_EQ(xp::functionWithoutParameters("main"), "main");
  EXPECT_EQ(xp::functionWithoutParameters("ns::Box<std::pair<int, int> >::get() const"),
            "ns::Box<std::pair<int, int> >::get");
  EXPECT_EQ(xp::functionWithoutParameters("(anonymous namespace)::mix(at::Tensor const&)"),
            "(anonymous namespace)::mix");
  EXPECT_EQ(xp::functionWithoutParameters("Net::operator()(at::Tensor)"), "Net::operator()");
}

TEST(RunProgram, LambdasKeepTheirBraces) {
  EXPECT_EQ(xp::functionWithoutParameters(
                "main::{lambda(at::Tensor const&)#1}::operator()(at::Tensor const&) const"),
            "main::{lambda(at::Tensor const&)#1}::operator()");
}
