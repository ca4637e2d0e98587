// formats: documents round-trip, and every kind of bad input is rejected with the JSON Pointer
// (or line:col) of the problem. Regions in profiles and schedules: test_formats_regions.cpp.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "xalloc/error.h"
#include "xalloc/formats/documents.h"
#include "xalloc/formats/json_reader.h"
#include "xalloc/io.h"

#include "formats_fixture.h"

using namespace xalloc;
using namespace xalloc::formats;
using nlohmann::json;
using namespace xalloc::testing;

TEST(Formats, ProfileRoundTripIsExact) {
  Profile p = sampleProfile();
  json j = toJson(p);
  Profile q = profileFromJson(j, "p.json");
  EXPECT_EQ(toJson(q), j);
  EXPECT_EQ(q.records.at(0).consumers.at(0).time_contiguous_ms, 0.25);
  EXPECT_FALSE(j["records"][0].contains("runs_by_bytes")); // outside loops: not written
  p.records[0].in_loop = true;
  p.records[0].runs_by_bytes = 1.328125;
  j = toJson(p);
  EXPECT_EQ(profileFromJson(j, "p.json").records.at(0).runs_by_bytes, 1.328125);
  EXPECT_EQ(toJson(profileFromJson(j, "p.json")), j);
  // A program's consumer says how often it read the value; a model's does not.
  EXPECT_FALSE(j["records"][0]["consumers"][0].contains("reads"));
  p.records[0].consumers[0].reads = 12;
  j = toJson(p);
  EXPECT_EQ(profileFromJson(j, "p.json").records.at(0).consumers.at(0).reads, 12);
  EXPECT_EQ(toJson(profileFromJson(j, "p.json")), j);
  EXPECT_EQ(q.settings.inputs.at(0).high, 256.0);
  EXPECT_EQ(j["schema"], "xalloc.profile");
  EXPECT_EQ(j["schema_version"], 2);
}

// Consumers followed downstream (what runs after a consumer whose output changes layout) round
// trip, name ops that exist, and nest no deeper than xprof writes them.
TEST(Formats, DownstreamConsumersAreCheckedLikeConsumers) {
  Profile p = sampleProfile();
  ConsumerTiming d = p.records[0].consumers[0];
  p.records[0].consumers[0].same_output_layout = false;
  p.records[0].consumers[0].downstream.push_back(d);
  json j = toJson(p);
  EXPECT_EQ(toJson(profileFromJson(j, "p.json")), j);
  j["records"][0]["consumers"][0]["downstream"][0]["op_id"] = 99;
  EXPECT_EQ(profileErrorWhere(j), "p.json: /records/0/consumers/0/downstream/0/op_id");
  ConsumerTiming chain = d; // twelve levels, each followed below the one before
  for (int i = 0; i < 12; ++i) {
    ConsumerTiming up = d;
    up.same_output_layout = false;
    up.downstream.push_back(chain);
    chain = up;
  }
  p.records[0].consumers[0] = chain;
  const json deep = toJson(p);
  EXPECT_NE(profileErrorWhere(deep).find("/downstream"), std::string::npos);
}

// An op's inputs and outputs name records of the profile (which no JSON Schema can say).
TEST(Formats, OpsNameRecordsThatExist) {
  json j = toJson(sampleProfile());
  j["ops"][0]["inputs"] = json::array({12345});
  EXPECT_EQ(profileErrorWhere(j), "p.json: /ops/0/inputs/0");
  j = toJson(sampleProfile());
  j["ops"][1]["outputs"] = json::array({-7});
  EXPECT_NE(profileErrorWhere(j), "<no error>");
}

// Deep nesting, numbers beyond a double and non-finite numbers to write: clear errors.
TEST(Formats, DeepNumbersAndNonFiniteValuesAreErrorsWithAPlace) {
  const std::string deep = std::string(300, '[') + std::string(300, ']');
  try {
    parseJson(deep, "d.json");
    ADD_FAILURE() << "deep nesting accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "d.json:1:257");
  }
  EXPECT_NO_THROW(parseJson(std::string(200, '[') + std::string(200, ']'), "d.json"));
  try {
    parseJsonStream("{\"a\": 1}\n{\"b\":\n 1e999}\n", "s.jsonl");
    ADD_FAILURE() << "1e999 accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "s.jsonl:3:2");
    EXPECT_NE(e.message().find("1e999"), std::string::npos) << e.message();
  }
  json doc = toJson(sampleProfile());
  doc["ops"][0]["duration_ms"] = std::numeric_limits<double>::infinity();
  try {
    dumpDocument(doc, false);
    ADD_FAILURE() << "inf written";
  } catch (const InputError& e) {
    EXPECT_NE(e.message().find("/ops/0/duration_ms"), std::string::npos) << e.message();
  }
}

