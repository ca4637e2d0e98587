// profileModel: op timings, value records with layouts and lifetimes, idle windows, conversion
// costs, consumer re-runs with both layouts, and the optional sweep; measurements already in
// the timing database are reused. (The work is split over the files profiler_impl.h names.)
#include "profiler_impl.h"

namespace xalloc::profiler {

namespace detail {

formats::Profile Profiler::run() {
  if (o_.iterations < 1 || o_.repeats < 1 || o_.warmup < 0)
    throw InputError("xprof", "--iterations and --repeats must be at least 1");
  if (o_.sweep && o_.sweep_count < 1)
    throw InputError("xprof", "--sweep-count must be at least 1");
  // libtorch's and the BLAS's threads together (OpenBLAS would otherwise start one per core
  // beside libtorch's pool); the profile records both.
  tspass::setMathThreads(o_.threads);
  progress_.phase("loading", 1);
  tspass::LoadedModel model = tspass::loadModel(o_.model);
  p_.tool_version = kVersion;
  p_.model.path = o_.model;
  p_.model.sha256 = model.sha256;
  p_.model.format = formats::ModelFormat::TorchScript;
  p_.model.method = o_.method;
  // --freeze: profiled as xrewrite --freeze will write it (a model in training mode is an error).
  if (o_.freeze)
    tspass::freezeModel(model, o_.method);
  p_.model.frozen = tspass::isFrozen(model.module);
  // Numbered as xrewrite numbers it, on the form every saved copy of the model has.
  tspass::canonicalize(model, o_.method);
  prepareInputs(model);
  // Frozen, specialized to the inputs' ranks as xrewrite specializes it before numbering.
  if (p_.model.frozen) {
    tspass::specializeToInputRanks(model, o_.method, inputRanks());
    inputs_[0] = model.module._ivalue();
  }
  if (o_.freeze)
    frozen_ = model; // the regions are found on it: not loaded and frozen a second time
  auto method = model.module.find_method(o_.method);
  p_.settings.iterations = o_.iterations;
  p_.settings.warmup = o_.warmup;
  p_.settings.repeats = o_.repeats;
  p_.settings.seed = o_.seed;
  p_.settings.sweep = o_.sweep;

  p_.device = describeCpu(/*measure_bandwidth=*/false);
  openDb();
  const std::string memo_key = profileKey();
  if (auto cached = cachedProfile(memo_key)) {
    answerLauncher(memo_key);
    return std::move(*cached);
  }
  p_.device.copy_bandwidth_gbps = cachedBandwidth();
  // First, with glibc's malloc as a user's process has it and the heap holding no more than
  // the model and its inputs; then every measurement in malloc's steady state.
  timeWholeRun(model.module);
  steadyStateMalloc();

  // Profile an inlined copy: the module's own graph stays untouched.
  graph_ = method->graph()->copy();
  torch::jit::Inline(*graph_);
  exposed_ = tspass::exposeLinearWeights(*graph_);
  index_ = std::make_unique<tspass::GraphIndex>(*graph_);
  tspass::MutationInfo mutation(graph_, &model.module);
  runner_ = std::make_unique<GraphRunner>(*index_);

  GraphRunner::Trace capture; // the first run: it also fails early on a broken model

  const auto capture_start = std::chrono::steady_clock::now();
  runModel({/*keep_values=*/true, false, false}, &capture);
  capture_ms_ = msSince(capture_start);
  timeOps(capture);
  buildRecords(capture, mutation);
  measureConversions(capture);
  if (o_.measure_consumers) {
    measureConsumers(capture);
    measureProducerFusion(capture);
  }
  if (o_.measure_regions) {
    // Regions are a measurement of their own: one that cannot be made (a model freezing cannot
    // take, a region that fails on its own) leaves the rest of the profile standing.
    try {
      measureRegions();
    } catch (const std::exception& e) {
      const std::string what = e.what();
      p_.regions.clear();
      p_.regions_note = "layout regions not measured: " + what.substr(0, what.find('\n'));
    }
  }
  if (o_.sweep)
    measureSweep();
  p_.gpu_idle_events =
      findCpuIdleWindows(timeline_, p_.ops, static_cast<int>(p_.device.cores), o_.min_window_ms);
  progress_.finish();
  if (db_) {
    p_.settings.timing_db = db_->path();
    p_.settings.db_hits = db_->hits();
    p_.settings.db_misses = db_->misses();
    // A profile the budget cut short is not kept whole: the next run reuses its timings from
    // the database and times what this one could not.
    if (!budget_spent_)
      db_->putDocument(memo_key, formats::toJson(p_).dump());
    db_->commit();
    answerLauncher(memo_key);
  }
  if (!o_.trace_path.empty())
    writeChromeTrace(o_.trace_path, p_, timeline_);
  return std::move(p_);
}

void Profiler::prepareInputs(tspass::LoadedModel& model) {
  std::vector<c10::IValue> tensors;
  if (!o_.input_file.empty()) {
    const std::string bytes = readFile(o_.input_file);
    input_file_sha256_ = sha256Hex(bytes);
    tensors = tspass::parseInputFile(bytes, o_.input_file);
    p_.settings.input_file = o_.input_file;
    for (std::size_t i = 0; i < tensors.size(); ++i)
      if (tensors[i].isTensor()) {
        const at::Tensor& t = tensors[i].toTensor();
        p_.settings.inputs.push_back({"input" + std::to_string(i), t.sizes().vec(),
                                      compat::dtypeName(t.scalar_type()), std::nullopt,
                                      std::nullopt});
      }
  } else {
    p_.settings.inputs =
        o_.inputs.empty() ? tspass::specFromExtraFiles(model.extra_files, o_.model) : o_.inputs;
    tensors = tspass::makeInputs(p_.settings.inputs, static_cast<std::uint64_t>(o_.seed));
  }
  inputs_ = tspass::methodInputs(model.module, o_.method, std::move(tensors), o_.model);
}

} // namespace detail

formats::Profile profileModel(const ProfileOptions& options) {
  return detail::Profiler(options).run();
}

} // namespace xalloc::profiler
