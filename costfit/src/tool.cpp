// xcost: fit the conversion cost model from a profile; `xcost predict` answers layouts.
#include "xalloc/costfit/tool.h"

#include <cstdio>
#include <iostream>
#include <iterator>
#include <sstream>

#include <nlohmann/json.hpp>

#include "xalloc/costfit/cost_model.h"
#include "xalloc/costfit/stride.h"
#include "xalloc/error.h"
#include "xalloc/formats/documents.h"
#include "xalloc/formats/json_reader.h"
#include "xalloc/io.h"
#include "xalloc/tool.h"
#include "xalloc/version.h"

namespace xalloc::costfit {

namespace {

std::string reportTable(const formats::Cost& cost) {
  std::ostringstream out;
  char line[256];
  std::snprintf(line, sizeof line, "%-6s %-7s %-16s %4s %13s %11s %11s %7s %9s %9s %9s  %s\n",
                "device", "dtypes", "target", "n", "alpha ms/el", "beta ms", "gamma ms", "R^2",
                "MAPE %", "medAPE %", "maxAPE %", "fit");
  out << line;
  for (const auto& e : cost.cost_model) {
    auto pct = [&](auto get) {
      return e.holdout ? get(*e.holdout) : -1.0;
    };
    std::snprintf(line, sizeof line,
                  "%-6s %-7s %-16s %4lld %13.4e %11.3e %11.3e %7.3f %9.1f %9.1f %9.1f  %s\n",
                  e.device.c_str(), e.dtype_group.c_str(), formats::toString(e.target),
                  static_cast<long long>(e.n_samples), e.alpha, e.beta, e.gamma, e.r2,
                  pct([](auto& q) { return q.mape; }), pct([](auto& q) { return q.median_ape; }),
                  pct([](auto& q) { return q.max_ape; }), e.fit.c_str());
    out << line;
  }
  if (cost.cost_model.empty())
    out << "(no non-contiguous layouts were measured: nothing to fit)\n";
  out << "APE columns are k-fold cross-validated by layout; -1 means too few layouts to hold "
         "out.\n";
  for (const auto& m : cost.stride_model) {
    out << "\nstride-aware model, " << m.device << " (paths:";
    for (const auto& p : m.paths)
      out << " " << p.path << "=" << p.n_samples;
    out << ")\n";
    std::snprintf(line, sizeof line, "%-22s %7s %9s %9s %9s %8s\n", "accuracy", "n", "MAPE %",
                  "medAPE %", "maxAPE %", "tau");
    out << line;
    auto row = [&](const char* name, const std::optional<formats::FitQuality>& q) {
      if (!q)
        return;
      std::snprintf(line, sizeof line, "%-22s %7lld %9.1f %9.1f %9.1f %8.3f\n", name,
                    static_cast<long long>(q->samples), q->mape, q->median_ape, q->max_ape,
                    q->kendall_tau.value_or(0.0));
      out << line;
    };
    row("stride, k-fold", m.holdout);
    row("classic, same folds", m.classic_holdout);
    row("stride, --test", m.test);
    row("classic, --test", m.classic_test);
    // Where the error is: MAPE by layout size (the cache level a copy runs from).
    auto bands = [&](const char* name, const std::optional<formats::FitQuality>& q) {
      if (!q || q->by_size.empty())
        return;
      out << "  " << name << " MAPE % by size:";
      for (const auto& b : q->by_size) {
        auto size = [](std::int64_t v) {
          return v >= (1 << 20) ? std::to_string(v >> 20) + "M" : std::to_string(v >> 10) + "K";
        };
        const std::string range = !b.to_bytes ? ">=" + size(b.from_bytes)
                                  : b.from_bytes == 0
                                      ? "<" + size(*b.to_bytes)
                                      : size(b.from_bytes) + "-" + size(*b.to_bytes);
        std::snprintf(line, sizeof line, "  %s %.1f (%lld)", range.c_str(), b.mape,
                      static_cast<long long>(b.samples));
        out << line;
      }
      out << "\n";
    };
    bands("stride, k-fold", m.holdout);
    bands("stride, --test", m.test);
  }
  return out.str();
}

std::string describe(const formats::DeviceInfo& d) {
  return "'" + d.name + "' (" + d.type + ", L2 " + std::to_string(d.caches.l2_bytes >> 10) +
         " KiB, L3 " + std::to_string(d.caches.l3_bytes >> 10) + " KiB, " +
         std::to_string(d.threads) + (d.threads == 1 ? " thread)" : " threads)");
}

// Timings from another machine, or taken with another number of threads, would pull the fit
// toward times this profile's device never shows.
void requireSameMachine(const formats::DeviceInfo& ours, const formats::DeviceInfo& theirs,
                        const std::string& path) {
  const bool same = ours.type == theirs.type && ours.name == theirs.name &&
                    ours.threads == theirs.threads &&
                    ours.caches.l1d_bytes == theirs.caches.l1d_bytes &&
                    ours.caches.l2_bytes == theirs.caches.l2_bytes &&
                    ours.caches.l3_bytes == theirs.caches.l3_bytes;
  if (!same)
    throw InputError(path, "--train: measured on " + describe(theirs) + ", the profile on " +
                               describe(ours) + "; fit only on timings of the same machine");
}

int runPredict(const XcostOptions& o) {
  if (o.cost.empty())
    throw InputError("xcost", "predict needs --cost cost.json");
  if (o.predict_model != "auto" && o.predict_model != "stride" && o.predict_model != "classic")
    throw InputError("xcost",
                     "--model: '" + o.predict_model + "' is not one of auto, stride, classic");
  formats::Cost cost = formats::loadCost(o.cost);
  if (dropStaleStrideModels(cost))
    printWarning(o.cost, kStaleStrideModel);
  if (o.predict_model == "classic")
    cost.stride_model.clear();
  if (o.predict_model != "auto")
    cost.conversion_cost_table.clear(); // a named model answers every layout itself
  if (o.predict_model == "stride")
    cost.cost_model.clear();
  CostPredictor predictor(cost);
  std::string text = readFile("-");
  std::istringstream lines(text);
  std::string line, out;
  int lineno = 0;
  while (std::getline(lines, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    const std::string where = "<stdin>:" + std::to_string(lineno);
    nlohmann::json j = formats::parseJson(line, where);
    formats::Layout layout;
    auto target = formats::LayoutTarget::Contiguous;
    try {
      const formats::JsonReader r(j);
      layout = formats::readLayout(r);
      if (auto t = r.find("target"))
        target = t->toEnum<formats::LayoutTarget>();
    } catch (const formats::FormatError& e) {
      throw formats::inputErrorAt(e, where);
    }
    auto p = predictor.predict(layout, target);
    if (!p)
      throw InputError(where, "no cost model for device '" + layout.device + "', dtype group '" +
                                  formats::dtypeGroup(layout.dtype) + "' and target '" +
                                  formats::toString(target) + "' in " + o.cost);
    out += nlohmann::json{{"ms", formats::roundMs(p->ms)}, {"model", p->model}}.dump() + "\n";
  }
  writeFileAtomic("-", out);
  return kExitOk;
}

} // namespace

int runXcost(const XcostOptions& o) {
  if (o.predict)
    return runPredict(o);
  if (o.folds < 2)
    throw InputError("xcost", "--folds must be at least 2");
  checkOutputPath(o.output);
  bool from_stdin = inputIsStdin("xcost", o.input, "a profile.json");
  auto set = formats::DocumentSet::read(from_stdin ? "-" : o.input);
  formats::Profile profile =
      formats::profileFromJson(set.require(formats::DocKind::Profile), set.name());
  FitOptions fo;
  fo.folds = o.folds;
  for (const auto& path : o.train) {
    formats::Profile extra = formats::loadProfile(path);
    requireSameMachine(profile.device, extra.device, path);
    if (extra.conversion_cost_table.empty())
      throw InputError(path, "no measured layouts to fit on (make a calibration sweep with "
                             "`xprof MODEL --sweep`)");
    fo.also.insert(fo.also.end(), std::make_move_iterator(extra.conversion_cost_table.begin()),
                   std::make_move_iterator(extra.conversion_cost_table.end()));
  }
  formats::Cost cost = fitCost(profile, fo);
  cost.tool_version = kVersion;
  if (!o.test.empty())
    testCost(cost, formats::loadProfile(o.test));
  formats::emitDocument(o.output, set.documents(), formats::toJson(cost));
  if (o.report) {
    bool doc_on_stdout = o.output.empty() || o.output == "-";
    (doc_on_stdout ? std::cerr : std::cout) << reportTable(cost);
  }
  return kExitOk;
}

} // namespace xalloc::costfit
