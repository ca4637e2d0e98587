// libxprof_hook.so: preloaded into an unmodified libtorch program by `xprof run`. A global
// RecordFunction callback sees every op the program calls; the outermost one of each call (not
// the ops libtorch runs inside it, nor autograd's backward ops) is recorded with its call stack,
// its input and output tensors (identified by TensorImpl, held weakly so an address is never
// reused while we remember it), its wall and CPU time, and, for inputs that are not contiguous
// or come out of a conversion, the consumer re-run through the dispatcher with both layouts.
// Calls are grouped by call site (op name + return addresses): each site is one op of the
// profile, each of its outputs one value, and only its first XPROF_ITERATIONS calls are
// measured. At exit the hook writes a profile document whose ops carry raw stacks instead of
// source locations; the xprof driver (run_program.cpp) symbolizes them.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <c10/util/intrusive_ptr.h>
#include <nlohmann/json.hpp>

#include "xalloc/formats/profile.h"
#include "xalloc/io.h"
#include "xalloc/profiler/conversion_cost.h"
#include "xalloc/profiler/hook_record.h"
#include "xalloc/profiler/measure.h"
#include "xalloc/threads.h"

#include "downstream.h"
#include "export.h"
#include "replay.h"
#include "stacks.h"
#include "values.h"

namespace xprof_hook {
thread_local int tl_depth = 0;
} // namespace xprof_hook

