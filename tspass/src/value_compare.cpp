// bitwiseEqual for tensors, lists, tuples, dicts and scalars.
#include "xalloc/tspass/value_compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>

namespace xalloc::tspass {

namespace {
bool tensorsEqual(const at::Tensor& a, const at::Tensor& b) {
  if (a.defined() != b.defined())
    return false;
  if (!a.defined())
    return true;
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes() || a.device() != b.device())
    return false;
  at::Tensor ca = a.contiguous().cpu();
  at::Tensor cb = b.contiguous().cpu();
  const auto bytes = static_cast<std::size_t>(ca.numel()) * ca.element_size();
  return bytes == 0 || std::memcmp(ca.data_ptr(), cb.data_ptr(), bytes) == 0;
}
} // namespace

bool bitwiseEqual(const c10::IValue& a, const c10::IValue& b) {
  if (a.isTensor() && b.isTensor())
    return tensorsEqual(a.toTensor(), b.toTensor());
  if (a.isTuple() && b.isTuple()) {
    const auto& ea = a.toTupleRef().elements();
    const auto& eb = b.toTupleRef().elements();
    if (ea.size() != eb.size())
      return false;
    for (std::size_t i = 0; i < ea.size(); ++i)
      if (!bitwiseEqual(ea[i], eb[i]))
        return false;
    return true;
  }
  if (a.isList() && b.isList()) {
    auto la = a.toListRef();
    auto lb = b.toListRef();
    if (la.size() != lb.size())
      return false;
    for (std::size_t i = 0; i < la.size(); ++i)
      if (!bitwiseEqual(la[i], lb[i]))
        return false;
    return true;
  }
  if (a.isGenericDict() && b.isGenericDict()) {
    // In insertion order, as a dict's outputs come out of the model (detection results).
    const auto da = a.toGenericDict();
    const auto db = b.toGenericDict();
    if (da.size() != db.size())
      return false;
    for (auto ia = da.begin(), ib = db.begin(); ia != da.end(); ++ia, ++ib)
      if (!bitwiseEqual(ia->key(), ib->key()) || !bitwiseEqual(ia->value(), ib->value()))
        return false;
    return true;
  }
  if (a.isDouble() && b.isDouble()) {
    double x = a.toDouble(), y = b.toDouble();
    return std::memcmp(&x, &y, sizeof x) == 0;
  }
  if (a.isNone() || b.isNone())
    return a.isNone() && b.isNone();
  if (a.isInt() && b.isInt())
    return a.toInt() == b.toInt();
  if (a.isBool() && b.isBool())
    return a.toBool() == b.toBool();
  if (a.isString() && b.isString())
    return a.toStringRef() == b.toStringRef();
  return false; // anything else: not shown to be equal
}

namespace {
std::vector<c10::IValue> leaves(const c10::IValue& v) {
  std::vector<c10::IValue> out;
  if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements())
      for (auto& l : leaves(e))
        out.push_back(std::move(l));
  } else if (v.isList()) {
    for (const auto& e : v.toListRef())
      for (auto& l : leaves(e))
        out.push_back(std::move(l));
  } else if (v.isGenericDict()) {
    for (const auto& e : v.toGenericDict())
      for (auto& l : leaves(e.value()))
        out.push_back(std::move(l));
  } else {
    out.push_back(v);
  }
  return out;
}

// NaN where the reference has NaN, and the same infinity where it has one, count as equal (0);
// anything else non-finite is an unbounded error (+inf or NaN: the caller stops there).
inline double elementDiff(double r, double y) {
  if ((std::isnan(r) && std::isnan(y)) || (std::isinf(r) && r == y))
    return 0.0;
  return std::abs(y - r);
}

