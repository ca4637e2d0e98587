// Call stacks for libxprof_hook.so: return addresses and frame addresses from _Unwind_Backtrace,
// and the loaded objects they fall in (which of them are the program's own code).
#pragma once

#include <unwind.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace xprof_hook {

constexpr int kMaxFrames = 48;

struct Unwind {
  std::uintptr_t ips[kMaxFrames];
  std::uintptr_t cfas[kMaxFrames]; // each frame's canonical frame address: which call it is
  int n = 0;
};

/// _Unwind_Backtrace's callback: appends one frame to the Unwind `arg`.
_Unwind_Reason_Code unwindStep(_Unwind_Context* ctx, void* arg);

// A loaded object: its path and where it was mapped.
struct Module {
  std::string path;
  std::uintptr_t bias = 0;
  std::vector<std::pair<std::uintptr_t, std::uintptr_t>> ranges; // executable PT_LOAD segments
  bool user = false; // the program's own code (not libtorch, the C/C++ runtime or this hook)
};

/// System libraries and frameworks are never the call site the user wants to edit.
bool isUserObject(const std::string& path, const std::string& hook_path);

/// Every object loaded now, the program first.
std::vector<Module> loadedModules(const std::string& hook_path);

/// The thread's nesting depth in ops: ours (re-runs) and the program's. Defined in hook.cpp.
extern thread_local int tl_depth;

} // namespace xprof_hook