namespace {

using namespace xprof_hook;
namespace fmt = xalloc::formats;
namespace prof = xalloc::profiler;
using Clock = std::chrono::steady_clock;

int envInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

// ---- the recorder ---------------------------------------------------------------------------

struct Ctx : at::ObserverContext {
  Clock::time_point t0;
  double cpu0 = 0;
  Site* site = nullptr;
  std::uintptr_t user_cfa = 0; // the innermost user frame's CFA: which call of the program
  bool count_only = false;     // a call past the measured ones: only its values are followed
  /// Re-runs whose outputs had another layout: shadowed once the op has made its own.
  struct Follow {
    std::vector<c10::IValue> other;
    bool to_contiguous;
    std::int64_t value;
    xprof_hook::Path path;
  };
  std::vector<Follow> follow;
};

thread_local Clock::time_point tl_last_end;
thread_local bool tl_last_recorded = false;
thread_local std::uintptr_t tl_last_user_ip = 0;
thread_local Site* tl_last_site = nullptr;
thread_local std::uintptr_t tl_last_cfa = 0;

class Recorder {
public:
  Recorder()
      : cap_(std::max(1, envInt("XPROF_ITERATIONS", 3))),
        warmup_(std::max(0, envInt("XPROF_WARMUP", 2))),
        repeats_(std::max(3, envInt("XPROF_REPEATS", 15))),
        consumers_(envInt("XPROF_CONSUMERS", 1) != 0), out_(std::getenv("XPROF_HOOK_OUT")) {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&envInt), &info) && info.dli_fname)
      hook_path_ = info.dli_fname;
  }

  bool enabled() const { return !out_.empty(); }

  std::unique_ptr<at::ObserverContext> start(const at::RecordFunction& fn) {
    const int depth = tl_depth++;
    // Autograd's engine runs backward ops under records of its own, on the caller's thread too.
    if (depth > 0 || fn.scope() != at::RecordScope::FUNCTION || stopped_.load() ||
        std::strncmp(fn.name(), "autograd::", 10) == 0)
      return nullptr;
    // The program's own time since its previous op, before any of ours (unwinding, re-runs).
    const auto entry = Clock::now();
    const Overhead ours(*this, entry);
    Unwind u;
    _Unwind_Backtrace(unwindStep, &u);
    struct Pending {
      std::size_t arg;
      at::Tensor tensor, other;
      bool to_contiguous;
      std::int64_t value;
      fmt::ConsumerTiming timing;
      Path path;           // (op, input) from the record's consumer down to this one
      bool follow = false; // read through a shadow: goes under its parent (Downstream)
    };
    std::vector<Pending> pending;
    auto ctx = std::make_unique<Ctx>();
    const auto inputs = fn.inputs();
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++total_calls_;
      Site& site = siteOf(fn.name(), u);
      ++site.calls;
      if (!site.user) {
        tl_last_recorded = false;
        return nullptr;
      }
      if (site.recorded >= cap_) {
        // Not measured, but still counted: which values it reads, and its outputs followed.
        tl_last_recorded = false;
        for (std::size_t i = 0; i < inputs.size(); ++i)
          forEachTensor(inputs[i], [&](const at::Tensor& t) {
            values_.countRead(t, site.id, static_cast<std::int64_t>(i));
          });
        ctx->site = &site;
        ctx->count_only = true;
        return ctx;
      }
      if (site.id < 0) {
        site.id = static_cast<std::int64_t>(order_.size());
        order_.push_back(&site);
      }
      ctx->site = &site;
      for (std::size_t i = 0; i < site.frames.size(); ++i)
        if (isUser(site.frames[i])) {
          ctx->user_cfa = u.cfas[i];
          break;
        }
      std::vector<std::int64_t> in_ids;
      for (std::size_t i = 0; i < inputs.size(); ++i) {
        forEachTensor(inputs[i], [&](const at::Tensor& t) {
          const std::int64_t v = values_.argument(t, site.id, static_cast<std::int64_t>(i));
          in_ids.push_back(v);
          Value& val = values_[v];
          val.rec.last_use = std::max(val.rec.last_use, site.id);
          // The output of a consumer whose layout another layout of its input changes: re-run
          // with the output that layout gives, under that consumer.
          if (const Shadow* sh = downstream_.find(t)) {
            Path path = sh->path;
            path.emplace_back(site.id, static_cast<std::int64_t>(i));
            if (downstream_.firstVisit(sh->value, path)) {
              Pending f{i, t, sh->other, sh->to_contiguous, sh->value, {}, std::move(path), true};
              f.timing.op_id = site.id;
              f.timing.input_index = static_cast<std::int64_t>(i);
              pending.push_back(std::move(f));
            }
          }
          if (!val.consumers_seen.insert({site.id, static_cast<std::int64_t>(i)}).second)
            return;
          Pending p{i, t, {}, true, v, {}, {{site.id, static_cast<std::int64_t>(i)}}, false};
          p.timing.op_id = site.id;
          p.timing.input_index = static_cast<std::int64_t>(i);
          if (!t.is_contiguous()) {
            pending.push_back(std::move(p));
            return;
          }
          if (at::Tensor src = values_.sourceOf(t); src.defined()) {
            p.other = src;
            p.to_contiguous = false;
            pending.push_back(std::move(p));
            return;
          }
          val.rec.consumers.push_back(p.timing); // contiguous: nothing to compare
        });
      }
      for (std::size_t i : writtenArgs(fn))
        if (i < inputs.size())
          forEachTensor(inputs[i], [&](const at::Tensor& t) { values_.markWritten(t); });
      if (site.recorded == 0)
        site.inputs = in_ids;
    }
    // Measured outside the lock: an op may run others on worker threads, which call in here.
    for (auto& p : pending) {
      if (p.to_contiguous && !p.follow) {
        guarded([&] { p.other = p.tensor.contiguous(); });
      }
      std::vector<c10::IValue> swapped;
      xprof_hook::replayConsumer(fn, inputs, p.arg, p.tensor, p.other, p.to_contiguous,
                                 {consumers_, warmup_, repeats_}, p.timing,
                                 p.path.size() <= Downstream::kDepth ? &swapped : nullptr);
      if (!swapped.empty()) // its outputs change layout: followed once the op has made them
        ctx->follow.push_back({std::move(swapped), p.to_contiguous, p.value, p.path});
    }
    if (!pending.empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& p : pending) {
        if (!p.follow) {
          values_[p.value].rec.consumers.push_back(p.timing);
        } else {
          Path parent(p.path.begin(), p.path.end() - 1);
          downstream_.add(p.value, std::move(parent), std::move(p.timing));
        }
      }
    }
    // Time between the program's previous op and this one: only when that op was recorded too
    // (its end is known); our own work in between is not counted.
    if (tl_last_recorded) {
      std::lock_guard<std::mutex> lock(mu_);
      ctx->site->gap_ms.push_back(
          std::chrono::duration<double, std::milli>(entry - tl_last_end).count());
    }
    ctx->cpu0 = prof::processCpuMs();
    ctx->t0 = Clock::now();
    return ctx;
  }

  void end(const at::RecordFunction& fn, at::ObserverContext* base) {
    --tl_depth;
    if (!base)
      return;
    const Overhead ours(*this, Clock::now());
    auto* ctx = static_cast<Ctx*>(base);
    if (ctx->count_only) {
      std::lock_guard<std::mutex> lock(mu_);
      // Not measured, but its outputs are the site's values again when they look the same.
      const Site& site = *ctx->site;
      std::size_t index = 0;
      for (const auto& out : fn.outputs())
        forEachTensor(out, [&](const at::Tensor& t) {
          if (index < site.outputs.size())
            values_.follow(t, site.outputs[index]);
          ++index;
        });
      return;
    }
    const auto t1 = Clock::now();
    const double cpu1 = prof::processCpuMs();
    std::vector<at::Tensor> to_measure;
    {
      std::lock_guard<std::mutex> lock(mu_);
      Site& site = *ctx->site;
      site.ms.push_back(std::chrono::duration<double, std::milli>(t1 - ctx->t0).count());
      site.cpu_ms.push_back(cpu1 - ctx->cpu0);
      const bool first = site.recorded == 0;
      ++site.recorded;
      const auto& outputs = fn.outputs();
      std::int64_t index = 0;
      for (const auto& out : outputs)
        forEachTensor(out, [&](const at::Tensor& t) {
          const std::int64_t v = values_.output(t, site.id, index++);
          if (first)
            site.outputs.push_back(v);
          // Each layout is timed once, the first time a value has it.
          if (!values_[v].rec.contiguous && t.numel() > 0 &&
              converted_keys_.insert(prof::layoutOf(t).key()).second)
            to_measure.push_back(t);
        });
      if (!ctx->follow.empty()) {
        std::vector<at::Tensor> real;
        for (const auto& out : outputs)
          forEachTensor(out, [&](const at::Tensor& t) { real.push_back(t); });
        for (auto& f : ctx->follow)
          downstream_.shadow(real, f.other, f.to_contiguous, f.value, f.path);
      }
      if (site.kind == "aten::contiguous" && !fn.inputs().empty() && fn.inputs()[0].isTensor() &&
          !outputs.empty() && outputs[0].isTensor()) {
        const at::Tensor& src = fn.inputs()[0].toTensor();
        const at::Tensor& dst = outputs[0].toTensor();
        if (!src.is_contiguous()) // kept to re-run consumers without the conversion
          values_.keepSource(dst, src);
      }
      // Two ops from one user call (a libtorch module's forward running several ops): only the
      // last one's result is the expression's value, so neither can be matched to the source.
      const std::uintptr_t ip = userIp(site);
      if (tl_last_recorded && tl_last_site && tl_last_site != &site && ip != 0 &&
          tl_last_user_ip == ip && tl_last_cfa == ctx->user_cfa)
        site.shared_call = tl_last_site->shared_call = true;
      tl_last_site = &site;
      tl_last_user_ip = ip;
      tl_last_cfa = ctx->user_cfa;
    }
    for (const at::Tensor& t : to_measure) {
      fmt::ConversionCost c;
      if (guarded(
              [&] { c = prof::measureConversionCost(t, "model", warmup_, repeats_, nullptr); })) {
        std::lock_guard<std::mutex> lock(mu_);
        conversions_.push_back(std::move(c));
      }
    }
    tl_last_recorded = true;
    tl_last_end = Clock::now();
  }

  void write() {
    stopped_ = true;
    std::lock_guard<std::mutex> lock(mu_);
    fmt::Profile p;
    xalloc::profiler::HookRecord record;
    summarizeSites(order_, frames_, cores_, p, record);
    p.records = values_.finish();
    downstream_.attach(p.records);
    p.conversion_cost_table = conversions_;
    // The program's whole run as it takes without us: its age less our own work.
    p.settings.program_run_ms = std::max(0.0, prof::processAgeMs() - overhead_ms_);
    p.settings.iterations = cap_;
    p.settings.warmup = warmup_;
    p.settings.repeats = repeats_;
    p.device.threads = at::get_num_threads();
    p.device.blas_threads = xalloc::blasThreads(); // the program's own setting, as it ran
    for (const auto& m : modules_)
      record.modules.push_back({m.path, m.user});
    record.threads = at::get_num_threads();
    record.top_level_calls = total_calls_;
    nlohmann::json doc = fmt::toJson(p);
    doc["xprof_hook"] = xalloc::profiler::toJson(record);
    try {
      xalloc::writeFileAtomic(out_, doc.dump() + "\n");
    } catch (const std::exception&) {
      // Nothing written: the driver reports that the program left no profile.
    }
  }

  void setCores(int cores) { cores_ = std::max(1, cores); }

