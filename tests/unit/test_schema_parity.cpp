// The C++ readers and the JSON Schemas (formats/schema/, through valijson) give the same verdict:
// what the writers produce passes both, and each bad document below is refused by both. A reader
// that accepts what its schema forbids, or a schema that forbids what the tools write, fails
// here, so the two cannot drift apart.
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "scheduler_fixture.h"
#include "schema_check.h"
#include "xalloc/error.h"
#include "xalloc/formats/documents.h"
#include "xalloc/formats/layout_traits.h"
#include "xalloc/formats/region.h"
#include "xalloc/scheduler/decide.h"

using namespace xalloc;
using namespace xalloc::formats;
using nlohmann::json;
using xalloc::testing::Fixture;
using xalloc::testing::SchemaSet;

namespace {

const SchemaSet& schemas() {
  static const SchemaSet s(XALLOC_SCHEMA_DIR);
  return s;
}

// Whether the C++ reader of the document's kind accepts it.
bool readerAccepts(const json& doc) {
  try {
    const std::string kind = schemaOf(doc);
    if (kind == "xalloc.profile")
      (void)profileFromJson(doc, "doc.json");
    else if (kind == "xalloc.cost")
      (void)costFromJson(doc, "doc.json");
    else
      (void)scheduleFromJson(doc, "doc.json");
    return true;
  } catch (const InputError&) {
    return false;
  }
}

// The three documents as the writers write them, from the scheduler tests' profile.
std::vector<json> writtenDocuments() {
  Fixture f;
  f.p.ops[0].source = {"m.py", 3, 5, "y = x.t()"};
  f.p.gpu_idle_events.push_back(Fixture::window(0, 1, 0.5));
  f.p.records[1].consumers[1].downstream.push_back(Fixture::consumer(4, 1.0, 0.9));
  const Schedule s = scheduler::makeSchedule(f.p, f.cost);
  return {toJson(f.p), toJson(f.cost), toJson(s)};
}

struct Mutation {
  const char* what;
  std::size_t doc; // 0 profile, 1 cost, 2 schedule
  std::function<void(json&)> apply;
};

} // namespace

TEST(SchemaParity, WhatTheWritersWriteIsValidForBoth) {
  for (const json& doc : writtenDocuments()) {
    EXPECT_TRUE(schemas().errors(doc).empty())
        << doc["schema"] << ": " << ::testing::PrintToString(schemas().errors(doc));
    EXPECT_TRUE(readerAccepts(doc)) << doc["schema"];
  }
}

TEST(SchemaParity, BadDocumentsAreRefusedByBoth) {
  const std::vector<Mutation> mutations = {
      {"another major version", 0,
       [](json& d) {
         d["schema_version"] = 7;
       }},
      {"an unknown schema", 1,
       [](json& d) {
         d["schema"] = "xalloc.costs";
       }},
      {"no model", 0,
       [](json& d) {
         d.erase("model");
       }},
      {"sizes as a string", 0,
       [](json& d) {
         d["records"][1]["sizes"] = "64x64";
       }},
      {"strides as a string", 0,
       [](json& d) {
         d["records"][1]["strides"] = "1,64";
       }},
      {"an origin no schema lists", 0,
       [](json& d) {
         d["records"][1]["origin"] = "weight";
       }},
      {"a model format no schema lists", 0,
       [](json& d) {
         d["model"]["format"] = "onnx";
       }},
      {"a consumer without its op", 0,
       [](json& d) {
         d["records"][1]["consumers"][0].erase("op_id");
       }},
      {"a downstream consumer without its op", 0,
       [](json& d) {
         d["records"][1]["consumers"][1]["downstream"][0].erase("op_id");
       }},
      {"downstream consumers that are not an array", 0,
       [](json& d) {
         d["records"][1]["consumers"][1]["downstream"] = json::object();
       }},
      {"no thread", 0,
       [](json& d) {
         d["device"]["threads"] = 0;
       }},
      {"a negative core count", 0,
       [](json& d) {
         d["device"]["cores"] = -2;
       }},
      {"a negative source line", 0,
       [](json& d) {
         d["ops"][0]["source"]["line"] = -3;
       }},
      {"a negative anchor column", 2,
       [](json& d) {
         d["decisions"][0]["anchor"]["col"] = -1;
       }},
      {"a utilization above 1", 0,
       [](json& d) {
         d["ops"][0]["utilization"] = 1.5;
       }},
      {"an op without its kind", 0,
       [](json& d) {
         d["ops"][0].erase("kind");
       }},
      {"a negative output index", 0,
       [](json& d) {
         d["records"][1]["output_index"] = -1;
       }},
      {"a decision's negative output index", 2,
       [](json& d) {
         d["decisions"][0]["output_index"] = -1;
       }},
      {"a cost table that is not an array", 1,
       [](json& d) {
         d["conversion_cost_table"] = json::object();
       }},
      {"a decision without its action", 2,
       [](json& d) {
         d["decisions"][0].erase("action");
       }},
      {"an action no schema lists", 2,
       [](json& d) {
         d["decisions"][0]["action"] = "copy";
       }},
      {"a form no schema lists", 2,
       [](json& d) {
         d["summary"]["form"] = "quick";
       }},
      {"an async decision without its window", 2,
       [](json& d) {
         d["decisions"][0]["action"] = "async";
         d["decisions"][0].erase("window_id");
       }},
      {"a summary without its solver", 2,
       [](json& d) {
         d["summary"].erase("solver");
       }},
  };
  const std::vector<json> written = writtenDocuments();
  for (const Mutation& m : mutations) {
    json doc = written[m.doc];
    m.apply(doc);
    EXPECT_FALSE(schemas().errors(doc).empty()) << "the schema accepts " << m.what;
    EXPECT_FALSE(readerAccepts(doc)) << "the reader accepts " << m.what;
  }
}

