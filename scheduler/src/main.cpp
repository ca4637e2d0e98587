// xsched command line: parses flags into XschedOptions and calls runXsched.
#include <CLI/CLI.hpp>

#include "xalloc/scheduler/tool.h"
#include "xalloc/tool.h"

int main(int argc, char** argv) {
  xalloc::scheduler::XschedOptions o;
  std::string budget;
  CLI::App app{"xsched: decide per conversion site whether to convert (sync), convert on a side "
               "worker inside an idle window (async), remove an existing conversion, or leave "
               "it, from measured savings and predicted costs; exact for small problems.",
               "xsched"};
  app.add_option("--profile", o.profile, "profile.json (default: from the stdin stream)");
  app.add_option("--cost", o.cost, "cost.json (default: from the stdin stream)");
  app.add_option("--shape-profile", o.shape_profiles,
                 "a profile of the same model at other input shapes (xprof --input-shape); "
                 "repeatable: each region runs in a layout that holds at every shape profiled");
  app.add_option("-o,--output", o.output,
                 "write schedule.json here ('-' for stdout); without it, pass the input stream "
                 "through and append schedule.json");
  app.add_flag("--explain", o.explain, "print a table of every site and why it was decided so");
  app.add_option("--min-gain-ms", o.min_gain_ms, "smallest gain worth an edit")
      ->capture_default_str();
  app.add_option("--min-region-gain", o.min_region_gain,
                 "smallest gain of a layout region as a fraction of its time (its candidates are "
                 "timed against each other, paired)")
      ->capture_default_str();
  app.add_option("--z", o.z, "noise margin in standard errors of the measurements")
      ->capture_default_str();
  app.add_option("--min-relative-gain", o.min_relative_gain,
                 "smallest gain as a fraction of the time traded: the affected consumers' and "
                 "the conversion's")
      ->capture_default_str();
  app.add_option("--min-model-gain", o.min_model_gain,
                 "smallest gain as a fraction of the model's time (its ops summed)")
      ->capture_default_str();
  auto* mb =
      app.add_option("--memory-budget", budget, "peak activation memory limit, e.g. 512M or 2G");
  app.add_option("--window-safety", o.window_safety,
                 "fraction of an idle window async conversions may fill (0..1]")
      ->capture_default_str();
  app.add_option("--async-workers", o.async_workers, "side workers that run async conversions")
      ->capture_default_str();
  app.add_option("--form", o.form,
                 "the rewrite to plan for, as xrewrite --form: portable (aten::contiguous, "
                 "which pays for a fresh output; no async) or fast (the runtime's conversions, "
                 "async in idle windows)")
      ->capture_default_str();
  app.add_flag("--no-async", o.no_async, "decide only sync / remove / none");
  app.add_option("--async-overhead-ms", o.async_overhead_ms,
                 "critical-path cost of handing a conversion to a side worker and waiting")
      ->capture_default_str();
  app.add_option("--node-limit", o.node_limit, "branch-and-bound nodes before settling for a gap")
      ->capture_default_str();
  app.add_option("--time-limit-ms", o.time_limit_ms, "solver time limit")->capture_default_str();
  auto* tol = app.add_option("--tolerance", o.tolerance,
                             "how far a consumer's outputs may move, element by element: |new - "
                             "as-is| over |as-is|, near zero over the 10th percentile of |as-is| "
                             "(at most 1e-2; default 1e-4)");
  app.add_flag("--exact", o.exact, "bit-identical outputs only")->excludes(tol);
  app.add_flag("--foreign-cost", o.foreign_cost,
               "accept a cost model fitted on another model's profile (e.g. a sweep)");
  app.add_option("--trace", o.trace,
                 "also write a Chrome/Perfetto trace: ops, idle windows, async conversions");
  xalloc::scheduler::MemplanOptions mp;
  std::string mp_budget;
  auto* memplan = app.add_subcommand(
      "memplan", "plan offsets in one workspace for tensors with lifetimes "
                 "({\"tensors\":[{\"id\",\"size\",\"first_op\",\"last_op\"}]} or a "
                 "profile.json); prints offsets, workspace and lower bound");
  memplan->add_option("input", mp.input, "tensor list or profile.json ('-' or none: stdin)");
  memplan->add_option("-o,--output", mp.output, "write the plan here (default: stdout)");
  memplan->add_option("--alignment", mp.alignment, "offset alignment in bytes")
      ->capture_default_str();
  auto* mp_b = memplan->add_option("--budget", mp_budget,
                                   "fail (exit 2) when the plan needs more, e.g. 512M");
  memplan
      ->add_option("--search-iterations", mp.search_iterations,
                   "local-search steps after the greedy heuristics (-1: scaled to the size)")
      ->capture_default_str();
  if (auto code = xalloc::parseCommandLine(app, argc, argv))
    return *code;
  if (memplan->parsed()) {
    if (mp_b->count() > 0)
      mp.budget = mp_budget;
    return xalloc::runGuarded("xsched memplan", [&] { return xalloc::scheduler::runMemplan(mp); });
  }
  if (mb->count() > 0)
    o.memory_budget = budget;
  return xalloc::runGuarded("xsched", [&] { return xalloc::scheduler::runXsched(o); });
}
