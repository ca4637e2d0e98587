// The suite every allocator stack and backend passes: allocate, write, respect the capacity, free
// and reuse, zero-byte requests. Instantiated in test_allocator.cpp (stages, the simulated device,
// the ledger) and test_graceful_cpu.cpp (libtorch's CPU backend).
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "xalloc/runtime/allocator.h"

namespace xalloc::runtime::testing_suite {

struct StackCase {
  const char* name;
  std::function<std::shared_ptr<Upstream>(std::size_t capacity)> make;
  bool throws; // the top throws OutOfMemory instead of returning nullptr
};

inline void PrintTo(const StackCase& c, std::ostream* os) {
  *os << c.name;
}

class EveryStack : public testing::TestWithParam<StackCase> {};

inline void* tryAlloc(Upstream& u, std::size_t n, bool throws) {
  if (!throws)
    return u.allocate(n);
  try {
    return u.allocate(n);
  } catch (const OutOfMemory&) {
    return nullptr;
  }
}

TEST_P(EveryStack, AllocatesWritesFreesAndRespectsTheCapacity) {
  const auto& c = GetParam();
  auto top = c.make(1 << 20);
  std::vector<void*> blocks;
  for (int i = 0; i < 4; ++i) {
    void* p = tryAlloc(*top, 256 << 10, c.throws);
    ASSERT_NE(p, nullptr) << c.name;
    std::memset(p, i, 256 << 10);
    blocks.push_back(p);
  }
  EXPECT_EQ(tryAlloc(*top, 1, c.throws), nullptr) << c.name << ": the capacity is used up";
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(static_cast<unsigned char*>(blocks[static_cast<std::size_t>(i)])[1000], i);
  top->deallocate(blocks.back(), 256 << 10);
  blocks.pop_back();
  void* again = tryAlloc(*top, 256 << 10, c.throws);
  EXPECT_NE(again, nullptr) << c.name << ": a freed block is available again";
  blocks.push_back(again);
  for (void* p : blocks)
    top->deallocate(p, 256 << 10);
  // Zero bytes is a valid request.
  void* z = tryAlloc(*top, 0, c.throws);
  EXPECT_NE(z, nullptr);
  top->deallocate(z, 0);
}

inline std::string caseName(const ::testing::TestParamInfo<StackCase>& i) {
  std::string n = i.param.name;
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch)))
      ch = '_';
  return n;
}

} // namespace xalloc::runtime::testing_suite
