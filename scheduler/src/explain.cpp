// explainSchedule: the --explain table, one line per site, and the summary.
#include <algorithm>
#include <cstdio>
#include <sstream>
#include <vector>

#include "xalloc/scheduler/decide.h"

namespace xalloc::scheduler {

using formats::Action;

namespace {
std::string fmt(const char* format, double a, double b) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, a, b);
  return buf;
}

// Pads to `width`; a longer text keeps its start and ends in "...".
std::string padded(std::string s, std::size_t width) {
  if (s.size() > width)
    s = s.substr(0, width - 3) + "...";
  s.resize(width, ' ');
  return s;
}

// Pads to `width`; a longer expression keeps its start and, when it fits in half the width, its
// last call: "x.view(B, H...).contiguous()" and "x.view(B, H...).permute(0, 2, 1)" stay apart.
std::string paddedExpression(const std::string& s, std::size_t width) {
  if (s.size() <= width)
    return padded(s, width);
  std::size_t last = std::string::npos;
  int depth = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '(' || c == '[')
      ++depth;
    else if ((c == ')' || c == ']') && depth > 0)
      --depth;
    else if (c == '.' && depth == 0 && i > 0)
      last = i;
  }
  if (last == std::string::npos || s.size() - last > width / 2)
    return padded(s, width);
  if (s[last - 1] == ')')
    --last; // "...).permute(0, 2, 1)": the call's parenthesis stays with it
  const std::string tail = s.substr(last);
  return s.substr(0, width - 3 - tail.size()) + "..." + tail;
}

// Pads to `width`; a longer text keeps its end (a site's file:line keeps its line number).
std::string paddedTail(std::string s, std::size_t width) {
  if (s.size() > width)
    s = "..." + s.substr(s.size() - (width - 3));
  s.resize(width, ' ');
  return s;
}

// A column as wide as its widest cell, between its header's width and `most`.
std::size_t columnWidth(const std::vector<std::string>& cells, std::size_t least,
                        std::size_t most) {
  std::size_t w = least;
  for (const auto& c : cells)
    w = std::max(w, c.size());
  return std::min(w, most);
}
} // namespace

std::string explainSchedule(const formats::Schedule& s) {
  std::vector<std::string> sites, exprs, outputs, sizes;
  for (const auto& d : s.decisions) {
    // A site without an anchor (an op libtorch runs for a program's call) shows the line of the
    // call that ran it; one without an expression (a part of a `chunk`) shows the op.
    std::string where = d.anchor.file, expr = d.anchor.expr, output;
    std::int64_t line = d.anchor.line;
    if (const formats::Op* op = s.findOp(d.producer)) {
      if (where.empty()) {
        where = op->source.file;
        line = op->source.line;
      }
      if (expr.empty())
        expr = op->kind;
      // One output of several (`x.split(...)`, `unbind`): which one, kept when the text is cut.
      if (op->outputs.size() > 1)
        output = " [" + std::to_string(d.output_index) + "]";
      // A model's module path tells apart sites that share their source (every nn.Linear's
      // is linear.py:114); a program's scope is its function, already in the anchor.
      if (s.model.format == formats::ModelFormat::TorchScript && !op->scope.empty())
        expr.insert(0, op->scope + ": ");
    }
    // A region decision names the region: its ops are listed in the schedule.
    if (d.region) {
      expr = d.region->convolutions == 0
                 ? "linear " + std::to_string(d.region->id) + ": " + d.anchor.expr
                 : "region " + std::to_string(d.region->id) + " (" +
                       std::to_string(d.region->nodes.size()) + " ops)";
      output.clear();
    }
    if (auto slash = where.rfind('/'); slash != std::string::npos)
      where = where.substr(slash + 1);
    sites.push_back(where + ":" + std::to_string(line));
    exprs.push_back(expr + output);
    outputs.push_back(output);
    sizes.push_back(d.layout.sizesText());
  }
  const std::size_t site_w = columnWidth(sites, 22, 40);
  const std::size_t expr_w = columnWidth(exprs, 34, 56);
  const std::size_t sizes_w = columnWidth(sizes, 16, 24);

  std::ostringstream out;
  out << padded("site", site_w) << " " << padded("expression", expr_w) << " "
      << padded("sizes", sizes_w) << " " << padded("action", 7) << "  cost ms  save ms  why\n";
  for (std::size_t i = 0; i < s.decisions.size(); ++i) {
    const auto& d = s.decisions[i];
    // A cut expression keeps its output index: "x.split(...)... [1]".
    const std::string& o = outputs[i];
    std::string expr = exprs[i];
    if (!o.empty() && expr.size() > expr_w) {
      expr.resize(expr.size() - o.size());
      expr = paddedExpression(expr, expr_w - o.size());
      expr += o;
    }
    out << paddedTail(sites[i], site_w) << " " << paddedExpression(expr, expr_w) << " "
        << padded(sizes[i], sizes_w) << " " << padded(formats::actionName(d.action), 7) << " "
        << fmt("%8.4f %8.4f", d.predicted_cost_ms, d.predicted_saving_ms) << "  "
        << (d.rule.empty() ? "" : "[" + d.rule + "] ") << d.reason << "\n";
  }
  // What kept the sites left alone, by kind (the decisions' blockers, in the enum's order):
  // whether more gains wait on the noise, on the tolerance or on what xprof could measure.
  std::string blocked;
  for (const auto& [kind, name] : formats::EnumNames<formats::Blocker>::table) {
    const auto n = std::count_if(s.decisions.begin(), s.decisions.end(),
                                 [kind = kind](const auto& d) { return d.blocker == kind; });
    if (kind != formats::Blocker::None && n > 0)
      blocked += (blocked.empty() ? "" : ", ") + std::string(name) + " " + std::to_string(n);
  }
  if (!blocked.empty())
    out << "left alone: " << blocked << "\n";
  const auto& m = s.summary;
  // A program's prediction is of its whole profiled run (xprof's own work taken out), or, from
  // a profile without that time, of the calls the hook timed at the program's own sites only
  // (backward passes, optimizer steps and what else runs inside libtorch not among them); a
  // model's, of its method called alone when xprof timed it so: the words say which.
  const bool program = s.model.format == formats::ModelFormat::LibtorchProgram;
  out << "predicted "
      << (program && m.whole_run ? std::string("for the whole profiled run (less xprof's own "
                                               "work) ")
          : program              ? "for the " + std::to_string(s.ops.size()) +
                          " call sites timed in the profiled run (not the whole run) "
          : m.whole_run ? std::string("for the whole run (the model called alone) ")
                        : std::string())
      << fmt("%.4f -> %.4f ms", m.predicted_time_before_ms, m.predicted_time_after_ms)
      << ", peak activations " << m.peak_bytes_before << " -> " << m.peak_bytes_after << " bytes; "
      << s.count(Action::Sync) << " sync, " << s.count(Action::Async) << " async, "
      << s.count(Action::Remove) << " remove, " << s.count(Action::None)
      << " none; solver: " << m.solver << " ("
      << (m.optimal ? std::string("optimal") : "gap " + std::to_string(m.gap)) << ")\n";
  return out.str();
}

} // namespace xalloc::scheduler
