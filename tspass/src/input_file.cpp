// Reading a torch.save file of inputs, lists and dicts of one element included; inputs moved
// one unit in the last place.
//
// Python pickles a list of one element as EMPTY_LIST, the element, APPEND, and a dict of one
// item with SETITEM; libtorch 1.13's unpickler knows only APPENDS and SETITEMS (a MARK before
// the elements), which Python uses for two or more. The pickle is rewritten before it is read:
// a MARK where the appended element (the set key) starts, and APPENDS (SETITEMS) in place of
// APPEND (SETITEM). Where an element starts is found by walking the opcodes with a stack of the
// offsets at which each stack item began.
#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/unpickler.h>

#include "xalloc/error.h"
#include "xalloc/tspass/inputs.h"

namespace xalloc::tspass {

namespace {

struct Patch {
  std::vector<std::size_t> marks;    // offsets before which a MARK goes
  std::vector<std::size_t> replaced; // offsets of APPEND / SETITEM (made APPENDS / SETITEMS)
};

std::uint64_t little(const std::string& p, std::size_t at, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i)
    v = (v << 8) | static_cast<unsigned char>(p[at + static_cast<std::size_t>(i)]);
  return v;
}

// The opcodes of protocols 0-4 that torch.save writes or may; anything else is refused (the
// unpickler would refuse it too). Returns std::nullopt when the pickle cannot be walked.
std::optional<Patch> findPatches(const std::string& p) {
  struct Item {
    std::size_t start;
    bool mark;
  };
  std::vector<Item> stack;
  Patch out;
  auto pop = [&]() -> std::optional<Item> {
    if (stack.empty())
      return std::nullopt;
    Item i = stack.back();
    stack.pop_back();
    return i;
  };
  auto popToMark = [&]() -> std::optional<std::size_t> {
    while (!stack.empty()) {
      Item i = stack.back();
      stack.pop_back();
      if (i.mark)
        return i.start;
    }
    return std::nullopt;
  };
  std::size_t pos = 0;
  while (pos < p.size()) {
    const std::size_t at = pos;
    const unsigned char op = static_cast<unsigned char>(p[pos++]);
    auto need = [&](std::size_t n) {
      return pos + n <= p.size();
    };
    auto skipLine = [&]() {
      const std::size_t nl = p.find('\n', pos);
      if (nl == std::string::npos)
        return false;
      pos = nl + 1;
      return true;
    };
    switch (op) {
    case '.': // STOP
      return out;
    case 0x80: // PROTO
      if (!need(1))
        return std::nullopt;
      pos += 1;
      break;
    case 0x95: // FRAME
      if (!need(8))
        return std::nullopt;
      pos += 8;
      break;
    case '(': // MARK
      stack.push_back({at, true});
      break;
    // one item pushed, with its argument bytes
    case ']':
    case '}':
    case ')':
    case 'N':
    case 0x88:
    case 0x89:
    case 0x8f: // empty set
      stack.push_back({at, false});
      break;
    case 'K':
    case 'h': // BININT1, BINGET
      if (!need(1))
        return std::nullopt;
      pos += 1;
      stack.push_back({at, false});
      break;
    case 'M': // BININT2
      if (!need(2))
        return std::nullopt;
      pos += 2;
      stack.push_back({at, false});
      break;
    case 'J':
    case 'j': // BININT, LONG_BINGET
      if (!need(4))
        return std::nullopt;
      pos += 4;
      stack.push_back({at, false});
      break;
    case 'G': // BINFLOAT
      if (!need(8))
        return std::nullopt;
      pos += 8;
      stack.push_back({at, false});
      break;
    case 0x8a:
    case 'U':
    case 'C':
    case 0x8c: { // LONG1, SHORT_BINSTRING/BYTES/UNICODE
      if (!need(1))
        return std::nullopt;
      const std::size_t n = static_cast<unsigned char>(p[pos]);
      pos += 1;
      if (!need(n))
        return std::nullopt;
      pos += n;
      stack.push_back({at, false});
      break;
    }
    case 0x8b:
    case 'T':
    case 'X':
    case 'B': { // LONG4, BINSTRING, BINUNICODE, BINBYTES
      if (!need(4))
        return std::nullopt;
      const std::size_t n = little(p, pos, 4);
      pos += 4;
      if (!need(n))
        return std::nullopt;
      pos += n;
      stack.push_back({at, false});
      break;
    }
    case 0x8d:
    case 0x8e: { // BINUNICODE8, BINBYTES8
      if (!need(8))
        return std::nullopt;
      const std::uint64_t n = little(p, pos, 8);
      pos += 8;
      if (n > p.size() - pos)
        return std::nullopt;
      pos += n;
      stack.push_back({at, false});
      break;
    }
    case 'I':
    case 'L':
    case 'F':
    case 'S':
    case 'V':
    case 'g': // text-argument pushes
      if (!skipLine())
        return std::nullopt;
      stack.push_back({at, false});
      break;
    case 'c': // GLOBAL: module and name, a line each
      if (!skipLine() || !skipLine())
        return std::nullopt;
      stack.push_back({at, false});
      break;
    case 'p': // PUT (a line): no change to the stack
      if (!skipLine())
        return std::nullopt;
      break;
    case 'q': // BINPUT
      if (!need(1))
        return std::nullopt;
      pos += 1;
      break;
    case 'r': // LONG_BINPUT
      if (!need(4))
        return std::nullopt;
      pos += 4;
      break;
    case 0x94: // MEMOIZE
      break;
    case 0x93: { // STACK_GLOBAL: module, name -> one
      auto name = pop(), module = pop();
      if (!name || !module)
        return std::nullopt;
      stack.push_back({module->start, false});
      break;
    }
    case 't':
    case 'l':
    case 'd':
    case 0x91: { // TUPLE, LIST, DICT, FROZENSET: from the mark
      auto m = popToMark();
      if (!m)
        return std::nullopt;
      stack.push_back({*m, false});
      break;
    }
    case 'e':
    case 'u':
    case 0x90: // APPENDS, SETITEMS, ADDITEMS: the container stays
      if (!popToMark())
        return std::nullopt;
      break;
    case 'a': { // APPEND: list, element -> list
      auto e = pop();
      if (!e || stack.empty())
        return std::nullopt;
      out.marks.push_back(e->start);
      out.replaced.push_back(at);
      break;
    }
    case 's': { // SETITEM: dict, key, value -> dict
      auto v = pop(), k = pop();
      if (!v || !k || stack.empty())
        return std::nullopt;
      out.marks.push_back(k->start);
      out.replaced.push_back(at);
      break;
    }
    case 0x85:
    case 'Q': { // TUPLE1, BINPERSID: one -> one
      auto a = pop();
      if (!a)
        return std::nullopt;
      stack.push_back({a->start, false});
      break;
    }
    case 0x86:
    case 'R':
    case 0x81: { // TUPLE2, REDUCE, NEWOBJ: two -> one
      auto b = pop(), a = pop();
      if (!a || !b)
        return std::nullopt;
      stack.push_back({a->start, false});
      break;
    }
    case 0x87:
    case 0x92: { // TUPLE3, NEWOBJ_EX: three -> one
      auto c = pop(), b = pop(), a = pop();
      if (!a || !b || !c)
        return std::nullopt;
      stack.push_back({a->start, false});
      break;
    }
    case 'b': // BUILD: object, state -> object
      if (!pop() || stack.empty())
        return std::nullopt;
      break;
    case '0': // POP
      if (!pop())
        return std::nullopt;
      break;
    case '1': // POP_MARK
      if (!popToMark())
        return std::nullopt;
      break;
    case '2': // DUP
      if (stack.empty())
        return std::nullopt;
      stack.push_back({at, false});
      break;
    default:
      return std::nullopt;
    }
  }
  return std::nullopt; // no STOP
}

std::string applyPatches(const std::string& p, Patch patch) {
  std::sort(patch.marks.begin(), patch.marks.end());
  std::sort(patch.replaced.begin(), patch.replaced.end());
  std::string out;
  out.reserve(p.size() + patch.marks.size());
  std::size_t m = 0, r = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    while (m < patch.marks.size() && patch.marks[m] == i) {
      out.push_back('(');
      ++m;
    }
    char c = p[i];
    if (r < patch.replaced.size() && patch.replaced[r] == i) {
      c = c == 'a' ? 'e' : 'u';
      ++r;
    }
    out.push_back(c);
  }
  return out;
}