// The region layouts the documents may name are the rows of the layouts table
// (layout_traits.cpp), by name: the schema takes any well-formed name, so a new row needs no
// schema edit, and the readers check the name against the table. Every row's name is accepted by
// both, in a schedule's region decision and in a profile's candidate; a name the table lacks is
// refused by the readers with the names it has.
TEST(SchemaParity, RegionDecisionsNameTheLayoutsOfTheTable) {
  const json base = writtenDocuments()[2];
  RegionRef ref;
  ref.id = 0;
  ref.convolutions = 1;
  ref.nodes = {{"m.py", "Net.forward", "self.conv(x)", "aten::conv2d", 0, 3, 9}};
  auto withRegionDecision = [&](const std::string& layout, const std::string& target) {
    json doc = base;
    json d = doc["decisions"][0];
    d.erase("fused_into_producer");
    d.erase("window_id");
    d["action"] = "sync";
    d["region"] = toJson(ref);
    d["region_layout"] = layout;
    d["target"] = target;
    doc["decisions"].push_back(d);
    return doc;
  };
  for (const LayoutTraits& t : regionLayoutTraits()) {
    const json doc = withRegionDecision(t.name, toString(t.target));
    EXPECT_TRUE(schemas().errors(doc).empty())
        << t.name << ": " << ::testing::PrintToString(schemas().errors(doc));
    EXPECT_TRUE(readerAccepts(doc)) << t.name;
  }
  const json unknown = withRegionDecision("channels_last+fancy", "channels_last");
  EXPECT_TRUE(schemas().errors(unknown).empty());
  try {
    (void)scheduleFromJson(unknown, "s.json");
    ADD_FAILURE() << "a region layout the table lacks was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(),
              "s.json: /decisions/" + std::to_string(base["decisions"].size()) + "/region_layout");
    EXPECT_NE(e.message().find(regionLayoutNames()), std::string::npos) << e.message();
  }
  // Not a name at all: both refuse.
  const json malformed = withRegionDecision("Channels Last", "channels_last");
  EXPECT_FALSE(schemas().errors(malformed).empty());
  EXPECT_FALSE(readerAccepts(malformed));

  // A profile's region lists its candidates by the same names.
  json profile = writtenDocuments()[0];
  json region = toJson(ref);
  region["entries"] = json::array();
  region["exits"] = json::array();
  region["candidates"] = json::array();
  for (const LayoutTraits& t : regionLayoutTraits())
    region["candidates"].push_back({{"layout", t.name}, {"measured", false}});
  profile["regions"] = json::array({region});
  EXPECT_TRUE(schemas().errors(profile).empty())
      << ::testing::PrintToString(schemas().errors(profile));
  EXPECT_TRUE(readerAccepts(profile));
  profile["regions"][0]["candidates"][1]["layout"] = "blocked+packed";
  EXPECT_TRUE(schemas().errors(profile).empty());
  EXPECT_FALSE(readerAccepts(profile));
}