TEST(Formats, OutputIsDeterministicWithSortedKeys) {
  std::string a = dumpDocument(toJson(sampleProfile()), true);
  std::string b = dumpDocument(toJson(sampleProfile()), true);
  EXPECT_EQ(a, b);
  EXPECT_LT(a.find("\"conversion_cost_table\""), a.find("\"device\""));
  EXPECT_LT(a.find("\"device\""), a.find("\"gpu_idle_events\""));
  EXPECT_EQ(std::count(a.begin(), a.end(), '\n'), 1); // one line in stream form
}

TEST(Formats, CostAndScheduleRoundTrip) {
  Cost c;
  c.model.path = "m.pt";
  c.conversion_cost_table = sampleProfile().conversion_cost_table;
  c.conversion_cost_table[0].allocation_ms = 0.125;
  c.conversion_cost_table[0].allocation_spread_ms = 0.5;
  CostModelEntry e;
  e.dtype_group = "4-byte";
  e.alpha = 1e-7;
  e.beta = 2e-4;
  e.gamma = 3e-3;
  e.n_samples = 3;
  e.holdout =
      FitQuality{3, 3, 5.0, 4.0, 9.0, 0.8, {{0, 65536, 2, 4.5}, {65536, std::nullopt, 1, 6.0}}};
  c.cost_model.push_back(e);
  json jc = toJson(c);
  EXPECT_EQ(toJson(costFromJson(jc, "c.json")), jc);
  EXPECT_EQ(costFromJson(jc, "c.json").conversion_cost_table[0].allocation_ms, 0.125);

  Schedule s = sampleSchedule();
  Decision& d = s.decisions.front();
  d.action = Action::Sync;
  d.predicted_cost_ms = 0.02;
  d.predicted_saving_ms = 0.25;
  s.summary.solver = "per-site threshold";
  s.summary.optimal = true;
  json js = toJson(s);
  Schedule back = scheduleFromJson(js, "s.json");
  EXPECT_EQ(toJson(back), js);
  EXPECT_EQ(back.count(Action::Sync), 1);
  EXPECT_EQ(js["summary"]["counts"]["sync"], 1);
  EXPECT_FALSE(js.contains("inputs"));               // no profile inputs: nothing written
  EXPECT_TRUE(js["summary"]["form"].is_null());      // not planned by xsched: no form
  EXPECT_FALSE(js["summary"].contains("tolerance")); // older schedules: planned exact
  s.summary.tolerance = 1e-4;
  s.summary.measured_error = 2.5e-7;
  js = toJson(s);
  EXPECT_EQ(scheduleFromJson(js, "s.json").summary.tolerance, 1e-4);
  EXPECT_EQ(scheduleFromJson(js, "s.json").summary.measured_error, 2.5e-7);
  // The fusions a rewrite ran: absent until one ran, then each with its count, in order.
  EXPECT_FALSE(js["summary"].contains("fusions"));
  s.summary.fusions = {{"channel_shuffle", 0}, {"squeeze_excite", 9}};
  js = toJson(s);
  EXPECT_EQ(scheduleFromJson(js, "s.json").summary.fusions, s.summary.fusions);
  EXPECT_EQ(toJson(scheduleFromJson(js, "s.json")), js);
  js["summary"]["fusions"][1]["count"] = -1;
  EXPECT_EQ(scheduleErrorWhere(js), "s.json: /summary/fusions/1/count");
  s.summary.fusions.clear();
  js = toJson(s);
  js["summary"]["tolerance"] = -1;
  EXPECT_THROW(scheduleFromJson(js, "s.json"), std::exception);
  s.summary.tolerance.reset();
  s.summary.measured_error.reset();
  s.summary.form = RewriteForm::Fast;
  js = toJson(s);
  EXPECT_EQ(js["summary"]["form"], "fast");
  EXPECT_EQ(scheduleFromJson(js, "s.json").summary.form, RewriteForm::Fast);
  js["summary"]["form"] = "quick";
  try {
    scheduleFromJson(js, "s.json");
    FAIL() << "an unknown form was accepted";
  } catch (const InputError& err) {
    EXPECT_EQ(err.where(), "s.json: /summary/form");
  }
  s.summary.form.reset();

  // The profile's inputs ride along for xrewrite's verification.
  s.inputs = {{"ids", {4, 16}, "int64", 0.0, 100.0}};
  js = toJson(s);
  back = scheduleFromJson(js, "s.json");
  EXPECT_EQ(toJson(back), js);
  ASSERT_EQ(back.inputs.size(), 1u);
  EXPECT_EQ(back.inputs[0].shape, (std::vector<std::int64_t>{4, 16}));
  EXPECT_EQ(back.inputs[0].high, 100.0);
  js["inputs"][0]["shape"][1] = -1;
  try {
    scheduleFromJson(js, "s.json");
    FAIL() << "a negative input size was accepted";
  } catch (const InputError& err) {
    EXPECT_EQ(err.where(), "s.json: /inputs/0/shape/1");
  }
}