private:
  bool isUser(int frame) const {
    const Frame& fr = frames_[static_cast<std::size_t>(frame)];
    return fr.module >= 0 && modules_[static_cast<std::size_t>(fr.module)].user;
  }

  std::uintptr_t userIp(const Site& s) const {
    for (int f : s.frames)
      if (isUser(f)) {
        const Frame& fr = frames_[static_cast<std::size_t>(f)];
        return modules_[static_cast<std::size_t>(fr.module)].bias + fr.offset;
      }
    return 0;
  }

  int frameOf(std::uintptr_t ip) {
    auto it = frame_index_.find(ip);
    if (it != frame_index_.end())
      return it->second;
    Frame f;
    for (int pass = 0; pass < 2 && f.module < 0; ++pass) {
      if (pass == 1)
        modules_ = loadedModules(hook_path_); // a library loaded since the last look
      for (std::size_t m = 0; m < modules_.size() && f.module < 0; ++m)
        for (const auto& [lo, hi] : modules_[m].ranges)
          if (ip >= lo && ip < hi) {
            f.module = static_cast<int>(m);
            f.offset = ip - modules_[m].bias;
            break;
          }
    }
    const int id = static_cast<int>(frames_.size());
    frames_.push_back(f);
    frame_index_.emplace(ip, id);
    return id;
  }

  Site& siteOf(const char* name, const Unwind& u) {
    std::string key = name;
    key.push_back('\0');
    key.append(reinterpret_cast<const char*>(u.ips), sizeof(std::uintptr_t) * u.n);
    auto it = sites_.find(key);
    if (it != sites_.end())
      return *it->second;
    auto site = std::make_unique<Site>();
    site->kind = name;
    if (site->kind.find("::") == std::string::npos)
      site->kind = "aten::" + site->kind;
    for (int i = 0; i < u.n; ++i) {
      // A return address points after the call; the call itself is one byte before.
      const int f = frameOf(u.ips[i] - (i > 0 ? 1 : 0));
      site->frames.push_back(f);
      site->user = site->user || isUser(f);
    }
    return *sites_.emplace(std::move(key), std::move(site)).first->second;
  }

  const int cap_, warmup_, repeats_;
  const bool consumers_;
  const std::string out_;
  std::string hook_path_;
  int cores_ = 1;
  std::mutex mu_;
  std::atomic<bool> stopped_{false};
  std::vector<Module> modules_;
  std::vector<Frame> frames_;
  std::unordered_map<std::uintptr_t, int> frame_index_;
  std::unordered_map<std::string, std::unique_ptr<Site>> sites_;
  std::vector<Site*> order_;
  ValueTable values_;
  Downstream downstream_;
  std::set<std::string> converted_keys_;
  std::vector<fmt::ConversionCost> conversions_;
  std::int64_t total_calls_ = 0;
  double overhead_ms_ = 0; // our own work inside the program's ops: unwinding, re-runs, timings

  // Counts the time from `since` to the end of its scope as ours, not the program's.
  class Overhead {
  public:
    Overhead(Recorder& r, Clock::time_point since) : r_(r), since_(since) {}
    ~Overhead() {
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - since_).count();
      std::lock_guard<std::mutex> lock(r_.mu_);
      r_.overhead_ms_ += ms;
    }
    Overhead(const Overhead&) = delete;
    Overhead& operator=(const Overhead&) = delete;

  private:
    Recorder& r_;
    Clock::time_point since_;
  };
};

