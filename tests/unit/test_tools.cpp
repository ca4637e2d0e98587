// Every tool as a function: options in a plain struct, an exit code out, no argv. The pipeline
// runs in this process on a scripted test model: runXprof -> runXcost -> runXsched (and
// runMemplan) -> runXrewrite, each reading what the one before wrote; runXprofRun profiles the
// tests' libtorch program.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "profile_samples.h"
#include "temp_path.h"
#include "xalloc/costfit/tool.h"
#include "xalloc/error.h"
#include "xalloc/formats/documents.h"
#include "xalloc/profiler/tool.h"
#include "xalloc/rewriter/tool.h"
#include "xalloc/scheduler/tool.h"
#include "xalloc/tspass/model_io.h"

using namespace xalloc;
using xalloc::testing::tempPath;

TEST(Tools, ThePipelineRunsAsFunctionsOnFiles) {
  const std::string profile = tempPath("tools_profile.json"), cost = tempPath("tools_cost.json"),
                    schedule = tempPath("tools_schedule.json"), plan = tempPath("tools_plan.json"),
                    out = tempPath("tools_mixer.opt.pt");

  profiler::XprofOptions xp;
  xp.profile.model = xalloc::testing::samplePath("mixer");
  xp.profile.iterations = 2;
  xp.profile.warmup = 1;
  xp.profile.repeats = 5;
  xp.profile.use_db = false;
  xp.output = profile;
  xp.quiet = true;
  ASSERT_EQ(profiler::runXprof(xp), kExitOk);
  const formats::Profile p = formats::loadProfile(profile);
  EXPECT_EQ(p.model.path, xp.profile.model);
  EXPECT_FALSE(p.records.empty());

  costfit::XcostOptions xc;
  xc.input = profile;
  xc.output = cost;
  ASSERT_EQ(costfit::runXcost(xc), kExitOk);
  EXPECT_FALSE(formats::loadCost(cost).conversion_cost_table.empty());

  scheduler::XschedOptions xs;
  xs.profile = profile;
  xs.cost = cost;
  xs.output = schedule;
  ASSERT_EQ(scheduler::runXsched(xs), kExitOk);
  const formats::Schedule s = formats::loadSchedule(schedule);
  EXPECT_EQ(s.model.path, xp.profile.model);

  scheduler::MemplanOptions mp;
  mp.input = profile;
  mp.output = plan;
  ASSERT_EQ(scheduler::runMemplan(mp), kExitOk);
  EXPECT_TRUE(std::filesystem::exists(plan));

  rewriter::XrewriteOptions xr;
  xr.model = xp.profile.model;
  xr.schedule = schedule;
  xr.output = out;
  xr.quiet = true;
  ASSERT_EQ(rewriter::runXrewrite(xr), kExitOk);
  const auto rewritten = tspass::loadModel(out);
  EXPECT_TRUE(rewritten.extra_files.count(tspass::kScheduleFile));
  // --check on its own output: nothing left to change.
  rewriter::XrewriteOptions check = xr;
  check.model = out;
  check.output.clear();
  check.check = true;
  EXPECT_EQ(rewriter::runXrewrite(check), kExitOk);

  // xprof run on a libtorch program: runXprofRun, its hook preloaded into a real process.
  profiler::XprofRunOptions run;
  run.run.command = {XALLOC_TEST_MIXER, "--steps", "2"};
  run.run.iterations = 1;
  run.run.repeats = 3;
  run.run.measure_consumers = false;
  run.output = tempPath("tools_program.json");
  run.quiet = true;
  ASSERT_EQ(profiler::runXprofRun(run), kExitOk);
  const formats::Profile program = formats::loadProfile(run.output);
  EXPECT_EQ(program.model.format, formats::ModelFormat::LibtorchProgram);
  EXPECT_FALSE(program.ops.empty());
  std::filesystem::remove(run.output);

  // Bad input is an InputError, which main() turns into one line and exit 2.
  scheduler::XschedOptions bad = xs;
  bad.memory_budget = "lots";
  EXPECT_THROW(scheduler::runXsched(bad), InputError);
  profiler::XprofOptions bad_sweep = xp;
  bad_sweep.sweep_max = "1K";
  EXPECT_THROW(profiler::runXprof(bad_sweep), InputError);

  for (const auto& f : {profile, cost, schedule, plan, out})
    std::filesystem::remove(f);
}