// A decision's rule, blocker and named values are data a tool can read back: numbers stay
// numbers (to nine significant digits), words stay words, an unbounded number is written as a
// word, and an unknown blocker is an error at its place.
TEST(Formats, ADecisionsBlockerAndNamedValuesRoundTrip) {
  Schedule s = sampleSchedule();
  Decision& d = s.decisions.front();
  d.rule = "noise-margin";
  d.blocker = Blocker::BelowMargin;
  d.values = {{"saving_ms", 0.009545218000000005},
              {"op", std::string("aten::view")},
              {"output_error", std::numeric_limits<double>::infinity()}};
  d.reason = "saving 0.0095 ms does not beat ...";
  json js = toJson(s);
  const json& jd = js["decisions"][0];
  EXPECT_EQ(jd["blocker"], "below-margin");
  EXPECT_EQ(jd["values"]["saving_ms"], 0.009545218);
  EXPECT_EQ(jd["values"]["op"], "aten::view");
  EXPECT_EQ(jd["values"]["output_error"], "inf");
  const Schedule back = scheduleFromJson(js, "s.json");
  EXPECT_EQ(back.decisions[0].blocker, Blocker::BelowMargin);
  EXPECT_EQ(back.decisions[0].rule, "noise-margin");
  ASSERT_EQ(back.decisions[0].values.size(), 3u);
  EXPECT_EQ(toJson(back), js);
  // An edit made has no blocker; a schedule from before blockers reads as none.
  js["decisions"][0].erase("blocker");
  js["decisions"][0].erase("values");
  EXPECT_EQ(scheduleFromJson(js, "s.json").decisions[0].blocker, Blocker::None);
  EXPECT_TRUE(scheduleFromJson(js, "s.json").decisions[0].values.empty());
  js["decisions"][0]["blocker"] = "bad-luck";
  EXPECT_EQ(scheduleErrorWhere(js), "s.json: /decisions/0/blocker");
  js["decisions"][0]["blocker"] = "plan";
  js["decisions"][0]["values"] = {{"saving_ms", json::array()}};
  EXPECT_EQ(scheduleErrorWhere(js), "s.json: /decisions/0/values/saving_ms");
}

TEST(Formats, TruncatedJsonReportsLineAndColumn) {
  std::string text = dumpDocument(toJson(sampleProfile()), false);
  text.resize(text.size() / 2);
  try {
    parseJson(text, "p.json");
    FAIL() << "expected an error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where().rfind("p.json:", 0), 0u) << e.where();
    EXPECT_NE(e.message().find("malformed JSON"), std::string::npos);
    // "p.json:LINE:COL": the line is inside the truncated text.
    int line = std::stoi(e.where().substr(7));
    EXPECT_GT(line, 1);
  }
}

