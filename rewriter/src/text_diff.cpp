// unifiedDiff: Myers' shortest edit script over lines, grouped into hunks.
#include "xalloc/rewriter/text_diff.h"

#include <algorithm>
#include <sstream>

namespace xalloc::rewriter {

std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) {
      lines.push_back(text.substr(pos));
      break;
    }
    lines.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return lines;
}

namespace {

enum class Edit { Keep, Delete, Insert };

// Myers' greedy algorithm with a saved V per step, then a backtrack to the edit script.
std::vector<Edit> shortestEdit(const std::vector<std::string>& a,
                               const std::vector<std::string>& b) {
  const int n = static_cast<int>(a.size());
  const int m = static_cast<int>(b.size());
  const int max = n + m;
  // Diagonals k in [-max - 1, max + 1] are read (k + 1 at d = 0 included, even for two empty
  // texts, where max is 0): 2 * max + 3 slots.
  std::vector<int> v(static_cast<std::size_t>(2 * max + 3), 0);
  std::vector<std::vector<int>> trace;
  auto at = [&](std::vector<int>& vec, int k) -> int& {
    return vec[static_cast<std::size_t>(k + max + 1)];
  };
  int found_d = -1;
  for (int d = 0; d <= max && found_d < 0; ++d) {
    trace.push_back(v);
    for (int k = -d; k <= d; k += 2) {
      int x =
          (k == -d || (k != d && at(v, k - 1) < at(v, k + 1))) ? at(v, k + 1) : at(v, k - 1) + 1;
      int y = x - k;
      while (x < n && y < m && a[static_cast<std::size_t>(x)] == b[static_cast<std::size_t>(y)]) {
        ++x;
        ++y;
      }
      at(v, k) = x;
      if (x >= n && y >= m) {
        found_d = d;
        break;
      }
    }
  }
  std::vector<Edit> edits;
  int x = n, y = m;
  for (int d = found_d; d > 0; --d) {
    std::vector<int>& vd = trace[static_cast<std::size_t>(d)];
    int k = x - y;
    int prev_k = (k == -d || (k != d && at(vd, k - 1) < at(vd, k + 1))) ? k + 1 : k - 1;
    int prev_x = at(vd, prev_k);
    int prev_y = prev_x - prev_k;
    while (x > prev_x && y > prev_y) {
      edits.push_back(Edit::Keep);
      --x;
      --y;
    }
    edits.push_back(x == prev_x ? Edit::Insert : Edit::Delete);
    x = prev_x;
    y = prev_y;
  }
  while (x > 0 && y > 0) {
    edits.push_back(Edit::Keep);
    --x;
    --y;
  }
  std::reverse(edits.begin(), edits.end());
  return edits;
}

std::string range(int start, int count) {
  // Unified diff: "start,count", where an empty range names the line before it.
  if (count == 1)
    return std::to_string(start);
  return std::to_string(count == 0 ? start - 1 : start) + "," + std::to_string(count);
}

} // namespace

std::string unifiedDiff(const std::string& before, const std::string& after,
                        const std::string& before_name, const std::string& after_name,
                        int context) {
  // A last line without its newline is not the same line as one with it, and is printed with
  // the marker `git apply` and `patch` expect right after it.
  auto lines = [](const std::string& text) {
    auto l = splitLines(text);
    if (!text.empty() && text.back() != '\n')
      l.back() += "\n\\ No newline at end of file";
    return l;
  };
  const auto a = lines(before);
  const auto b = lines(after);
  const auto edits = shortestEdit(a, b);
  // Line numbers (0-based) in a and b at each edit.
  struct Step {
    Edit e;
    int ai, bi;
  };
  std::vector<Step> steps;
  int ai = 0, bi = 0;
  for (Edit e : edits) {
    steps.push_back({e, ai, bi});
    if (e != Edit::Insert)
      ++ai;
    if (e != Edit::Delete)
      ++bi;
  }
  std::ostringstream out;
  bool any = false;
  std::size_t i = 0;
  while (i < steps.size()) {
    while (i < steps.size() && steps[i].e == Edit::Keep)
      ++i;
    if (i == steps.size())
      break;
    // A hunk: from `context` keeps before the first change to `context` keeps after the last
    // change, merging changes closer than 2 * context.
    std::size_t start =
        i >= static_cast<std::size_t>(context) ? i - static_cast<std::size_t>(context) : 0;
    std::size_t end = i;
    while (end < steps.size()) {
      std::size_t j = end;
      while (j < steps.size() && steps[j].e != Edit::Keep)
        ++j;
      std::size_t keeps = 0;
      std::size_t k = j;
      while (k < steps.size() && steps[k].e == Edit::Keep) {
        ++keeps;
        ++k;
      }
      if (k == steps.size() || keeps > static_cast<std::size_t>(2 * context)) {
        end = std::min(steps.size(), j + static_cast<std::size_t>(context));
        break;
      }
      end = k;
    }
    int a_count = 0, b_count = 0;
    for (std::size_t s = start; s < end; ++s) {
      a_count += steps[s].e != Edit::Insert;
      b_count += steps[s].e != Edit::Delete;
    }
    if (!any) {
      out << "--- " << before_name << "\n+++ " << after_name << "\n";
      any = true;
    }
    out << "@@ -" << range(steps[start].ai + 1, a_count) << " +"
        << range(steps[start].bi + 1, b_count) << " @@\n";
    for (std::size_t s = start; s < end; ++s) {
      const Step& st = steps[s];
      if (st.e == Edit::Keep)
        out << " " << a[static_cast<std::size_t>(st.ai)] << "\n";
      else if (st.e == Edit::Delete)
        out << "-" << a[static_cast<std::size_t>(st.ai)] << "\n";
      else
        out << "+" << b[static_cast<std::size_t>(st.bi)] << "\n";
    }
    i = end;
  }
  return out.str();
}

} // namespace xalloc::rewriter
