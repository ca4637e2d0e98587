// What xprof's launcher and xprof-core share (see launch.h). No libtorch here.
#include "xalloc/profiler/launch.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/version.h>

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

// Size and modification time of a file: a rebuilt xprof-core starts with no stored answers.
std::string stamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return "?";
  return std::to_string(st.st_size) + "@" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}

} // namespace

Invocation inspect(int argc, char** argv, const std::string& core) {
  Invocation inv;
  inv.db_path = TimingDb::defaultPath();
  if (argc < 2 || std::string_view(argv[1]) == "run")
    return inv;
  nlohmann::json args = nlohmann::json::array();
  nlohmann::json files = nlohmann::json::object();
  bool ok = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    // The value of an option, whether given as `--opt value` or `--opt=value`.
    auto value = [&](std::string_view opt, std::string* out) {
      if (a == opt && i + 1 < argc) {
        *out = argv[++i];
        return true;
      }
      if (a.rfind(std::string(opt) + "=", 0) == 0) {
        *out = a.substr(opt.size() + 1);
        return true;
      }
      return false;
    };
    // Where the document goes and whether a summary is printed do not change it: they are not
    // part of the key. Everything else is, as written.
    std::string v;
    const bool other_short = a.size() > 1 && a[0] == '-' && a[1] != '-' && a != "-o" && a != "-q";
    if (a == "-h" || a == "--help" || a == "--version" || a == "--no-db" || value("--trace", &v) ||
        other_short) {
      ok = false; // (short options run together, `-ofile`: left to xprof-core's parser)
    } else if (value("-o", &v) || value("--output", &v)) {
      inv.output = v;
    } else if (a == "-q" || a == "--quiet") {
      inv.quiet = true;
    } else if (value("--db", &v)) {
      inv.db_path = v;
      args.push_back("--db=" + v);
    } else {
      args.push_back(a);
      // Every other argument that names a file counts by its contents: the model, an input
      // file. (The option's name came first, as an argument of its own or before `=`.)
      const std::string path =
          a.find('=') != std::string::npos && a.rfind("--", 0) == 0 ? a.substr(a.find('=') + 1) : a;
      if (isRegularFile(path))
        files[path] = sha256File(path);
    }
  }
  if (!ok)
    return inv;
  std::error_code ec;
  const nlohmann::json k = {{"args", args},
                            {"files", files},
                            {"cwd", std::filesystem::current_path(ec).string()},
                            {"core", stamp(core)}};
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
