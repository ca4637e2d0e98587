// Call stacks for libxprof_hook.so (see stacks.h).
#include "stacks.h"

#include <dlfcn.h>
#include <link.h>

#include "xalloc/io.h"

namespace xprof_hook {

_Unwind_Reason_Code unwindStep(_Unwind_Context* ctx, void* arg) {
  auto* u = static_cast<Unwind*>(arg);
  if (u->n >= kMaxFrames)
    return _URC_END_OF_STACK;
  const std::uintptr_t ip = _Unwind_GetIP(ctx);
  if (ip == 0)
    return _URC_END_OF_STACK;
  u->cfas[u->n] = _Unwind_GetCFA(ctx);
  u->ips[u->n++] = ip;
  return _URC_NO_REASON;
}

bool isUserObject(const std::string& path, const std::string& hook_path) {
  if (path.empty() || path == hook_path || path.find("linux-vdso") != std::string::npos)
    return false;
  for (const char* p : {"/usr/lib/", "/lib/", "/lib64/", "/usr/lib64/"})
    if (path.rfind(p, 0) == 0)
      return false;
  for (const char* p : {"/torch/lib/", "/site-packages/", "/dist-packages/", "libxalloc_runtime"})
    if (path.find(p) != std::string::npos)
      return false;
  return true;
}

std::vector<Module> loadedModules(const std::string& hook_path) {
  std::vector<Module> mods;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        auto* out = static_cast<std::vector<Module>*>(data);
        Module m;
        m.path = info->dlpi_name ? info->dlpi_name : "";
        if (out->empty() && m.path.empty())
          m.path = xalloc::selfExePath(); // the first entry is the program itself
        m.bias = info->dlpi_addr;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const auto& ph = info->dlpi_phdr[i];
          if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
            m.ranges.emplace_back(info->dlpi_addr + ph.p_vaddr,
                                  info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
        }
        out->push_back(std::move(m));
        return 0;
      },
      &mods);
  for (auto& m : mods)
    m.user = isUserObject(m.path, hook_path);
  return mods;
}

} // namespace xprof_hook