// Element by element, each relative to itself, with a floor for elements near zero: the
// magnitude below which the 10% smallest of the elements that changed lie (elements equal in
// both, such as a mask's -1e9, do not count). One large element, or many, cannot raise it
// above what the small ones are.
template <typename T> double realError(const T* ref, const T* x, std::int64_t n) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  double worst = 0;
  std::vector<double> changed; // the magnitudes of the elements that changed
  for (std::int64_t i = 0; i < n; ++i) {
    const double r = static_cast<double>(ref[i]);
    const double d = elementDiff(r, static_cast<double>(x[i]));
    if (!std::isfinite(d))
      return kInf;
    worst = std::max(worst, d);
    if (d > 0 && r != 0) // a finite d > 0 has a finite r (elementDiff)
      changed.push_back(std::abs(r));
  }
  if (worst == 0)
    return 0.0;
  if (changed.empty())
    return kInf; // every element that changed was 0 in the reference
  const std::size_t k = std::max<std::size_t>(1, changed.size() / 10) - 1;
  std::nth_element(changed.begin(), changed.begin() + static_cast<std::ptrdiff_t>(k),
                   changed.end());
  const double floor = changed[k];
  double out = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double r = static_cast<double>(ref[i]);
    const double d = elementDiff(r, static_cast<double>(x[i]));
    if (d > 0)
      out = std::max(out, d / std::max(std::abs(r), floor));
  }
  return out;
}

// Complex tensors, rare enough for ATen's ops: the same rule on each element's modulus.
double complexError(const at::Tensor& r, const at::Tensor& y) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  at::Tensor rd = r.cpu().to(at::kComplexDouble).reshape({-1});
  at::Tensor yd = y.cpu().to(at::kComplexDouble).reshape({-1});
  at::Tensor same_special = (rd.isnan() & yd.isnan()) | (rd.isinf() & (rd == yd));
  rd = at::where(same_special, at::zeros_like(rd), rd);
  yd = at::where(same_special, at::zeros_like(yd), yd);
  const at::Tensor diff = (yd - rd).abs();
  const double worst = diff.max().item<double>();
  if (worst == 0)
    return 0.0;
  if (!std::isfinite(worst))
    return kInf;
  const at::Tensor mag = rd.abs();
  const at::Tensor changed = mag.masked_select((diff > 0) & (mag > 0));
  if (changed.numel() == 0)
    return kInf;
  const std::int64_t k = std::max<std::int64_t>(1, changed.numel() / 10);
  const double floor = std::get<0>(changed.kthvalue(k)).item<double>();
  return (diff / at::clamp_min(mag, floor)).max().item<double>();
}

double tensorError(const at::Tensor& ref, const at::Tensor& x) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (ref.defined() != x.defined())
    return kInf;
  if (!ref.defined() || ref.numel() == 0)
    return ref.defined() && x.sizes() != ref.sizes() ? kInf : 0.0;
  if (ref.sizes() != x.sizes() || ref.scalar_type() != x.scalar_type())
    return kInf;
  at::Tensor r = ref.is_mkldnn() ? ref.to_dense() : ref;
  at::Tensor y = x.is_mkldnn() ? x.to_dense() : x;
  if (!at::isFloatingType(r.scalar_type()) && !at::isComplexType(r.scalar_type()))
    return at::equal(r.cpu(), y.cpu()) ? 0.0 : kInf;
  if (at::isComplexType(r.scalar_type()))
    return complexError(r, y);
  // Two passes over the two tensors in memory order (both made contiguous), in double: a
  // detector's region hands on 10 million elements, where a dozen ATen ops in double (and a
  // kthvalue) took 3 s a comparison.
  const at::Tensor rc = r.cpu().contiguous();
  const at::Tensor yc = y.cpu().contiguous();
  double result = kInf;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, rc.scalar_type(), "tensor_error", [&] {
    result = realError(rc.data_ptr<scalar_t>(), yc.data_ptr<scalar_t>(), rc.numel());
  });
  return result;
}
} // namespace

namespace {
// The largest `tensor_error` over the outputs' tensors, leaf by leaf; other leaves count 0 when
// equal and +inf when not, and so does another number of leaves.
template <class F>
double worstLeaf(const c10::IValue& reference, const c10::IValue& x, F tensor_error) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const auto a = leaves(reference);
  const auto b = leaves(x);
  if (a.size() != b.size())
    return kInf;
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double e = a[i].isTensor() && b[i].isTensor()
                         ? tensor_error(a[i].toTensor(), b[i].toTensor())
                         : (bitwiseEqual(a[i], b[i]) ? 0.0 : kInf);
    worst = std::max(worst, e);
  }
  return worst;
}
} // namespace

