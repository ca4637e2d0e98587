// formats: regions in profiles and schedules round-trip (their candidates, layouts, borders and
// rounds), older documents name region layouts by target and packing, and a schedule of
// version one is refused clearly.
#include <string>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "xalloc/error.h"
#include "xalloc/formats/documents.h"
#include "xalloc/formats/json_reader.h"

#include "formats_fixture.h"

using namespace xalloc;
using namespace xalloc::formats;
using namespace xalloc::testing;
using nlohmann::json;

namespace {
Region sampleRegion();

// A schedule of one decision: run sampleRegion() as channels_last+packed.
Schedule sampleRegionSchedule() {
  Schedule s;
  s.model.path = "m.pt";
  Decision d;
  d.action = Action::Sync;
  d.setRegion(sampleRegion().ref, *layoutTraits("channels_last+packed"));
  d.anchor = d.region->nodes.front();
  s.decisions.push_back(d);
  return s;
}

Region sampleRegion() {
  Region g;
  g.ref.id = 0;
  g.ref.convolutions = 1;
  g.ref.nodes = {{"m.py", "Net.forward", "self.conv(x)", "aten::conv2d", 0, 3, 9},
                 {"m.py", "Net.forward", "F.relu(y)", "aten::relu", 0, 4, 9}};
  g.entries = {{{1, 3, 8, 8}, {192, 64, 8, 1}, 0, "float32", "cpu"}};
  g.exits = {{{1, 4, 8, 8}, {256, 64, 8, 1}, 0, "float32", "cpu"}};
  RegionCandidate as_is;
  as_is.measured = true;
  as_is.time_ms = 1.5;
  RegionCandidate cl = as_is;
  cl.layout = layoutTraits("channels_last+packed");
  cl.time_ms = 1.0;
  cl.delta_ms = -0.5;
  cl.delta_spread_ms = 0.01;
  cl.identical_output = false;
  cl.output_error = 2e-7;
  RegionCandidate blocked = *parseCandidateName("blocked");
  blocked.note = "no convolution of the region has constant weights";
  g.candidates = {as_is, cl, blocked};
  return g;
}
} // namespace

TEST(Formats, RegionsRoundTripInProfilesAndSchedules) {
  Profile p = sampleProfile();
  p.regions.push_back(sampleRegion());
  json j = toJson(p);
  Profile back = profileFromJson(j, "p.json");
  EXPECT_EQ(toJson(back), j);
  ASSERT_EQ(back.regions.size(), 1u);
  EXPECT_EQ(back.regions[0].candidates[1].name(), "channels_last+packed");
  EXPECT_EQ(back.regions[0].candidates[1].output_error, 2e-7);
  EXPECT_TRUE(back.regions[0].candidates[1].needsRuntime());
  EXPECT_FALSE(back.regions[0].candidates[0].needsRuntime());

  // Candidates are named by their layout's name.
  EXPECT_EQ(j["regions"][0]["candidates"][1]["layout"], "channels_last+packed");
  EXPECT_FALSE(j["regions"][0]["candidates"][1].contains("target"));
  // The first candidate is the region as it is; a packed blocked region does not exist.
  json bad = j;
  bad["regions"][0]["candidates"][0]["layout"] = "channels_last";
  EXPECT_EQ(profileErrorWhere(bad), "p.json: /regions/0/candidates");
  bad = j;
  bad["regions"][0]["candidates"][2]["layout"] = "blocked+packed";
  EXPECT_EQ(profileErrorWhere(bad), "p.json: /regions/0/candidates/2/layout");
  bad = j;
  bad["regions"][0]["candidates"][1]["layout"] = "nhwc";
  EXPECT_EQ(profileErrorWhere(bad), "p.json: /regions/0/candidates/1/layout");
  bad["regions"][0]["candidates"][1]["layout"] = 3;
  EXPECT_EQ(profileErrorWhere(bad), "p.json: /regions/0/candidates/1/layout");
  bad = j;
  bad["regions"][0]["nodes"] = json::array();
  EXPECT_EQ(profileErrorWhere(bad), "p.json: /regions/0/nodes");

  json js = toJson(sampleRegionSchedule());
  EXPECT_EQ(js["schema_version"], 3);
  EXPECT_EQ(js["decisions"][0]["target"], "channels_last");
  EXPECT_EQ(js["decisions"][0]["region_layout"], "channels_last+packed");
  EXPECT_EQ(toJson(scheduleFromJson(js, "s.json")), js);
  EXPECT_EQ(parseCandidateName("channels_last+packed")->packed(), true);
  EXPECT_FALSE(parseCandidateName("blocked+packed"));
  EXPECT_FALSE(parseCandidateName("nchw"));

  // A region decision converts (sync) or not; blocked is for regions only.
  json bad_s = js;
  bad_s["decisions"][0]["action"] = "async";
  bad_s["decisions"][0]["window_id"] = nullptr;
  EXPECT_THROW(scheduleFromJson(bad_s, "s.json"), InputError);
  bad_s = js;
  bad_s["decisions"][0].erase("region");
  bad_s["decisions"][0].erase("region_layout");
  bad_s["decisions"][0]["target"] = "blocked";
  EXPECT_THROW(scheduleFromJson(bad_s, "s.json"), InputError);
  // A region layout belongs to a region decision, and its target is the layout's.
  bad_s = js;
  bad_s["decisions"][0].erase("region");
  EXPECT_EQ(scheduleErrorWhere(bad_s), "s.json: /decisions/0/region_layout");
  bad_s = js;
  bad_s["decisions"][0]["target"] = "contiguous";
  EXPECT_EQ(scheduleErrorWhere(bad_s), "s.json: /decisions/0/target");
  bad_s = js;
  bad_s["decisions"][0]["region_layout"] = "channels_last+fancy";
  try {
    scheduleFromJson(bad_s, "s.json");
    FAIL() << "an unknown region layout was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "s.json: /decisions/0/region_layout");
    EXPECT_NE(e.message().find("'channels_last+packed'"), std::string::npos) << e.message();
  }
  bad_s = js;
  bad_s["decisions"][0]["target"] = "nhwc";
  try {
    scheduleFromJson(bad_s, "s.json");
    FAIL() << "an unknown layout was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "s.json: /decisions/0/target");
    EXPECT_NE(e.message().find("'channels_last'"), std::string::npos) << e.message();
  }
}