class StringReadAdapter final : public caffe2::serialize::ReadAdapterInterface {
public:
  explicit StringReadAdapter(const std::string& s) : s_(s) {}
  size_t size() const override { return s_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* = "") const override {
    if (pos >= s_.size())
      return 0;
    n = std::min<size_t>(n, s_.size() - pos);
    std::memcpy(buf, s_.data() + pos, n);
    return n;
  }

private:
  const std::string& s_;
};

c10::IValue ulpAway(const c10::IValue& v, at::Generator& gen) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined() || t.is_mkldnn() || !at::isFloatingType(t.scalar_type()) || t.numel() == 0)
      return v;
    const at::Tensor up = at::bernoulli(at::full(t.sizes(), 0.5, t.options()), gen).to(at::kBool);
    const double inf = std::numeric_limits<double>::infinity();
    at::Tensor moved = at::where(up, at::nextafter(t, at::full_like(t, inf)),
                                 at::nextafter(t, at::full_like(t, -inf)));
    // Zeros (a relu's, an image's padding) and subnormals stay: no rounding made them, and one
    // ulp away from zero is a subnormal, which x86 computes on ~100x slower (a segmentation
    // head's two noise runs took 27 s instead of 0.4).
    const double tiny = t.scalar_type() == at::kDouble ? std::numeric_limits<double>::min()
                        : t.scalar_type() == at::kHalf ? 6.103515625e-05
                                                       : std::numeric_limits<float>::min();
    moved = at::where(t.abs() < tiny, t, moved);
    return at::empty_like(t).copy_(moved); // in the input's layout
  }
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList().vec())
      out.push_back(ulpAway(t, gen).toTensor());
    return out;
  }
  if (v.isList()) {
    c10::impl::GenericList out(v.toList().elementType());
    for (const c10::IValue& e : v.toListRef())
      out.push_back(ulpAway(e, gen));
    return out;
  }
  if (v.isTuple()) {
    std::vector<c10::IValue> out;
    for (const c10::IValue& e : v.toTupleRef().elements())
      out.push_back(ulpAway(e, gen));
    return c10::ivalue::Tuple::create(std::move(out));
  }
  return v;
}

} // namespace

