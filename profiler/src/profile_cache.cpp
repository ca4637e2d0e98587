// The profiler and its timing database: the scope measurements are kept under, a finished
// profile reused whole, the launcher told where it is, the copy bandwidth, timelines.
#include "profiler_impl.h"

#include "xalloc/tspass/region_layouts.h"

namespace xalloc::profiler::detail {

void Profiler::openDb() {
  if (!o_.use_db)
    return;
  const auto& d = p_.device;
  std::string device = d.type + "|" + d.name + "|cores=" + std::to_string(d.cores) +
                       "|threads=" + std::to_string(d.threads) +
                       "|blas_threads=" + std::to_string(d.blas_threads) +
                       "|caches=" + std::to_string(d.caches.l1d_bytes) + "," +
                       std::to_string(d.caches.l2_bytes) + "," + std::to_string(d.caches.l3_bytes);
  std::string library = std::string("torch ") + TORCH_VERSION + "|xalloc " + kVersion + "|method " +
                        std::to_string(kMeasureMethod) + "|" + d.libraries + "|runtime " +
                        launch::fileStamp(launch::runtimeBeside(selfDir() + "/xprof-core"));
  db_ = std::make_unique<TimingDb>(o_.db_path.empty() ? TimingDb::defaultPath() : o_.db_path,
                                   device, library);
  db_device_ = device;
  db_library_ = library;
}

std::string Profiler::profileKey() const {
  if (!db_)
    return {};
  nlohmann::json k = {
      {"model", p_.model.sha256},
      {"method", o_.method},
      {"inputs", nlohmann::json::array()},
      {"input_file", input_file_sha256_},
      {"iterations", o_.iterations},
      {"warmup", o_.warmup},
      {"repeats", o_.repeats},
      {"seed", o_.seed},
      {"consumers", o_.measure_consumers},
      {"regions", o_.measure_regions},
      {"freeze", o_.freeze},
      {"sweep", o_.sweep ? nlohmann::json{o_.sweep_count, o_.sweep_max_bytes} : nlohmann::json()},
      {"min_window_ms", o_.min_window_ms},
      {"analysis", kProfileAnalysis}};
  // The region layouts this process can run are the candidates a profile measures: a layout
  // added (or a runtime built without oneDNN) is another profile.
  k["layouts"] = nlohmann::json::array();
  for (const tspass::RegionLayout* l : tspass::regionLayouts())
    if (l->available())
      k["layouts"].push_back(l->traits().name);
  for (const auto& in : p_.settings.inputs)
    k["inputs"].push_back(formats::toJson(in));
  return "profile|" + sha256Hex(k.dump());
}

std::optional<formats::Profile> Profiler::cachedProfile(const std::string& key) {
  if (!db_ || !o_.trace_path.empty())
    return std::nullopt;
  // A damaged or older entry reads as none: profile again (and overwrite it).
  auto body = db_->getDocument(key);
  return body ? launch::reusedProfile(*body, o_.model, o_.input_file, db_->path()) : std::nullopt;
}

void Profiler::answerLauncher(const std::string& memo_key) {
  const char* key = std::getenv(launch::kKeyEnv);
  if (key && *key)
    launch::store(db_->path(), key, {db_device_, db_library_, memo_key, o_.model, o_.input_file});
}

double Profiler::cachedBandwidth() {
  if (db_)
    if (auto hit = db_->get("copy-bandwidth"))
      return hit->aux;
  const double gbps = std::round(measureCopyBandwidthGbps() * 1000) / 1000;
  if (db_)
    db_->put("copy-bandwidth", {{}, gbps});
  return gbps;
}

bool Profiler::loadTimeline(const std::string& key, std::size_t n, GraphRunner::Trace& line) {
  if (!db_)
    return false;
  auto hit = db_->getAll({key + "|start", key + "|duration"});
  if (!hit || (*hit)[0].stats.samples_ms.size() != n || (*hit)[1].stats.samples_ms.size() != n)
    return false;
  line.op_start_ms = std::move((*hit)[0].stats.samples_ms);
  line.op_ms = std::move((*hit)[1].stats.samples_ms);
  line.op_cpu_ms.assign(n, 0.0);
  return true;
}

void Profiler::storeTimeline(const std::string& key, const GraphRunner::Trace& line) {
  StoredTiming starts, durations;
  starts.stats.samples_ms = line.op_start_ms;
  durations.stats.samples_ms = line.op_ms;
  db_->put(key + "|start", starts);
  db_->put(key + "|duration", durations);
}

} // namespace xalloc::profiler::detail