double maxRelativeError(const c10::IValue& reference, const c10::IValue& x) {
  return worstLeaf(reference, x, tensorError);
}

double maxSortedError(const c10::IValue& reference, const c10::IValue& x) {
  auto sorted = [](const at::Tensor& t) {
    if (!t.defined() || t.is_mkldnn() || t.is_complex())
      return t;
    const at::Tensor flat =
        t.scalar_type() == at::kBool ? t.reshape({-1}).to(at::kByte) : t.reshape({-1});
    return std::get<0>(flat.sort(/*stable=*/false, /*dim=*/0));
  };
  return worstLeaf(reference, x, [&](const at::Tensor& r, const at::Tensor& y) {
    return r.defined() && y.defined() && r.sizes() == y.sizes() ? tensorError(sorted(r), sorted(y))
                                                                : tensorError(r, y);
  });
}

double maxRelativeError(const std::vector<c10::IValue>& reference,
                        const std::vector<c10::IValue>& x) {
  if (reference.size() != x.size())
    return std::numeric_limits<double>::infinity();
  double worst = 0;
  for (std::size_t i = 0; i < reference.size(); ++i)
    worst = std::max(worst, maxRelativeError(reference[i], x[i]));
  return worst;
}

namespace {
bool sameLayoutOf(const c10::IValue& a, const c10::IValue& b) {
  if (a.isTensor() && b.isTensor()) {
    const at::Tensor& x = a.toTensor();
    const at::Tensor& y = b.toTensor();
    if (!x.defined() || !y.defined())
      return x.defined() == y.defined();
    if (x.sizes() != y.sizes())
      return false;
    for (int64_t d = 0; d < x.dim(); ++d)
      if (x.size(d) > 1 && x.stride(d) != y.stride(d))
        return false; // a size-1 dimension's stride is never used
    return true;
  }
  if (a.isTuple() && b.isTuple())
    return xalloc::tspass::sameLayout(a.toTupleRef().elements().vec(),
                                      b.toTupleRef().elements().vec());
  if (a.isList() && b.isList())
    return xalloc::tspass::sameLayout(a.toListRef().vec(), b.toListRef().vec());
  if (a.isGenericDict() && b.isGenericDict()) {
    std::vector<c10::IValue> va, vb;
    for (const auto& e : a.toGenericDict())
      va.push_back(e.value());
    for (const auto& e : b.toGenericDict())
      vb.push_back(e.value());
    return xalloc::tspass::sameLayout(va, vb);
  }
  return true;
}
} // namespace

bool sameLayout(const std::vector<c10::IValue>& a, const std::vector<c10::IValue>& b) {
  if (a.size() != b.size())
    return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!sameLayoutOf(a[i], b[i]))
      return false;
  return true;
}

bool bitwiseEqual(const std::vector<c10::IValue>& a, const std::vector<c10::IValue>& b) {
  if (a.size() != b.size())
    return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!bitwiseEqual(a[i], b[i]))
      return false;
  return true;
}

bool constantFloatOutputs(const c10::IValue& v) {
  bool any = false;
  for (const c10::IValue& l : leaves(v)) {
    if (!l.isTensor())
      continue;
    const at::Tensor& t = l.toTensor();
    if (!t.defined() || !t.is_floating_point() || t.numel() == 0)
      continue;
    any = true;
    const at::Tensor flat = t.detach().reshape({-1});
    if (t.numel() > 1 && !at::equal(flat, flat[0].expand_as(flat)))
      return false; // (NaN never equals: not constant either)
  }
  return any;
}

std::int64_t tensorElements(const c10::IValue& v) {
  std::int64_t n = 0;
  for (const c10::IValue& l : leaves(v))
    if (l.isTensor() && l.toTensor().defined())
      n += l.toTensor().numel();
  return n;
}

} // namespace xalloc::tspass
