// What xprof's launcher and xprof-core share (see launch.h). No libtorch here.
#include "xalloc/profiler/launch.h"
#include "xalloc/math_libraries.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/version.h>

#include "xalloc/error.h"
#include "xalloc/formats/documents.h"
#include "xalloc/io.h"
#include "xalloc/profiler/device_info.h"
#include "xalloc/profiler/timing_db.h"
#include "xalloc/version.h"

namespace xalloc::profiler::launch {

namespace {

// The CPU as xprof-core's device fingerprint names it, less libtorch's thread count, which the
// variables that set it stand in for.
std::string scopeDevice() {
  const formats::CacheInfo c = cpuCaches();
  std::string s = "launcher|" + cpuName() + "|cores=" + std::to_string(availableCpus()) +
                  "|caches=" + std::to_string(c.l1d_bytes) + "," + std::to_string(c.l2_bytes) +
                  "," + std::to_string(c.l3_bytes);
  for (const char* var : {"OMP_NUM_THREADS", "MKL_NUM_THREADS"})
    if (const char* v = std::getenv(var))
      s += std::string("|") + var + "=" + v;
  return s;
}

std::string scopeLibrary() {
  return std::string("torch ") + TORCH_VERSION + "|xalloc " + kVersion + "|" + mathLibraries();
}

} // namespace

std::string fileStamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return "?";
  return std::to_string(st.st_size) + "@" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}

std::string runtimeBeside(const std::string& core) {
  return (std::filesystem::path(core).parent_path() / ".." / "lib" / "libxalloc_runtime.so")
      .lexically_normal()
      .string();
}

Invocation inspect(const XprofOptions& o, const std::string& core) {
  Invocation inv;
  inv.db_path = TimingDb::defaultPath();
  const ProfileOptions& p = o.profile;
  inv.output = o.output;
  inv.quiet = o.quiet;
  if (!p.db_path.empty())
    inv.db_path = p.db_path;
  if (!p.use_db || !p.trace_path.empty())
    return inv;
  // Every setting that shapes the profile, as parsed; where the document goes and whether a
  // summary is printed do not change it. Files count by their contents: the model, the input
  // file, the op libraries.
  nlohmann::json files = nlohmann::json::object();
  std::vector<std::string> named = o.op_libraries;
  named.push_back(p.model);
  named.push_back(p.input_file);
  for (const std::string& f : named)
    if (!f.empty() && isRegularFile(f)) {
      try {
        files[f] = sha256File(f);
      } catch (const InputError&) {
        return inv; // not memoizable: xprof-core reads it again and says what is wrong
      }
    }
  const nlohmann::json settings = {{"model", p.model},
                                   {"method", p.method},
                                   {"input_shapes", o.input_shapes},
                                   {"input_dtypes", o.input_dtypes},
                                   {"input_ranges", o.input_ranges},
                                   {"input_file", p.input_file},
                                   {"load_library", o.op_libraries},
                                   {"iterations", p.iterations},
                                   {"warmup", p.warmup},
                                   {"repeats", p.repeats},
                                   {"threads", p.threads},
                                   {"seed", p.seed},
                                   {"sweep", p.sweep},
                                   {"sweep_count", p.sweep_count},
                                   {"sweep_max", o.sweep_max},
                                   {"db", p.db_path},
                                   {"consumers", p.measure_consumers},
                                   {"regions", p.measure_regions},
                                   {"freeze", p.freeze}};
  std::error_code ec;
  const nlohmann::json k = {{"settings", settings},
                            {"files", files},
                            {"cwd", std::filesystem::current_path(ec).string()},
                            {"core", fileStamp(core)},
                            {"runtime", fileStamp(runtimeBeside(core))}};
  inv.key = "launch|" + sha256Hex(k.dump());
  inv.memoizable = true;
  return inv;
}

