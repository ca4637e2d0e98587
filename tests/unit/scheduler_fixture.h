// The scheduler tests' profile: a transposed view read by two matmuls, and an existing
// aten::contiguous whose consumer barely needs it.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "xalloc/formats/cost.h"
#include "xalloc/formats/profile.h"
#include "xalloc/formats/schedule.h"
#include "xalloc/scheduler/decide.h"

namespace xalloc::testing {

using namespace xalloc::formats;

// ops: 0 producer (transpose), 1 consumer A, 2 consumer B, 3 aten::contiguous, 4 consumer of it.
struct Fixture {
  Profile p;
  Cost cost;

  Fixture() {
    p.settings.repeats = 15;
    for (int i = 0; i < 5; ++i) {
      Op op;
      op.id = i;
      op.kind = i == 0 ? "aten::transpose" : i == 3 ? "aten::contiguous" : "aten::mm";
      op.anchor = {"m.py", "forward", "e" + std::to_string(i), op.kind, 0, i + 1, 1};
      op.duration_ms = i == 3 ? 0.2 : 1.0;
      p.ops.push_back(op);
    }
    p.ops[3].inputs = {10};
    Record base; // the input of everything, contiguous, storage 0
    base.id = 9;
    base.origin = Origin::Input;
    base.layout = {{64, 64}, {64, 1}, 0, "float32", "cpu"};
    base.bytes = base.storage_bytes = 64 * 64 * 4;
    base.first_use = 0;
    base.last_use = 0;
    p.records.push_back(base);

    Record v; // transposed view of the input, consumed by ops 1 and 2
    v.id = 10;
    v.name = "v";
    v.producer_op = 0;
    v.layout = {{64, 64}, {1, 64}, 0, "float32", "cpu"};
    v.contiguous = false;
    v.bytes = v.storage_bytes = 64 * 64 * 4;
    v.storage_id = 0;
    v.first_use = 0;
    v.last_use = 3;
    for (int c : {1, 2})
      v.consumers.push_back(consumer(c, 1.0, 0.7));
    p.records.push_back(v);

    Record w; // output of the existing conversion (op 3) of v, consumed by op 4
    w.id = 11;
    w.name = "w";
    w.producer_op = 3;
    w.layout = {{64, 64}, {64, 1}, 0, "float32", "cpu"};
    w.bytes = w.storage_bytes = 64 * 64 * 4;
    w.storage_id = 1;
    w.first_use = 3;
    w.last_use = 4;
    ConsumerTiming c;
    c.op_id = 4;
    c.measured = true;
    c.time_as_is_ms = 1.0;
    c.time_noncontiguous_ms = 1.01; // barely slower without the conversion that costs 0.2
    w.consumers.push_back(c);
    p.records.push_back(w);

    ConversionCost cc;
    cc.layout = v.layout;
    cc.median_ms = 0.1;
    cc.samples_ms = {0.1};
    cost.conversion_cost_table.push_back(cc);
  }

  static ConsumerTiming consumer(std::int64_t op, double as_is, double contig) {
    ConsumerTiming c;
    c.op_id = op;
    c.measured = true;
    c.time_as_is_ms = as_is;
    c.time_contiguous_ms = contig;
    return c;
  }

  // An idle window (id 7) between two ops, with one spare core.
  static IdleEvent window(std::int64_t after, std::int64_t before, double ms) {
    IdleEvent w;
    w.id = 7;
    w.after_op_id = after;
    w.before_op_id = before;
    w.duration_ms = ms;
    w.spare_cores = 1;
    w.kind = "host-gap";
    return w;
  }

  Record& v() { return p.records[1]; }
  const Decision& decisionFor(const Schedule& s, std::int64_t value) {
    for (const auto& d : s.decisions)
      if (d.value_id == value)
        return d;
    throw std::runtime_error("no decision");
  }
};

/// The per-site verdict xsched's rules give value `value` of `f`'s profile.
inline scheduler::SiteVerdict verdictFor(const Fixture& f, std::int64_t value,
                                         const scheduler::SchedOptions& o = {}) {
  for (const auto& v : scheduler::siteVerdicts(f.p, f.cost, o))
    if (v.value_id == value)
      return v;
  throw std::runtime_error("no verdict for value " + std::to_string(value));
}

} // namespace xalloc::testing