Recorder* g_recorder = nullptr;
at::CallbackHandle g_handle = 0;

std::unique_ptr<at::ObserverContext> onStart(const at::RecordFunction& fn) {
  return g_recorder->start(fn);
}

void onEnd(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  g_recorder->end(fn, ctx);
}

pid_t g_pid = 0;

void finish() {
  if (!g_recorder || ::getpid() != g_pid)
    return; // a forked child exits: the profile is its parent's
  at::removeCallback(g_handle);
  g_recorder->write();
}

__attribute__((constructor)) void install() {
  auto* r = new Recorder(); // never deleted: threads may still call in while the program exits
  if (!r->enabled())
    return;
  r->setCores(static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)));
  g_recorder = r;
  g_pid = ::getpid();
  // Programs this one starts are not profiled (nor write over our profile).
  ::unsetenv("XPROF_HOOK_OUT");
  if (const char* preload = std::getenv("LD_PRELOAD")) {
    std::string rest, item;
    for (const char* p = preload;; ++p) {
      if (*p == ':' || *p == ' ' || *p == '\0') {
        if (!item.empty() && item.find("libxprof_hook") == std::string::npos)
          rest += (rest.empty() ? "" : ":") + item;
        item.clear();
        if (!*p)
          break;
      } else {
        item += *p;
      }
    }
    ::setenv("LD_PRELOAD", rest.c_str(), 1);
  }
  g_handle = at::addGlobalCallback(
      at::RecordFunctionCallback(onStart, onEnd)
          .needsInputs(true)
          .needsOutputs(true)
          .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
  std::atexit(finish);
}

} // namespace
