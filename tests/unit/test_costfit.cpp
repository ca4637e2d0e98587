// costfit: the classic least-squares fit recovers known coefficients, degrades gracefully with
// too few layouts, never predicts below the copy-bandwidth floor, and reports held-out error.
#include <algorithm>
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "xalloc/costfit/cost_model.h"
#include "xalloc/costfit/stride.h"
#include "xalloc/formats/documents.h"

#include <nlohmann/json.hpp>

using namespace xalloc;
using namespace xalloc::costfit;
using formats::Layout;

namespace {
Layout contiguousLayout(std::vector<std::int64_t> sizes, std::string dtype = "float32") {
  Layout l;
  l.sizes = sizes;
  l.strides.resize(sizes.size());
  std::int64_t s = 1;
  for (std::size_t i = sizes.size(); i-- > 0;) {
    l.strides[i] = s;
    s *= sizes[i];
  }
  l.dtype = std::move(dtype);
  return l;
}

double truth(const Layout& l) {
  return 2e-7 * static_cast<double>(l.numel()) + 3e-3 * static_cast<double>(l.ndim()) + 1e-3;
}
} // namespace

TEST(Costfit, RecoversExactCoefficients) {
  std::vector<Sample> s;
  for (std::int64_t n : {64, 256, 1024, 4096})
    for (int rank = 2; rank <= 4; ++rank) {
      std::vector<std::int64_t> sizes(static_cast<std::size_t>(rank), 1);
      sizes[0] = n;
      sizes[1] = rank;
      Layout l = contiguousLayout(sizes);
      s.push_back({l, truth(l)});
    }
  auto e = fitClassic(s, "cpu", "4-byte", 0);
  EXPECT_EQ(e.fit, "least_squares");
  EXPECT_NEAR(e.alpha, 2e-7, 1e-12);
  EXPECT_NEAR(e.beta, 3e-3, 1e-9);
  EXPECT_NEAR(e.gamma, 1e-3, 1e-9);
  EXPECT_NEAR(e.r2, 1.0, 1e-9);
  EXPECT_EQ(e.n_samples, static_cast<std::int64_t>(s.size()));
  auto q = crossValidateClassic(s, 5, 0);
  ASSERT_TRUE(q.has_value());
  EXPECT_LT(q->max_ape, 1e-6);
}

TEST(Costfit, SameRankDropsTheNdimTerm) {
  std::vector<Sample> s;
  for (std::int64_t n : {100, 200, 400}) {
    Layout l = contiguousLayout({n, 4});
    s.push_back({l, 1e-6 * static_cast<double>(l.numel()) + 0.01});
  }
  auto e = fitClassic(s, "cpu", "4-byte", 0);
  EXPECT_EQ(e.fit, "least_squares");
  EXPECT_EQ(e.beta, 0.0);
  EXPECT_NEAR(e.alpha, 1e-6, 1e-12);
  EXPECT_NEAR(e.gamma, 0.01, 1e-9);
}

TEST(Costfit, OneLayoutFallsBackToAMedianRate) {
  Layout l = contiguousLayout({1000});
  auto e = fitClassic({{l, 0.5}, {l, 0.7}}, "cpu", "4-byte", 0);
  EXPECT_EQ(e.fit, "median_rate");
  EXPECT_NEAR(predictClassic(e, l), 0.6, 1e-12);
  EXPECT_NEAR(predictClassic(e, contiguousLayout({2000})), 1.2, 1e-12);
  EXPECT_FALSE(crossValidateClassic({{l, 0.5}, {l, 0.7}}, 5, 0).has_value());
}

TEST(Costfit, PredictionsNeverBeatTheCopyBandwidth) {
  formats::CostModelEntry e;
  e.alpha = 0;
  e.gamma = -5; // a fit gone wrong must not predict negative or impossibly fast copies
  e.floor_gbps = 10;
  Layout l = contiguousLayout({1 << 20}); // 4 MiB
  double floor_ms = 4.0 * (1 << 20) / 10e9 * 1e3;
  EXPECT_NEAR(predictClassic(e, l), floor_ms, 1e-12);
  e.floor_gbps = 0;
  EXPECT_EQ(predictClassic(e, l), 0.0);
}