std::optional<formats::Profile> reusedProfile(const std::string& body, const std::string& model,
                                              const std::string& input_file,
                                              const std::string& db_path) {
  formats::Profile p;
  try {
    p = formats::profileFromJson(nlohmann::json::parse(body), db_path);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  p.model.path = model;
  p.settings.input_file = input_file;
  p.settings.timing_db = db_path;
  p.settings.db_hits += p.settings.db_misses; // every measurement in it came from the database
  p.settings.db_misses = 0;
  p.settings.reused_profile = true;
  return p;
}

std::string referenceBlasNote(const formats::Profile& p) {
  const std::string blas = referenceBlas(p.device.libraries);
  if (blas.empty())
    return "";
  return "libtorch runs on the reference BLAS (" + blas +
         "); an optimized one (apt-get install libopenblas0-pthread) runs linears about ten "
         "times faster, and changes which conversions pay: profile again after installing it";
}

std::string freezeNote(const formats::Profile& p) {
  if (p.model.format != formats::ModelFormat::TorchScript || !p.model.frozen || *p.model.frozen)
    return "";
  std::size_t norms = 0, weighted = 0;
  for (const auto& op : p.ops) {
    norms += op.kind == "aten::batch_norm";
    weighted += op.kind == "aten::conv2d" || op.kind == "aten::_convolution" ||
                op.kind == "aten::conv1d" || op.kind == "aten::conv3d" ||
                op.kind == "aten::linear" || op.kind == "aten::matmul";
  }
  if (norms == 0 && weighted == 0)
    return "";
  std::string s = "the model is not frozen: freezing it (xrewrite --freeze, or torch.jit.freeze) "
                  "makes its weights constants";
  if (norms > 0)
    s += ", folds its " + std::to_string(norms) + " batch norm(s) into the convolutions";
  return s + ", and lets a weight's layout change happen once, at rewrite time, not per call";
}

std::string summaryLine(const formats::Profile& p) {
  std::size_t noncontig = 0;
  for (const auto& r : p.records)
    noncontig += !r.contiguous;
  std::string s = "xprof: " + std::to_string(p.ops.size()) + " ops, " +
                  std::to_string(p.records.size()) + " tensor values (" +
                  std::to_string(noncontig) + " non-contiguous), " +
                  std::to_string(p.conversion_cost_table.size()) + " layouts measured, " +
                  std::to_string(p.gpu_idle_events.size()) + " idle windows";
  if (!p.settings.timing_db.empty())
    s += ", " + std::to_string(p.settings.db_hits) + " measurements reused";
  return s;
}

std::optional<formats::Profile> lookup(const std::string& db_path, const std::string& key) {
  if (!isRegularFile(db_path))
    return std::nullopt; // never create a database just to look in it
  try {
    Answer a;
    {
      TimingDb launcher(db_path, scopeDevice(), scopeLibrary());
      auto body = launcher.getDocument(key);
      if (!body)
        return std::nullopt;
      auto j = nlohmann::json::parse(*body);
      a = {j.at("device"), j.at("library"), j.at("memo_key"), j.at("model"), j.at("input_file")};
    }
    TimingDb core(db_path, a.device, a.library);
    auto body = core.getDocument(a.memo_key);
    if (!body)
      return std::nullopt;
    return reusedProfile(*body, a.model, a.input_file, core.path());
  } catch (const std::exception&) {
    return std::nullopt; // a damaged entry or database: xprof-core answers
  }
}

void store(const std::string& db_path, const std::string& key, const Answer& a) {
  try {
    TimingDb db(db_path, scopeDevice(), scopeLibrary());
    db.putDocument(key, nlohmann::json{{"device", a.device},
                                       {"library", a.library},
                                       {"memo_key", a.memo_key},
                                       {"model", a.model},
                                       {"input_file", a.input_file}}
                            .dump());
    db.commit();
  } catch (const std::exception&) {
    // The profile itself is written; only the launcher's shortcut is missing.
  }
}

} // namespace xalloc::profiler::launch
