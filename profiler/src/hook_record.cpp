// The hook's record <-> JSON (hook_record.h).
#include "xalloc/profiler/hook_record.h"

#include <nlohmann/json.hpp>

#include "xalloc/formats/json_reader.h"

namespace xalloc::profiler {

nlohmann::json toJson(const HookRecord& r) {
  nlohmann::json mods = nlohmann::json::array();
  for (const auto& m : r.modules)
    mods.push_back({{"path", m.path}, {"user", m.user}});
  nlohmann::json stacks = nlohmann::json::array();
  for (const auto& s : r.stacks) {
    nlohmann::json frames = nlohmann::json::array();
    for (const auto& f : s.frames)
      frames.push_back({f.module, f.offset});
    stacks.push_back({{"op", s.op},
                      {"frames", std::move(frames)},
                      {"calls", s.calls},
                      {"recorded", s.recorded},
                      {"shared_call", s.shared_call}});
  }
  return {{"modules", std::move(mods)},
          {"stacks", std::move(stacks)},
          {"threads", r.threads},
          {"top_level_calls", r.top_level_calls}};
}

HookRecord readHookRecord(const formats::JsonReader& r, std::size_t op_count) {
  HookRecord out;
  r.at("modules").forEach([&](const formats::JsonReader& m) {
    out.modules.push_back({m.getString("path"), m.getBool("user")});
  });
  r.at("stacks").forEach([&](const formats::JsonReader& s) {
    HookRecord::Stack st;
    const formats::JsonReader op = s.at("op");
    st.op = op.toCount();
    if (static_cast<std::size_t>(st.op) >= op_count)
      op.fail("names op " + std::to_string(st.op) + " of a profile of " + std::to_string(op_count) +
              " ops");
    s.at("frames").forEach([&](const formats::JsonReader& f) {
      if (f.size() != 2)
        f.fail("a frame is [module, offset]");
      HookRecord::Frame fr;
      fr.module = f.at(std::size_t{0}).toInt();
      const std::int64_t offset = f.at(std::size_t{1}).toCount();
      fr.offset = static_cast<std::uint64_t>(offset);
      if (fr.module < -1 || fr.module >= static_cast<std::int64_t>(out.modules.size()))
        f.at(std::size_t{0})
            .fail("names no loaded object of the " + std::to_string(out.modules.size()) +
                  " recorded");
      st.frames.push_back(fr);
    });
    st.calls = s.getInt("calls", 0);
    st.recorded = s.getInt("recorded", 0);
    st.shared_call = s.getBool("shared_call", false);
    out.stacks.push_back(std::move(st));
  });
  out.threads = r.getInt("threads", 0);
  out.top_level_calls = r.getInt("top_level_calls", 0);
  return out;
}

} // namespace xalloc::profiler
