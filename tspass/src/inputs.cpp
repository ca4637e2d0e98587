// Input specs and seeded input tensors.
#include "xalloc/tspass/inputs.h"

#include <cmath>
#include <cstdio>
#include <optional>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <nlohmann/json.hpp>

#include "xalloc/error.h"
#include "xalloc/formats/documents.h"
#include "xalloc/formats/json_reader.h"
#include "xalloc/torch_compat.h"
#include "xalloc/tspass/model_io.h"

#include <torch/csrc/jit/api/module.h>

namespace xalloc::tspass {

std::vector<std::int64_t> parseShape(const std::string& text, const std::string& flag) {
  std::vector<std::int64_t> shape;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find_first_of("x,", pos);
    std::string part = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    std::size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(part, &used);
    } catch (...) {
      used = 0;
    }
    if (part.empty() || used != part.size() || v < 0)
      throw InputError("", flag + ": cannot read '" + text +
                               "' as a shape (sizes separated by 'x', e.g. 4x64)");
    if (v == 0)
      throw InputError("", flag + ": '" + text +
                               "' has a size of 0: a tensor with no elements leaves nothing "
                               "to measure");
    shape.push_back(v);
    if (end == std::string::npos)
      break;
    pos = end + 1;
    if (pos == text.size())
      throw InputError("", flag + ": '" + text + "' ends with a separator");
  }
  return shape;
}

std::pair<double, double> parseRange(const std::string& text, const std::string& flag) {
  auto colon = text.find(':');
  try {
    if (colon != std::string::npos) {
      std::size_t a = 0, b = 0;
      double low = std::stod(text.substr(0, colon), &a);
      double high = std::stod(text.substr(colon + 1), &b);
      if (a == colon && b == text.size() - colon - 1 && high > low && std::isfinite(low) &&
          std::isfinite(high))
        return {low, high};
    }
  } catch (...) {
  }
  throw InputError("", flag + ": cannot read '" + text +
                           "' as LOW:HIGH, two finite numbers with HIGH > LOW");
}

std::vector<formats::InputSpec> specsFromFlags(const std::vector<std::string>& shapes,
                                               const std::vector<std::string>& dtypes,
                                               const std::vector<std::string>& ranges,
                                               const std::string& tool) {
  if (shapes.empty() && (!dtypes.empty() || !ranges.empty()))
    throw InputError(tool, "--input-dtype and --input-range need --input-shape");
  std::vector<formats::InputSpec> specs;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    formats::InputSpec s;
    s.name = "input" + std::to_string(i);
    s.shape = parseShape(shapes[i], "--input-shape");
    if (!dtypes.empty()) {
      s.dtype = dtypes[std::min(i, dtypes.size() - 1)];
      if (formats::dtypeSize(s.dtype) == 0)
        throw InputError(tool, "--input-dtype: unknown dtype '" + s.dtype + "'");
    }
    if (!ranges.empty()) {
      auto [low, high] = parseRange(ranges[std::min(i, ranges.size() - 1)], "--input-range");
      s.low = low;
      s.high = high;
    }
    specs.push_back(std::move(s));
  }
  return specs;
}

std::vector<formats::InputSpec> specFromExtraFiles(const std::map<std::string, std::string>& extra,
                                                   const std::string& model_path) {
  std::vector<formats::InputSpec> specs;
  auto it = extra.find(tspass::kExampleInputsFile);
  if (it == extra.end())
    return specs;
  const std::string name = model_path + ":" + tspass::kExampleInputsFile;
  nlohmann::json j = formats::parseJson(it->second, name);
  try {
    formats::JsonReader(j).at("inputs").forEach(
        [&](const formats::JsonReader& e) { specs.push_back(formats::readInputSpec(e)); });
  } catch (const formats::FormatError& e) {
    throw formats::inputErrorAt(e, name);
  }
  return specs;
}

