// describeNode: original source location, enclosing function and expression text of a node.
#include "xalloc/tspass/source_info.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <utility>
#include <vector>

#include "xalloc/torch_compat.h"

namespace xalloc::tspass {

namespace detail {

namespace {
bool isIdent(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// Indentation width of the line that starts at `pos` and whether it is blank/comment.
std::size_t indentOf(const std::string& text, std::size_t pos, bool* blank) {
  std::size_t i = pos;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t'))
    ++i;
  *blank = i >= text.size() || text[i] == '\n' || text[i] == '#';
  return i - pos;
}

// "def name(" / "class Name" at `pos` (after indentation): the name, or "".
std::string keywordName(const std::string& text, std::size_t pos, const char* kw) {
  std::size_t n = std::char_traits<char>::length(kw);
  if (text.compare(pos, n, kw) != 0 || pos + n >= text.size() || text[pos + n] != ' ')
    return "";
  std::size_t b = pos + n + 1;
  std::size_t e = b;
  while (e < text.size() && isIdent(text[e]))
    ++e;
  return text.substr(b, e - b);
}
} // namespace

std::string enclosingPythonFunction(const std::string& text, std::size_t offset) {
  if (offset > text.size())
    return "";
  std::size_t line_start = text.rfind('\n', offset == 0 ? 0 : offset - 1);
  line_start = line_start == std::string::npos ? 0 : line_start + 1;
  bool blank = false;
  std::size_t limit = indentOf(text, line_start, &blank); // enclosing blocks indent less
  std::string function;
  std::string cls;
  std::size_t pos = line_start;
  while (pos > 0 && limit > 0) {
    std::size_t prev_end = pos - 1; // the '\n' ending the previous line
    std::size_t prev_start = text.rfind('\n', prev_end == 0 ? 0 : prev_end - 1);
    prev_start = (prev_start == std::string::npos || prev_end == 0) ? 0 : prev_start + 1;
    pos = prev_start;
    std::size_t ind = indentOf(text, prev_start, &blank);
    if (blank || ind >= limit)
      continue;
    limit = ind;
    if (function.empty()) {
      function = keywordName(text, prev_start + ind, "def");
      if (function.empty())
        continue;
    } else {
      cls = keywordName(text, prev_start + ind, "class");
      if (!cls.empty())
        break;
    }
  }
  if (function.empty())
    return "";
  return cls.empty() ? function : cls + "." + function;
}

std::string completeExpression(const std::string& text, std::size_t start, std::size_t end) {
  if (start >= text.size())
    return "";
  end = std::min(end, text.size());
  // Complete an identifier the range cut in half ("x.spli" -> "x.split").
  while (end < text.size() && end > start && isIdent(text[end - 1]) && isIdent(text[end]))
    ++end;
  // A call or subscript that follows directly belongs to the expression ("idx.size" ->
  // "idx.size()").
  auto balanceFrom = [&](std::size_t i, int depth) {
    bool in_str = false;
    char quote = 0;
    for (; i < text.size(); ++i) {
      char c = text[i];
      if (in_str) {
        if (c == '\\')
          ++i;
        else if (c == quote)
          in_str = false;
        continue;
      }
      if (c == '"' || c == '\'') {
        in_str = true;
        quote = c;
      } else if (c == '(' || c == '[' || c == '{') {
        ++depth;
      } else if (c == ')' || c == ']' || c == '}') {
        if (--depth == 0)
          return i + 1;
      }
    }
    return text.size();
  };
  // Close brackets the range left open.
  int open = 0;
  for (std::size_t i = start; i < end; ++i) {
    char c = text[i];
    if (c == '(' || c == '[' || c == '{')
      ++open;
    else if ((c == ')' || c == ']' || c == '}') && open > 0)
      --open;
  }
  if (open > 0)
    end = balanceFrom(end, open);
  // A range that starts inside parentheses ("h * g).transpose(1, 2)" of "(h * g).transpose(1, 2)")
  // takes in the opening bracket of every closer it leaves unmatched.
  for (bool moved = true; moved;) {
    moved = false;
    int depth = 0;
    for (std::size_t i = start; i < end && !moved; ++i) {
      char c = text[i];
      if (c == '(' || c == '[' || c == '{') {
        ++depth;
      } else if ((c == ')' || c == ']' || c == '}') && --depth < 0) {
        // Walk left from `start` to the bracket this closer matches.
        int nest = 0;
        for (std::size_t j = start; j-- > 0;) {
          char p = text[j];
          if (p == ')' || p == ']' || p == '}') {
            ++nest;
          } else if ((p == '(' || p == '[' || p == '{') && nest-- == 0) {
            start = j;
            moved = true;
            break;
          }
        }
        if (!moved)
          break; // unbalanced source: keep what we have
      }
    }
  }
  while (end < text.size() && (text[end] == '(' || text[end] == '['))
    end = balanceFrom(end, 0);
  std::string out;
  bool space = false;
  for (std::size_t i = start; i < end; ++i) {
    char c = text[i];
    if (c == '\n' || c == '\t' || c == ' ' || c == '\r' || c == '\\') {
      space = !out.empty();
      continue;
    }
    if (space)
      out += ' ';
    space = false;
    out += c;
  }
  constexpr std::size_t kMax = 160;
  if (out.size() > kMax)
    out = out.substr(0, kMax - 3) + "...";
  return out;
}

namespace {
// "<file>(<line>): <function>", one frame as torch.jit's tracer writes it (python_tracer.cpp),
// where the file is a .py path or a pseudo-file ("<ipython-input-3-...>" in a notebook, "<stdin>").
// "" when `line` is not one.
std::string frameFunction(const std::string& line) {
  const std::size_t colon = line.rfind("): ");
  if (colon == std::string::npos)
    return "";
  std::size_t i = colon;
  while (i > 0 && std::isdigit(static_cast<unsigned char>(line[i - 1])))
    --i;
  if (i == colon || i < 2 || line[i - 1] != '(')
    return "";
  // A Python file, or a pseudo-file such as "<stdin>".
  const std::string file = line.substr(0, i - 1);
  const bool py = file.size() > 3 && file.compare(file.size() - 3, 3, ".py") == 0;
  if (!py && !(file.front() == '<' && file.back() == '>'))
    return "";
  std::string function = line.substr(colon + 3);
  while (!function.empty() && std::isspace(static_cast<unsigned char>(function.back())))
    function.pop_back();
  if (function.empty() || function.find_first_of(" \t()") != std::string::npos)
    return "";
  return function;
}
} // namespace

std::string tracedFrameFunction(const std::string& text, std::size_t start) {
  if (start >= text.size())
    return "";
  // Every line a frame: Python source never is, though one of its lines may look like one.
  std::string at_start;
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string::npos)
      eol = text.size();
    if (eol > pos) {
      std::string function = frameFunction(text.substr(pos, eol - pos));
      if (function.empty())
        return "";
      if (pos <= start && start < eol)
        at_start = std::move(function);
    }
    pos = eol + 1;
  }
  return at_start;
}

} // namespace detail

