// bitwiseEqual for tensors, lists, tuples, dicts and scalars.
#include "xalloc/tspass/value_compare.h"

#include <cstring>
#include <vector>

#include <ATen/ATen.h>

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

} // namespace xalloc::tspass