TEST(Costfit, FitCostGroupsByDeviceAndDtypeAndPredictorPrefersMeasurements) {
  formats::Profile p;
  p.device.copy_bandwidth_gbps = 20;
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> noise(0.95, 1.05);
  for (std::int64_t n : {64, 128, 512, 1024, 4096, 8192}) {
    for (const char* dt : {"float32", "float16"}) {
      formats::ConversionCost c;
      c.layout = contiguousLayout({n, 2}, dt);
      std::swap(c.layout.strides[0], c.layout.strides[1]);
      c.median_ms = truth(c.layout) * noise(rng);
      c.samples_ms = {c.median_ms};
      p.conversion_cost_table.push_back(c);
    }
  }
  auto cost = fitCost(p);
  ASSERT_EQ(cost.cost_model.size(), 2u);
  EXPECT_EQ(cost.cost_model[0].dtype_group, "2-byte");
  EXPECT_EQ(cost.cost_model[1].dtype_group, "4-byte");
  for (const auto& e : cost.cost_model) {
    ASSERT_TRUE(e.holdout.has_value());
    EXPECT_LT(e.holdout->mape, 10.0);
    EXPECT_EQ(e.floor_gbps, 20);
  }
  CostPredictor pred(cost);
  auto measured = pred.predict(cost.conversion_cost_table[0].layout);
  ASSERT_TRUE(measured);
  EXPECT_EQ(measured->model, "measured");
  EXPECT_EQ(measured->ms, cost.conversion_cost_table[0].median_ms);
  // Unmeasured layouts: the stride-aware model of the device answers every dtype...
  ASSERT_EQ(cost.stride_model.size(), 1u);
  auto strided = pred.predict(contiguousLayout({10}, "int64"));
  ASSERT_TRUE(strided);
  EXPECT_EQ(strided->model, "stride");
  formats::Layout gpu = contiguousLayout({10});
  gpu.device = "cuda:0";
  EXPECT_FALSE(pred.predict(gpu).has_value());
  // ... and without it, the classic model of the dtype group.
  formats::Cost classic_only = cost;
  classic_only.stride_model.clear();
  CostPredictor classic(classic_only);
  auto modeled = classic.predict(contiguousLayout({3000, 3}));
  ASSERT_TRUE(modeled);
  EXPECT_EQ(modeled->model, "classic");
  EXPECT_NEAR(modeled->ms, truth(contiguousLayout({3000, 3})),
              0.2 * truth(contiguousLayout({3000, 3})));
  EXPECT_FALSE(classic.predict(contiguousLayout({10}, "int64")).has_value());

  // A stride model fitted on other features (an older xcost's w_L3 step) is dropped, and the
  // classic model answers; one fitted on this xcost's features stays.
  formats::Cost current = cost;
  EXPECT_FALSE(dropStaleStrideModels(current));
  EXPECT_EQ(current.stride_model.size(), 1u);
  formats::Cost older = cost;
  std::replace(older.stride_model[0].features.begin(), older.stride_model[0].features.end(),
               std::string("ramp_L3"), std::string("w_L3"));
  EXPECT_TRUE(dropStaleStrideModels(older));
  EXPECT_TRUE(older.stride_model.empty());
  auto fallback = CostPredictor(older).predict(contiguousLayout({3000, 3}));
  ASSERT_TRUE(fallback);
  EXPECT_EQ(fallback->model, "classic");
}

TEST(Costfit, EachTargetLayoutIsFittedAndScoredOnItsOwnConversions) {
  // Conversions of NCHW tensors to row-major (of their transposes) and to channels-last, the
  // latter twice as slow per element: one classic model per target, each with held-out error,
  // and predictions that keep them apart.
  formats::Profile p;
  p.device.type = "cpu";
  auto cost = [](const Layout& l, formats::LayoutTarget t, double per_el) {
    formats::ConversionCost c;
    c.layout = l;
    c.target = t;
    c.median_ms = per_el * static_cast<double>(l.numel()) + 0.002;
    c.samples_ms = {c.median_ms};
    return c;
  };
  for (std::int64_t c : {8, 16, 32, 64, 96, 128})
    for (std::int64_t hw : {7, 14, 28}) {
      Layout nchw = contiguousLayout({1, c, hw, hw});
      Layout nhwc_view = nchw; // a permuted view: non-contiguous, converted to row-major
      std::swap(nhwc_view.strides[1], nhwc_view.strides[3]);
      p.conversion_cost_table.push_back(cost(nhwc_view, formats::LayoutTarget::Contiguous, 1e-6));
      p.conversion_cost_table.push_back(cost(nchw, formats::LayoutTarget::ChannelsLast, 2e-6));
    }
  const formats::Cost fitted = fitCost(p);
  const formats::CostModelEntry *row = nullptr, *cl = nullptr;
  for (const auto& e : fitted.cost_model)
    (e.target == formats::LayoutTarget::ChannelsLast ? cl : row) = &e;
  ASSERT_TRUE(row && cl);
  EXPECT_EQ(cl->n_samples, 18);
  EXPECT_EQ(row->n_samples, 18);
  EXPECT_NEAR(cl->alpha, 2e-6, 1e-9);
  EXPECT_NEAR(row->alpha, 1e-6, 1e-9);
  ASSERT_TRUE(cl->holdout);
  EXPECT_LT(cl->holdout->mape, 1.0);
  // The stride-aware model knows row-major outputs only: fitted on those alone.
  for (const auto& m : fitted.stride_model)
    for (const auto& path : m.paths)
      EXPECT_LE(path.n_samples, 18);
  // A layout measured for one target is not the answer for the other.
  const Layout unseen = contiguousLayout({1, 48, 21, 21});
  CostPredictor predictor(fitted);
  auto to_cl = predictor.predict(unseen, formats::LayoutTarget::ChannelsLast);
  ASSERT_TRUE(to_cl);
  EXPECT_EQ(to_cl->model, "classic");
  EXPECT_NEAR(to_cl->ms, 2e-6 * 48 * 21 * 21 + 0.002, 1e-4);
  const Layout measured = p.conversion_cost_table[1].layout;
  EXPECT_EQ(predictor.predict(measured, formats::LayoutTarget::ChannelsLast)->model, "measured");
  EXPECT_NE(predictor.predict(measured, formats::LayoutTarget::Contiguous)->model, "measured");
  EXPECT_FALSE(predictor.predict(unseen, formats::LayoutTarget::ChannelsLast3d));
  // The target round-trips through cost.json.
  const nlohmann::json j = formats::toJson(fitted);
  EXPECT_EQ(formats::toJson(formats::costFromJson(j, "c.json")), j);
}