struct SourceTextCache::Impl {
  std::vector<std::pair<std::shared_ptr<torch::jit::Source>, std::string>> texts;
  const std::string& text(const std::shared_ptr<torch::jit::Source>& src) {
    for (const auto& [s, t] : texts) // a graph points into a handful of files
      if (s == src)
        return t;
    texts.emplace_back(src, compat::sourceText(*src));
    return texts.back().second;
  }
};

SourceTextCache::SourceTextCache() : impl_(std::make_unique<Impl>()) {}
SourceTextCache::~SourceTextCache() = default;

NodeSource describeNode(const torch::jit::Node* node) {
  SourceTextCache cache;
  return describeNode(node, cache);
}

NodeSource describeNode(const torch::jit::Node* node, SourceTextCache& cache) {
  NodeSource out;
  torch::jit::SourceRange range = compat::originalRange(node->sourceRange());
  auto flc = compat::fileLineCol(range);
  if (!flc || std::get<0>(*flc).empty())
    return out;
  const std::string& text = cache.impl().text(range.source());
  out.loc.file = std::get<0>(*flc);
  out.loc.line = static_cast<std::int64_t>(std::get<1>(*flc));
  out.loc.col = static_cast<std::int64_t>(std::get<2>(*flc));
  std::size_t start = range.start();
  if (std::string function = detail::tracedFrameFunction(text, start); !function.empty()) {
    // No expression text to anchor on: sites are told apart by op and ordinal in the function.
    out.function = std::move(function);
    return out;
  }
  std::size_t line_start = text.rfind('\n', start == 0 ? 0 : start - 1);
  line_start = (line_start == std::string::npos || start == 0) ? 0 : line_start + 1;
  std::size_t line_end = text.find('\n', start);
  if (line_end == std::string::npos)
    line_end = text.size();
  std::string line = text.substr(line_start, line_end - line_start);
  std::size_t first = line.find_first_not_of(" \t");
  out.loc.text = first == std::string::npos ? "" : line.substr(first);
  out.function = detail::enclosingPythonFunction(text, start);
  out.expr = detail::completeExpression(text, start, range.end());
  return out;
}

