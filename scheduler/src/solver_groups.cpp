// groupsOf: the decomposition of a scheduling problem into independent groups of sites.
#include <algorithm>
#include <numeric>

#include "solver_internal.h"

namespace xalloc::scheduler::detail {

namespace {

// Live bytes at each position if every site took, everywhere, the most memory any of its
// options takes there: where even this stays within the budget, memory cannot bind.
std::vector<std::int64_t> worstLive(const Problem& p) {
  const std::size_t n = p.base_live.size();
  std::vector<std::int64_t> diff(n + 1, 0);
  for (const Site& s : p.sites) {
    // This site's envelope: the largest of its options' (and 0) at each position.
    std::vector<std::int64_t> cuts;
    for (const auto& o : s.options)
      for (const auto& d : o.memory) {
        cuts.push_back(std::max<std::int64_t>(d.first, 0));
        cuts.push_back(std::min<std::int64_t>(d.last + 1, static_cast<std::int64_t>(n)));
      }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    for (std::size_t c = 0; c + 1 < cuts.size(); ++c) {
      const std::int64_t t = cuts[c];
      std::int64_t env = 0;
      for (const auto& o : s.options) {
        std::int64_t v = 0;
        for (const auto& d : o.memory)
          if (d.first <= t && t <= d.last)
            v += d.bytes;
        env = std::max(env, v);
      }
      diff[static_cast<std::size_t>(t)] += env;
      diff[static_cast<std::size_t>(cuts[c + 1])] -= env;
    }
  }
  std::vector<std::int64_t> out(n);
  std::int64_t acc = 0;
  for (std::size_t t = 0; t < n; ++t)
    out[t] = p.base_live[t] + (acc += diff[t]);
  return out;
}

} // namespace

std::vector<Group> groupsOf(const Problem& p) {
  const int nw = static_cast<int>(p.window_capacity.size());
  const int ns = static_cast<int>(p.sites.size());
  std::vector<int> parent(static_cast<std::size_t>(nw + ns));
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](int x) {
    while (parent[static_cast<std::size_t>(x)] != x)
      x = parent[static_cast<std::size_t>(x)] =
          parent[static_cast<std::size_t>(parent[static_cast<std::size_t>(x)])];
    return x;
  };
  auto unite = [&](int a, int b) {
    parent[static_cast<std::size_t>(find(a))] = find(b);
  };
  for (int i = 0; i < ns; ++i)
    for (const auto& o : p.sites[static_cast<std::size_t>(i)].options)
      if (o.window >= 0)
        unite(nw + i, o.window);
  // Runs of consecutive positions where the budget can bind; a site joins every run its
  // memory touches, so two sites compete for memory only through a run they share.
  std::vector<std::pair<std::int64_t, std::int64_t>> runs; // [first, last]
  if (p.memory_budget) {
    const std::vector<std::int64_t> worst = worstLive(p);
    for (std::size_t t = 0; t < worst.size(); ++t)
      if (worst[t] > *p.memory_budget) {
        if (!runs.empty() && runs.back().second + 1 == static_cast<std::int64_t>(t))
          runs.back().second = static_cast<std::int64_t>(t);
        else
          runs.push_back({static_cast<std::int64_t>(t), static_cast<std::int64_t>(t)});
      }
  }
  const int run_base = static_cast<int>(parent.size());
  parent.resize(parent.size() + runs.size());
  std::iota(parent.begin() + run_base, parent.end(), run_base);
  for (int i = 0; i < ns && !runs.empty(); ++i)
    for (const auto& o : p.sites[static_cast<std::size_t>(i)].options)
      for (const auto& d : o.memory) {
        if (d.bytes == 0)
          continue;
        // The first run that ends at or after d.first; then every run that starts by d.last.
        auto it = std::lower_bound(runs.begin(), runs.end(), d.first,
                                   [](const auto& r, std::int64_t v) { return r.second < v; });
        for (; it != runs.end() && it->first <= d.last; ++it)
          unite(nw + i, run_base + static_cast<int>(it - runs.begin()));
      }
  std::vector<int> index(parent.size(), -1);
  std::vector<Group> groups;
  for (int i = 0; i < ns; ++i) {
    const int root = find(nw + i);
    auto& g = index[static_cast<std::size_t>(root)];
    if (g < 0) {
      g = static_cast<int>(groups.size());
      groups.emplace_back();
    }
    groups[static_cast<std::size_t>(g)].sites.push_back(i);
  }
  for (int w = 0; w < nw; ++w) {
    const int g = index[static_cast<std::size_t>(find(w))];
    if (g >= 0)
      groups[static_cast<std::size_t>(g)].windows.push_back(w);
  }
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const int g = index[static_cast<std::size_t>(find(run_base + static_cast<int>(r)))];
    if (g < 0)
      continue; // no site touches it: the base alone is over the budget there
    auto& grp = groups[static_cast<std::size_t>(g)];
    grp.memory = true;
    for (std::int64_t t = runs[r].first; t <= runs[r].second; ++t)
      grp.binding.push_back(t);
  }
  return groups;
}

} // namespace xalloc::scheduler::detail