TEST(Formats, WrongSchemaAndVersionNameBoth) {
  json j = toJson(sampleProfile());
  j["schema"] = "xalloc.cost";
  try {
    profileFromJson(j, "p.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "p.json: /schema");
    EXPECT_NE(e.message().find("xalloc.cost"), std::string::npos);
    EXPECT_NE(e.message().find("xalloc.profile"), std::string::npos);
  }
  for (int version : {0, 3}) {
    j = toJson(sampleProfile());
    j["schema_version"] = version;
    try {
      profileFromJson(j, "p.json");
      FAIL() << version;
    } catch (const InputError& e) {
      EXPECT_EQ(e.where(), "p.json: /schema_version");
      EXPECT_NE(e.message().find("schema_version " + std::to_string(version)), std::string::npos);
      EXPECT_NE(e.message().find("version 1 to 2"), std::string::npos) << e.message();
    }
  }
}

TEST(Formats, WrongTypeAndMissingFieldNameThePointer) {
  json j = toJson(sampleProfile());
  j["records"][0]["sizes"] = "8x4";
  EXPECT_EQ(profileErrorWhere(j), "p.json: /records/0/sizes");
  j = toJson(sampleProfile());
  j["records"][0].erase("bytes");
  EXPECT_EQ(profileErrorWhere(j), "p.json: /records/0/bytes");
  j = toJson(sampleProfile());
  j["ops"][1]["duration_ms"] = -1.0;
  EXPECT_EQ(profileErrorWhere(j), "p.json: /ops/1/duration_ms");
  j = toJson(sampleProfile());
  j["records"][0]["consumers"][0]["op_id"] = 99;
  EXPECT_EQ(profileErrorWhere(j), "p.json: /records/0/consumers/0/op_id");
  j = toJson(sampleProfile());
  j["records"][0]["strides"] = json::array({1});
  EXPECT_EQ(profileErrorWhere(j), "p.json: /records/0/strides");
  j = toJson(sampleProfile());
  j["records"][0]["dtype"] = "float33";
  EXPECT_EQ(profileErrorWhere(j), "p.json: /records/0/dtype");
  j = toJson(sampleProfile());
  j.erase("model");
  EXPECT_EQ(profileErrorWhere(j), "p.json: /model");
  j = toJson(sampleProfile());
  j["gpu_idle_events"][0]["before_op_id"] = 7;
  EXPECT_EQ(profileErrorWhere(j), "p.json: /gpu_idle_events/0/before_op_id");
}

TEST(Formats, UnknownFieldsAreIgnored) {
  json j = toJson(sampleProfile());
  j["future_field"] = {{"x", 1}};
  j["records"][0]["another"] = true;
  EXPECT_NO_THROW(profileFromJson(j, "p.json"));
}

TEST(Formats, ScheduleRejectsUnknownActionAndAsyncWithoutWindow) {
  Schedule s;
  s.model.path = "m.pt";
  Decision d;
  d.action = Action::Async;
  d.window_id = 0;
  s.decisions.push_back(d);
  formats::IdleEvent window;
  window.duration_ms = 1.0;
  window.kind = "host-gap";
  s.gpu_idle_events.push_back(window);
  json j = toJson(s);
  EXPECT_NO_THROW(scheduleFromJson(j, "s.json"));
  j["decisions"][0]["action"] = "later";
  try {
    scheduleFromJson(j, "s.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "s.json: /decisions/0/action");
  }
  j["decisions"][0]["action"] = "async";
  j["decisions"][0]["window_id"] = nullptr;
  EXPECT_THROW(scheduleFromJson(j, "s.json"), InputError);
  j["decisions"][0]["window_id"] = 5;
  try {
    scheduleFromJson(j, "s.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "s.json: /decisions/0/window_id");
  }
}

TEST(Formats, StreamsOfDocuments) {
  std::string a = dumpDocument(toJson(sampleProfile()), true);
  std::string b = dumpDocument(toJson(sampleProfile()), false); // indented
  auto docs = parseJsonStream(a + b + "\n" + a, "<stdin>");
  ASSERT_EQ(docs.size(), 3u);
  auto set = DocumentSet::fromText(a + a, "<stdin>");
  EXPECT_NE(set.find(DocKind::Profile), nullptr);
  EXPECT_EQ(set.find(DocKind::Cost), nullptr);
  try {
    set.require(DocKind::Cost);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(e.message().find("xalloc.cost"), std::string::npos);
  }
  EXPECT_THROW(DocumentSet::fromText("  \n", "<stdin>"), InputError);
  // A broken second document is reported past the first one's line (here: at the end of input).
  try {
    parseJsonStream(a + "{\"schema\": \n", "<stdin>");
    FAIL();
  } catch (const InputError& e) {
    ASSERT_EQ(e.where().rfind("<stdin>:", 0), 0u) << e.where();
    EXPECT_GE(std::stoi(e.where().substr(8)), 2) << e.where();
  }
}

TEST(Formats, LayoutContiguityAndKey) {
  Layout l{{4, 8}, {8, 1}, 0, "float32", "cpu"};
  EXPECT_TRUE(l.isContiguous());
  EXPECT_EQ(l.bytes(), 128);
  l.strides = {1, 4};
  EXPECT_FALSE(l.isContiguous());
  EXPECT_EQ(l.key(), "float32[4,8]/[1,4]@cpu");
  Layout ones{{1, 8}, {99, 1}, 0, "float32", "cpu"}; // size-1 dims ignore their stride
  EXPECT_TRUE(ones.isContiguous());
  EXPECT_EQ(dtypeSize("bfloat16"), 2);
  EXPECT_EQ(dtypeSize("nope"), 0);
  EXPECT_EQ(dtypeGroup("int32"), "4-byte");
}

TEST(Formats, FirstLineSkipsLeadingBlankLines) {
  EXPECT_EQ(firstLine("\nUnknown builtin op: xalloc::contiguous_async.\nHere are some..."),
            "Unknown builtin op: xalloc::contiguous_async.");
  EXPECT_EQ(firstLine("one\ntwo"), "one");
  EXPECT_EQ(firstLine(" \n\n"), "");
  EXPECT_EQ(firstLine(std::string(300, 'x')).size(), 203u);
  // The TorchScript interpreter's error: its last line is the error itself.
  EXPECT_EQ(firstLine("The following operation failed in the TorchScript interpreter.\n"
                      "Traceback of TorchScript (most recent call last):\n"
                      "  File \"m.py\", line 3, in forward\n"
                      "RuntimeError: shapes cannot be multiplied (2x3 and 4x5)\n"),
            "RuntimeError: shapes cannot be multiplied (2x3 and 4x5)");
}
