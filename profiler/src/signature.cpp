// Signatures of tensors, arguments and ops for the timing database.
#include "xalloc/profiler/signature.h"

#include <sstream>

#include <ATen/ATen.h>
#include <torch/csrc/jit/ir/ir.h>

#include "xalloc/torch_compat.h"

namespace xalloc::profiler {

std::string layoutSignature(const at::Tensor& t) {
  if (!t.defined())
    return "undefined";
  std::ostringstream s;
  s << compat::dtypeName(t.scalar_type()) << "[";
  for (int64_t d = 0; d < t.dim(); ++d)
    s << (d ? "," : "") << t.size(d);
  s << "]/[";
  for (int64_t d = 0; d < t.dim(); ++d)
    s << (d ? "," : "") << t.stride(d);
  s << "]+" << t.storage_offset() << "@" << t.device().str();
  if (t.requires_grad())
    s << "+grad";
  return s.str();
}

std::string argumentSignature(const c10::IValue& v) {
  if (v.isTensor())
    return v.toTensor().defined() ? layoutSignature(v.toTensor()) : "Undefined";
  if (v.isNone())
    return "None";
  if (v.isInt())
    return std::to_string(v.toInt());
  if (v.isBool())
    return v.toBool() ? "True" : "False";
  if (v.isDouble()) {
    std::ostringstream s;
    s.precision(17);
    s << v.toDouble();
    return s.str();
  }
  if (v.isString())
    return "'" + v.toStringRef() + "'";
  if (v.isDevice())
    return v.toDevice().str();
  if (v.isList() || v.isTuple()) {
    std::string s = v.isList() ? "[" : "(";
    auto elems = v.isList() ? v.toListRef().vec() : v.toTupleRef().elements().vec();
    for (std::size_t i = 0; i < elems.size(); ++i)
      s += (i ? "," : "") + argumentSignature(elems[i]);
    return s + (v.isList() ? "]" : ")");
  }
  return "<" + v.type()->str() + ">";
}

std::string opSignature(const torch::jit::Node* node, const std::vector<c10::IValue>& inputs) {
  std::string s = node->kind().toQualString();
  if (const c10::FunctionSchema* schema = node->maybeSchema())
    s += "." + (schema->overload_name().empty() ? std::string("default") : schema->overload_name());
  s += "(";
  for (std::size_t i = 0; i < inputs.size(); ++i)
    s += (i ? ", " : "") + argumentSignature(inputs[i]);
  return s + ")";
}

} // namespace xalloc::profiler
