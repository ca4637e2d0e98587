// toLpFormat: a scheduling problem as a mixed-integer program in CPLEX LP format (the tests give
// it to glpsol and cbc).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "xalloc/scheduler/problem.h"

namespace xalloc::scheduler {

namespace {
std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
} // namespace

std::string toLpFormat(const Problem& p) {
  std::ostringstream lp;
  auto var = [](std::size_t i, std::size_t k) {
    return "x_" + std::to_string(i) + "_" + std::to_string(k);
  };
  lp << "Maximize\n obj:";
  bool any = false;
  for (std::size_t i = 0; i < p.sites.size(); ++i)
    for (std::size_t k = 0; k < p.sites[i].options.size(); ++k) {
      const double g = p.sites[i].options[k].gain;
      lp << (g < 0 ? " - " : " + ") << num(std::abs(g)) << " " << var(i, k);
      any = true;
    }
  if (!any)
    lp << " 0 dummy";
  lp << "\nSubject To\n";
  for (std::size_t i = 0; i < p.sites.size(); ++i) {
    lp << " one_" << i << ":";
    for (std::size_t k = 0; k < p.sites[i].options.size(); ++k)
      lp << " + " << var(i, k);
    lp << " = 1\n";
  }
  for (std::size_t w = 0; w < p.window_capacity.size(); ++w) {
    std::string terms;
    for (std::size_t i = 0; i < p.sites.size(); ++i)
      for (std::size_t k = 0; k < p.sites[i].options.size(); ++k)
        if (p.sites[i].options[k].window == static_cast<int>(w))
          terms += " + " + num(p.sites[i].options[k].load) + " " + var(i, k);
    if (!terms.empty())
      lp << " win_" << w << ":" << terms << " <= " << num(p.window_capacity[w]) << "\n";
  }
  if (p.memory_budget) {
    const std::size_t n = p.base_live.size();
    for (std::size_t t = 0; t < n; ++t) {
      std::string terms;
      for (std::size_t i = 0; i < p.sites.size(); ++i)
        for (std::size_t k = 0; k < p.sites[i].options.size(); ++k) {
          std::int64_t b = 0;
          for (const auto& d : p.sites[i].options[k].memory)
            if (d.first <= static_cast<std::int64_t>(t) && static_cast<std::int64_t>(t) <= d.last)
              b += d.bytes;
          if (b != 0)
            terms += (b > 0 ? " + " : " - ") + std::to_string(std::llabs(b)) + " " + var(i, k);
        }
      if (!terms.empty())
        lp << " mem_" << t << ":" << terms
           << " <= " << std::to_string(*p.memory_budget - p.base_live[t]) << "\n";
    }
  }
  lp << "Binary\n";
  for (std::size_t i = 0; i < p.sites.size(); ++i)
    for (std::size_t k = 0; k < p.sites[i].options.size(); ++k)
      lp << " " << var(i, k) << "\n";
  lp << "End\n";
  return lp.str();
}

} // namespace xalloc::scheduler
