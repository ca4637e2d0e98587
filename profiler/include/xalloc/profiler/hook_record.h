// What libxprof_hook.so adds to the profile it writes (the "xprof_hook" member): the loaded
// objects, and for each op the call stack it was called from, as (object, offset) frames. The
// hook writes it with toJson and `xprof run` reads it back with readHookRecord, which checks
// every field as the documents' readers do: a record from another build of the hook, or a
// damaged one, is one clear error, never an unchecked lookup.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace xalloc::formats {
class JsonReader;
}

namespace xalloc::profiler {

struct HookRecord {
  struct Module {
    std::string path;
    bool user = false; // the program's own object (not libtorch, libc, ...)
  };
  struct Frame {
    std::int64_t module = -1; // index into modules, -1 when no loaded object holds it
    std::uint64_t offset = 0; // from the object's load address
  };
  struct Stack {
    std::int64_t op = 0; // the profile's op id
    std::vector<Frame> frames;
    std::int64_t calls = 0;
    std::int64_t recorded = 0;
    bool shared_call = false; // several ops came out of one call of the program's
  };
  std::vector<Module> modules;
  std::vector<Stack> stacks;
  std::int64_t threads = 0;
  std::int64_t top_level_calls = 0;
};

nlohmann::json toJson(const HookRecord& r);
/// `r` is the "xprof_hook" member; `op_count` the profile's ops, which each stack's op names.
/// Throws FormatError at the JSON pointer of a field that is missing or wrong.
HookRecord readHookRecord(const formats::JsonReader& r, std::size_t op_count);

} // namespace xalloc::profiler
