// What the formats tests share (test_formats.cpp, test_formats_regions.cpp): a profile with one
// of everything, and where reading a profile or a schedule document says it is wrong.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "xalloc/error.h"
#include "xalloc/formats/documents.h"

namespace xalloc::testing {

using namespace xalloc::formats;
using nlohmann::json;

inline Profile sampleProfile() {
  Profile p;
  p.tool_version = "0.1.0";
  p.model = {"m.pt", "abc", ModelFormat::TorchScript, "forward", false};
  p.device.name = "cpu0";
  p.device.threads = 1;
  p.device.cores = 2;
  p.device.copy_bandwidth_gbps = 12.5;
  p.settings.iterations = 10;
  p.settings.repeats = 15;
  p.settings.inputs.push_back({"x", {4, 8}, "int64", 0.0, 256.0});
  for (int i = 0; i < 3; ++i) {
    Op op;
    op.id = i;
    op.kind = i == 1 ? "aten::transpose" : "aten::matmul";
    op.source = {"model.py", 10 + i, 5, "y = x.transpose(0, 1)"};
    op.anchor = {"model.py", "forward", "x.transpose(0, 1)", op.kind, 0, 10 + i, 5};
    op.duration_ms = 0.25 * (i + 1);
    if (i == 2)
      op.inputs = {2}; // the one record: made by op 1, read by op 2
    if (i == 1)
      op.outputs = {2};
    p.ops.push_back(op);
  }
  Record r;
  r.id = 2;
  r.name = "y";
  r.producer_op = 1;
  r.layout = {{8, 4}, {1, 8}, 0, "float32", "cpu"};
  r.contiguous = false;
  r.bytes = 128;
  r.storage_id = 1;
  r.storage_bytes = 128;
  r.first_use = 1;
  r.last_use = 2;
  r.view_chain = {"aten::transpose"};
  ConsumerTiming c;
  c.op_id = 2;
  c.measured = true;
  c.time_as_is_ms = 0.5;
  c.time_contiguous_ms = 0.25;
  r.consumers.push_back(c);
  c.op_id = 1; // a second reader whose outputs move a little with the other layout
  c.identical_output = false;
  c.output_error = 3.5e-7;
  r.consumers.push_back(c);
  p.records.push_back(r);
  ConversionCost cc;
  cc.layout = r.layout;
  cc.samples_ms = {0.01, 0.02, 0.03};
  cc.median_ms = 0.02;
  p.conversion_cost_table.push_back(cc);
  formats::IdleEvent window;
  window.before_op_id = 2;
  window.after_op_id = 1;
  window.duration_ms = 0.1;
  window.spare_cores = 1;
  window.kind = "cpu-spare";
  p.gpu_idle_events.push_back(window);
  return p;
}

/// A schedule of sampleProfile()'s ops with one decision, none: its value 2 made by op 1 and
/// read by op 2.
inline Schedule sampleSchedule() {
  Schedule s;
  s.model.path = "m.pt";
  s.ops = sampleProfile().ops;
  Decision d;
  d.value_id = 2;
  d.producer = 1;
  d.consumers = {2};
  d.anchor = s.ops[1].anchor;
  d.layout = sampleProfile().records[0].layout;
  s.decisions.push_back(d);
  return s;
}

// Reads `doc` as a profile and returns the InputError's where() ("name: /pointer").
inline std::string profileErrorWhere(const json& doc) {
  try {
    profileFromJson(doc, "p.json");
  } catch (const InputError& e) {
    return e.where();
  }
  return "<no error>";
}

inline std::string scheduleErrorWhere(const json& doc) {
  try {
    scheduleFromJson(doc, "s.json");
  } catch (const InputError& e) {
    return e.where();
  }
  return "<no error>";
}

} // namespace xalloc::testing