// Profile version 1 and schedule version 2 named a region layout by its activations' memory
// format and whether its weights were packed; they are still read, to the same layouts.
TEST(Formats, OlderDocumentsNameRegionLayoutsByTargetAndPacked) {
  Profile p = sampleProfile();
  p.regions.push_back(sampleRegion());
  json now = toJson(p);
  json old = now;
  old["schema_version"] = 1;
  for (auto& c : old["regions"][0]["candidates"]) {
    const LayoutTraits* t = layoutTraits(c["layout"].get<std::string>());
    c.erase("layout");
    c["target"] = toString(t->target);
    c["packed"] = t->packed;
  }
  EXPECT_EQ(toJson(profileFromJson(old, "old.json")), now);
  old["regions"][0]["candidates"][2]["packed"] = true; // blocked+packed: no such layout
  EXPECT_EQ(profileErrorWhere(old), "p.json: /regions/0/candidates/2/packed");

  json js = toJson(sampleRegionSchedule());
  json old_s = js;
  old_s["schema_version"] = 2;
  old_s["decisions"][0].erase("region_layout");
  old_s["decisions"][0]["packed"] = true;
  Schedule back = scheduleFromJson(old_s, "old.json");
  EXPECT_EQ(back.decisions.at(0).region_layout, layoutTraits("channels_last+packed"));
  EXPECT_EQ(toJson(back), js);
  old_s["decisions"][0]["packed"] = false; // channels_last, unpacked: a layout too
  EXPECT_STREQ(scheduleFromJson(old_s, "old.json").decisions.at(0).region_layout->name,
               "channels_last");
  old_s["decisions"][0]["target"] = "blocked";
  old_s["decisions"][0]["packed"] = true;
  EXPECT_EQ(scheduleErrorWhere(old_s), "s.json: /decisions/0/packed");
}

TEST(Formats, ScheduleOfVersionOneIsRejectedClearly) {
  Schedule s;
  s.model.path = "m.pt";
  json js = toJson(s);
  js["schema_version"] = 1;
  try {
    scheduleFromJson(js, "old.json");
    FAIL() << "a version-1 schedule was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "old.json: /schema_version");
    EXPECT_NE(e.message().find("before layout targets"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("run xsched again"), std::string::npos) << e.message();
  }
  // A version-2 decision without its target is incomplete.
  Decision d;
  d.action = Action::Sync;
  s.decisions.push_back(d);
  js = toJson(s);
  js["decisions"][0].erase("target");
  EXPECT_THROW(scheduleFromJson(js, "s.json"), InputError);
}
