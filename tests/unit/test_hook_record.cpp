// The hook's record (profiler/hook_record.h): what libxprof_hook.so writes, `xprof run` reads
// back, and a damaged or foreign record is one error at its JSON pointer.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "xalloc/error.h"
#include "xalloc/formats/json_reader.h"
#include "xalloc/profiler/hook_record.h"

using namespace xalloc;
using profiler::HookRecord;

namespace {
HookRecord sample() {
  HookRecord r;
  r.modules = {{"/usr/lib/libtorch_cpu.so", false}, {"/home/u/prog", true}};
  HookRecord::Stack s;
  s.op = 1;
  s.frames = {{0, 0x1234}, {1, 0xdeadbeef}, {-1, 7}};
  s.calls = 3;
  s.recorded = 2;
  s.shared_call = true;
  r.stacks = {s};
  r.threads = 2;
  r.top_level_calls = 9;
  return r;
}

std::string errorOf(const nlohmann::json& j, std::size_t ops) {
  try {
    profiler::readHookRecord(formats::JsonReader(j, "/xprof_hook"), ops);
  } catch (const FormatError& e) {
    return e.pointer() + ": " + e.what();
  }
  return "";
}
} // namespace

TEST(HookRecord, RoundTrips) {
  const HookRecord back =
      profiler::readHookRecord(formats::JsonReader(profiler::toJson(sample()), "/xprof_hook"), 2);
  ASSERT_EQ(back.modules.size(), 2u);
  EXPECT_EQ(back.modules[1].path, "/home/u/prog");
  EXPECT_TRUE(back.modules[1].user);
  ASSERT_EQ(back.stacks.size(), 1u);
  EXPECT_EQ(back.stacks[0].op, 1);
  ASSERT_EQ(back.stacks[0].frames.size(), 3u);
  EXPECT_EQ(back.stacks[0].frames[1].offset, 0xdeadbeefu);
  EXPECT_EQ(back.stacks[0].frames[2].module, -1);
  EXPECT_TRUE(back.stacks[0].shared_call);
  EXPECT_EQ(back.top_level_calls, 9);
}

TEST(HookRecord, DamagedRecordsAreOneErrorAtTheirPointer) {
  nlohmann::json j = profiler::toJson(sample());
  EXPECT_NE(errorOf(j, 1).find("/xprof_hook/stacks/0/op"), std::string::npos) << errorOf(j, 1);
  j = profiler::toJson(sample());
  j["stacks"][0]["frames"][1][0] = 5; // no sixth module
  EXPECT_NE(errorOf(j, 2).find("/xprof_hook/stacks/0/frames/1/0"), std::string::npos);
  j = profiler::toJson(sample());
  j["stacks"][0]["frames"][0] = nlohmann::json::array({0});
  EXPECT_NE(errorOf(j, 2).find("[module, offset]"), std::string::npos);
  j = profiler::toJson(sample());
  j["modules"][0]["user"] = "yes";
  EXPECT_NE(errorOf(j, 2).find("/xprof_hook/modules/0/user"), std::string::npos);
  j = profiler::toJson(sample());
  j.erase("stacks");
  EXPECT_NE(errorOf(j, 2).find("stacks"), std::string::npos);
  j = profiler::toJson(sample());
  j["stacks"][0]["frames"][0][1] = -4; // an offset is a count
  EXPECT_NE(errorOf(j, 2).find("/xprof_hook/stacks/0/frames/0/1"), std::string::npos);
}