std::vector<c10::IValue> oneUlpAway(const std::vector<c10::IValue>& inputs, std::uint64_t draw) {
  at::Generator gen = at::detail::createCPUGenerator(0x5eed + draw);
  std::vector<c10::IValue> out;
  for (const c10::IValue& v : inputs)
    out.push_back(ulpAway(v, gen));
  return out;
}

c10::IValue unpickleTorchSave(const std::string& bytes) {
  caffe2::serialize::PyTorchStreamReader reader(std::make_unique<StringReadAdapter>(bytes));
  auto [ptr, size] = reader.getRecord("data.pkl");
  std::string pickle(static_cast<const char*>(ptr.get()), size);
  if (auto patch = findPatches(pickle); patch && !patch->replaced.empty())
    pickle = applyPatches(pickle, std::move(*patch));
  std::size_t read = 0;
  auto source = [&](char* buf, std::size_t n) -> std::size_t {
    n = std::min(n, pickle.size() - read);
    std::memcpy(buf, pickle.data() + read, n);
    read += n;
    return n;
  };
  auto record = [&](const std::string& name) {
    return std::get<0>(reader.getRecord("data/" + name));
  };
  torch::jit::Unpickler unpickler(source, nullptr, nullptr, record, c10::nullopt);
  unpickler.set_version(reader.version());
  return unpickler.parse_ivalue();
}

} // namespace xalloc::tspass