std::vector<c10::IValue> makeInputs(const std::vector<formats::InputSpec>& specs,
                                    std::uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  std::vector<c10::IValue> out;
  for (const auto& s : specs) {
    auto dtype = compat::parseDtype(s.dtype);
    if (!dtype)
      throw InputError("", "unknown input dtype '" + s.dtype + "'");
    auto opts = at::TensorOptions().dtype(*dtype);
    // What libtorch refuses (a size past memory or int64, a range the dtype cannot hold) is the
    // user's input: said with the input's name and shape, not as an internal error.
    std::string shape;
    for (std::int64_t d : s.shape)
      shape += (shape.empty() ? "" : "x") + std::to_string(d);
    const std::string what =
        s.name + " (" + s.dtype + ", " + (shape.empty() ? "scalar" : shape) + ")";
    at::Tensor t;
    try {
      if (at::isIntegralType(*dtype, /*includeBool=*/true)) {
        // Bounds past int64 have no integer cast (undefined behaviour): said as such.
        const double lo = std::ceil(s.low.value_or(0));
        const double hi = std::ceil(s.high.value_or(*dtype == at::kBool ? 2 : 100));
        constexpr double kLimit = 9223372036854775807.0; // 2^63, the first double past int64
        if (!(lo >= -kLimit && lo < kLimit && hi >= -kLimit && hi < kLimit)) {
          char range[64];
          std::snprintf(range, sizeof range, "%g:%g", s.low.value_or(0),
                        s.high.value_or(*dtype == at::kBool ? 2 : 100));
          throw InputError("", what + ": the range " + range +
                                   " reaches past int64 (integer bounds are at most 2^63 in "
                                   "magnitude)");
        }
        auto low = static_cast<std::int64_t>(lo);
        auto high = static_cast<std::int64_t>(hi);
        if (high <= low) {
          char range[64];
          std::snprintf(range, sizeof range, "%g:%g", *s.low, *s.high);
          throw InputError("", what + ": the range " + range + " holds no integer");
        }
        t = at::randint(low, high, s.shape, gen, opts);
      } else if (s.low && s.high) {
        t = at::empty(s.shape, opts).uniform_(*s.low, *s.high, gen);
      } else {
        t = at::randn(s.shape, gen, opts);
      }
    } catch (const c10::Error& e) {
      throw InputError("", "cannot make the input " + what + ": " +
                               firstLine(e.what_without_backtrace()));
    }
    out.emplace_back(std::move(t));
  }
  return out;
}

namespace {
// `v` as a value of type `t`, rebuilt where unpickling left it loosely typed (a list of tuples
// reads back as List[Any], which a method call refuses for List[Tuple[Tensor, Tensor]]);
// nullopt when its contents do not fit `t`.
std::optional<c10::IValue> asType(const c10::IValue& v, const c10::TypePtr& t) {
  if (v.type()->isSubtypeOf(*t))
    return v;
  if (t->kind() == c10::TypeKind::FloatType && v.isInt()) // as a call from Python converts it
    return c10::IValue(static_cast<double>(v.toInt()));
  if (auto opt = t->cast<c10::OptionalType>())
    return v.isNone() ? std::optional<c10::IValue>(v) : asType(v, opt->getElementType());
  if (auto lt = t->cast<c10::ListType>(); lt && v.isList()) {
    c10::impl::GenericList out(lt->getElementType());
    for (const c10::IValue& e : v.toListRef()) {
      auto typed = asType(e, lt->getElementType());
      if (!typed)
        return std::nullopt;
      out.push_back(std::move(*typed));
    }
    return c10::IValue(out);
  }
  if (auto tt = t->cast<c10::TupleType>(); tt && v.isTuple()) {
    const auto& elems = v.toTupleRef().elements();
    if (elems.size() != tt->elements().size())
      return std::nullopt;
    std::vector<c10::IValue> out;
    for (std::size_t i = 0; i < elems.size(); ++i) {
      auto typed = asType(elems[i], tt->elements()[i]);
      if (!typed)
        return std::nullopt;
      out.push_back(std::move(*typed));
    }
    return c10::IValue(c10::ivalue::Tuple::create(std::move(out)));
  }
  if (auto dt = t->cast<c10::DictType>(); dt && v.isGenericDict()) {
    c10::impl::GenericDict out(dt->getKeyType(), dt->getValueType());
    for (const auto& kv : v.toGenericDict()) {
      auto key = asType(kv.key(), dt->getKeyType());
      auto value = asType(kv.value(), dt->getValueType());
      if (!key || !value)
        return std::nullopt;
      out.insert(std::move(*key), std::move(*value));
    }
    return c10::IValue(out);
  }
  return std::nullopt;
}

// A value's type by its contents: a list unpickled as List[Any] shows as List[int].
std::string describeValue(const c10::IValue& v) {
  if (v.isList() && !v.toListRef().empty())
    return "List[" + describeValue(v.toListRef().front()) + "]";
  if (v.isTuple()) {
    std::string s = "Tuple[";
    for (const auto& e : v.toTupleRef().elements())
      s += (s.size() > 6 ? ", " : "") + describeValue(e);
    return s + "]";
  }
  if (v.isGenericDict() && !v.toGenericDict().empty()) {
    const auto first = v.toGenericDict().begin();
    return "Dict[" + describeValue(first->key()) + ", " + describeValue(first->value()) + "]";
  }
  return v.type()->annotation_str();
}
} // namespace