std::string moduleScope(const torch::jit::Node* node) {
  std::string scope;
  for (const auto& name : compat::inlinedModuleInstances(node))
    if (name != "SELF") // a method calling another method of its own module
      scope += (scope.empty() ? "" : ".") + name;
  auto carried = const_cast<torch::jit::Node*>(node)->scope(); // not const in 1.13
  if (scope.empty() && carried && !carried->isBlank())
    scope = carried->name().toUnqualString();
  return scope;
}

namespace {
// "kind|file:line:col" of a node's original source, "" without one.
std::string siteKey(const torch::jit::Node* n) {
  auto flc = compat::fileLineCol(compat::originalRange(n->sourceRange()));
  if (!flc || std::get<0>(*flc).empty())
    return "";
  return std::string(n->kind().toQualString()) + "|" + std::get<0>(*flc) + ":" +
         std::to_string(std::get<1>(*flc)) + ":" + std::to_string(std::get<2>(*flc));
}

template <typename F> void eachNode(const torch::jit::Block* b, const F& f) {
  for (const torch::jit::Node* n : b->nodes()) {
    f(n);
    for (const torch::jit::Block* sub : n->blocks())
      eachNode(sub, f);
  }
}
} // namespace

void carryScopes(const torch::jit::Graph& from, torch::jit::Graph& to) {
  std::map<std::string, std::vector<std::string>> scopes;
  eachNode(from.block(), [&](const torch::jit::Node* n) {
    if (std::string key = siteKey(n); !key.empty())
      scopes[key].push_back(moduleScope(n));
  });
  std::map<std::string, std::vector<torch::jit::Node*>> targets;
  eachNode(to.block(), [&](const torch::jit::Node* n) {
    if (std::string key = siteKey(n); !key.empty() && scopes.count(key))
      targets[key].push_back(const_cast<torch::jit::Node*>(n));
  });
  const auto root = c10::make_intrusive<torch::jit::Scope>();
  for (auto& [key, nodes] : targets) {
    const auto& names = scopes.at(key);
    const bool shared = std::all_of(names.begin(), names.end(),
                                    [&](const std::string& s) { return s == names.front(); });
    // The inlined graph may hold copies the saved code drops (MultiheadAttention's paths that
    // never run): each module's copies sit together, so with repeats collapsed the names line
    // up again, one per module, in order.
    std::vector<std::string> modules;
    for (const auto& s : names)
      if (modules.empty() || modules.back() != s)
        modules.push_back(s);
    const auto& in_order = nodes.size() == names.size() ? names : modules;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const std::string& name = nodes.size() == in_order.size() ? in_order[i]
                                : shared                        ? names.front()
                                                                : std::string();
      if (!name.empty())
        nodes[i]->setScope(root->push(c10::Symbol::scope(name)));
    }
  }
}

} // namespace xalloc::tspass
