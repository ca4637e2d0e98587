// isBuiltin / runBuiltin: the interpreter's own instructions, run by GraphRunner.
#include "builtins.h"

#include <torch/csrc/jit/ir/constants.h>

#include "xalloc/tspass/model_warnings.h"

namespace xalloc::profiler::detail {

using torch::jit::Node;

bool isBuiltin(const Node* n) {
  switch (n->kind()) {
  case c10::prim::ListUnpack:
  case c10::prim::ListConstruct:
  case c10::prim::TupleConstruct:
  case c10::prim::TupleUnpack:
  case c10::prim::TupleIndex:
  case c10::prim::TupleSlice:
  case c10::prim::DictConstruct:
  case c10::prim::CreateObject:
  case c10::prim::isinstance:
  case c10::prim::RaiseException:
  case c10::prim::unchecked_cast:
  case c10::prim::Uninitialized:
  case c10::aten::__is__:
  case c10::aten::__isnot__:
  case c10::aten::wait: // the consumer side of an async conversion (xrewrite --form fast)
  case c10::aten::warn: // `warnings.warn(...)` in the model's code
  case c10::prim::CallMethod:
  case c10::prim::Enter:
  case c10::prim::Exit:
    return true;
  default:
    return n->kind() == c10::Symbol::fromQualString("prim::NamedTupleConstruct");
  }
}

void runBuiltin(const Node* n, torch::jit::Stack& stack) {
  const auto k = n->kind();
  std::vector<c10::IValue> in = std::move(stack);
  stack.clear();
  if (k == c10::prim::ListUnpack) {
    auto list = in.at(0).toListRef();
    if (list.size() != n->outputs().size())
      throw std::runtime_error("expected " + std::to_string(n->outputs().size()) +
                               " elements in a list but found " + std::to_string(list.size()));
    stack.assign(list.begin(), list.end());
  } else if (k == c10::prim::ListConstruct) {
    c10::impl::GenericList list(n->output()->type()->expectRef<c10::ListType>().getElementType());
    list.reserve(in.size());
    for (auto& v : in)
      list.push_back(std::move(v));
    stack.emplace_back(std::move(list));
  } else if (k == c10::prim::TupleConstruct) {
    stack.emplace_back(c10::ivalue::Tuple::create(std::move(in)));
  } else if (k == c10::Symbol::fromQualString("prim::NamedTupleConstruct")) {
    stack.emplace_back(c10::ivalue::Tuple::createNamed(
        std::move(in), n->output()->type()->expect<c10::TupleType>()));
  } else if (k == c10::prim::TupleUnpack) {
    const auto& elems = in.at(0).toTupleRef().elements();
    stack.assign(elems.begin(), elems.end());
  } else if (k == c10::prim::TupleIndex) {
    const auto& elems = in.at(0).toTupleRef().elements();
    int64_t i = in.at(1).toInt();
    if (i < 0)
      i += static_cast<int64_t>(elems.size());
    if (i < 0 || i >= static_cast<int64_t>(elems.size()))
      throw std::out_of_range("tuple index out of range");
    stack.push_back(elems[static_cast<std::size_t>(i)]);
  } else if (k == c10::prim::TupleSlice) {
    const auto& elems = in.at(0).toTupleRef().elements();
    auto b = static_cast<std::size_t>(n->i(c10::attr::beg));
    auto e = static_cast<std::size_t>(n->i(c10::attr::end));
    std::vector<c10::IValue> part(elems.begin() + static_cast<std::ptrdiff_t>(b),
                                  elems.begin() + static_cast<std::ptrdiff_t>(e));
    stack.emplace_back(c10::ivalue::Tuple::create(std::move(part)));
  } else if (k == c10::prim::DictConstruct) {
    const auto& dt = n->output()->type()->expectRef<c10::DictType>();
    c10::impl::GenericDict dict(dt.getKeyType(), dt.getValueType());
    for (std::size_t i = 0; i + 1 < in.size(); i += 2)
      dict.insert_or_assign(in[i], in[i + 1]);
    stack.emplace_back(std::move(dict));
  } else if (k == c10::prim::CreateObject) {
    auto cls = n->output()->type()->expect<c10::ClassType>();
    auto cu = cls->compilation_unit();
    stack.emplace_back(
        c10::ivalue::Object::create(c10::StrongTypePtr(cu, cls), cls->numAttributes()));
  } else if (k == c10::prim::isinstance) {
    bool ok = false;
    for (const auto& t : n->tys(c10::attr::types))
      ok = ok || in.at(0).type()->isSubtypeOf(*t);
    stack.emplace_back(ok);
  } else if (k == c10::prim::RaiseException) {
    throw std::runtime_error("the model raised: " + (in.empty() || !in[0].isString()
                                                         ? std::string("an exception")
                                                         : in[0].toStringRef()));
  } else if (k == c10::prim::unchecked_cast) {
    stack.push_back(std::move(in.at(0)));
  } else if (k == c10::prim::Uninitialized) {
    stack.push_back(c10::IValue::uninitialized());
  } else if (k == c10::aten::__is__ || k == c10::aten::__isnot__) {
    bool same = in.at(0).is(in.at(1));
    stack.emplace_back(k == c10::aten::__is__ ? same : !same);
  } else if (k == c10::prim::CallMethod || k == c10::prim::Enter || k == c10::prim::Exit) {
    // A method of a TorchScript class object, such as the context manager of `with
    // torch.no_grad():` (its __enter__ and __exit__ switch grad mode), run by the JIT as its
    // interpreter would: Exit calls __exit__(self, None, None, None). Ops inside such a method
    // are timed as part of it, not one by one; module methods are inlined and never get here.
    const c10::intrusive_ptr<c10::ivalue::Object> obj = in.at(0).toObject();
    const std::string name = k == c10::prim::CallMethod ? n->s(c10::attr::name)
                             : k == c10::prim::Enter    ? "__enter__"
                                                        : "__exit__";
    if (k == c10::prim::Exit)
      in.resize(4); // self, then None for the exception's type, value and traceback
    obj->type()->getMethod(name).run(in);
    stack = std::move(in);
  } else if (k == c10::aten::warn) {
    // The profile runs the model many times: each message is shown once.
    tspass::reportModelWarning(in.empty() || !in[0].isString() ? "" : in[0].toStringRef());
  } else if (k == c10::aten::wait) {
    auto future = in.at(0).toFuture();
    future->wait();
    if (future->hasError())
      std::rethrow_exception(future->exception_ptr());
    stack.push_back(future->value());
  }
}

} // namespace xalloc::profiler::detail