std::vector<c10::IValue> methodInputs(torch::jit::Module& module, const std::string& method,
                                      std::vector<c10::IValue> tensors, const std::string& path) {
  const auto& schema = module.get_method(method).function().getSchema();
  const auto& args = schema.arguments(); // args[0] is self
  std::vector<c10::IValue> inputs{module._ivalue()};
  // A method whose first input is a list (a detection model's `images: List[Tensor]`) given
  // values that only fit together: they are that list. A file saved as torch.save([a, b]) reads
  // back as the inputs a and b, one per argument, and torch.save([a]) as the input a: the list
  // of images a detection model takes is made here.
  if (!tensors.empty() && args.size() > 1 && args[1].type()->cast<c10::ListType>() &&
      !asType(tensors.front(), args[1].type())) {
    c10::impl::GenericList all(c10::AnyType::get());
    for (const c10::IValue& v : tensors)
      all.push_back(v);
    if (auto list = asType(c10::IValue(all), args[1].type()))
      tensors = {std::move(*list)};
  }
  if (tensors.size() > args.size() - 1)
    throw InputError(path, "'" + method + "' takes " + std::to_string(args.size() - 1) +
                               (args.size() == 2 ? " input but " : " inputs but ") +
                               std::to_string(tensors.size()) + " were given");
  for (std::size_t i = 1; i < args.size(); ++i) {
    const c10::Argument& arg = args[i];
    const bool takes_tensor = c10::TensorType::get()->isSubtypeOf(*arg.type());
    if (i - 1 < tensors.size()) {
      // Only what is surely wrong: a tensor for an argument that takes none, or the reverse
      // (values unpickled from --input-file carry loose types, such as Dict[Any, Any]).
      const c10::IValue& v = tensors[i - 1];
      const bool only_tensor = arg.type()->kind() == c10::TypeKind::TensorType;
      if ((v.isTensor() && !takes_tensor) || (!v.isTensor() && only_tensor))
        throw InputError(path, "'" + method + "' takes input '" + arg.name() + "' of type " +
                                   arg.type()->annotation_str() + ", but was given " +
                                   v.type()->annotation_str() +
                                   (takes_tensor ? std::string()
                                                 : " (--input-shape describes tensors; pass "
                                                   "other values with --input-file)"));
      auto typed = asType(v, arg.type());
      if (!typed)
        throw InputError(path, "'" + method + "' takes input '" + arg.name() + "' of type " +
                                   arg.type()->annotation_str() + ", but was given " +
                                   describeValue(v));
      inputs.push_back(std::move(*typed));
    } else if (arg.default_value()) {
      inputs.push_back(*arg.default_value());
    } else if (takes_tensor) {
      throw InputError(path, "'" + method + "' needs input '" + arg.name() +
                                 "': give --input-shape for each input, or store example "
                                 "inputs in the model's extra file " +
                                 tspass::kExampleInputsFile);
    } else {
      throw InputError(path, "'" + method + "' needs input '" + arg.name() + "' of type " +
                                 arg.type()->annotation_str() +
                                 ", which --input-shape cannot describe: save the inputs with "
                                 "torch.save((...)) and pass --input-file");
    }
  }
  return inputs;
}

std::vector<c10::IValue> parseInputFile(const std::string& bytes, const std::string& path) {
  c10::IValue v;
  try {
    v = unpickleTorchSave(bytes);
  } catch (const std::exception& e) {
    throw InputError(path, "cannot read inputs (expected values saved with torch.save: a "
                           "tensor, or a tuple, list or dict of them, one per argument): " +
                               firstLine(e.what()));
  }
  if (v.isTuple())
    return v.toTupleRef().elements().vec();
  if (v.isList())
    return v.toListRef().vec();
  return {v};
}

} // namespace xalloc::tspass
