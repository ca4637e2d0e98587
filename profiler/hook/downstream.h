// Consumers followed downstream by libxprof_hook.so. When a value's other layout changes the
// layout of a consumer's output (a transpose of a value made contiguous), that output as the
// other layout gives it stands beside the program's own output (a shadow) while the program's
// output lives. A later op that reads the program's output is re-run with the shadow in its
// place, and its timing goes under the first consumer's `downstream` in the value's record.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/util/intrusive_ptr.h>

#include "xalloc/formats/profile.h"

namespace xprof_hook {

/// (op id, input index) pairs from a record's consumer down to a consumer followed after it.
using Path = std::vector<std::pair<std::int64_t, std::int64_t>>;

struct Shadow {
  at::Tensor other;          // the output as the value's other layout gives it
  bool to_contiguous = true; // the other layout is the value made contiguous
  std::int64_t value = 0;    // the record the first consumer read
  Path path;                 // the consumer that made this output
};

class Downstream {
public:
  /// How many levels of consumers are followed below a record's own consumer.
  static constexpr std::size_t kDepth = 3;

  /// The consumer at `path` of `value` made `real` (its tensor outputs, flattened); `other` are
  /// its outputs with the value's other layout (IValues as the op returned them). Each output
  /// whose layout differs is shadowed.
  void shadow(const std::vector<at::Tensor>& real, const std::vector<c10::IValue>& other,
              bool to_contiguous, std::int64_t value, const Path& path);
  /// The shadow of `t` when `t` is such an output and still the one shadowed; else nullptr.
  const Shadow* find(const at::Tensor& t);
  /// True the first time the consumer at `path` of `value` is seen.
  bool firstVisit(std::int64_t value, const Path& path);
  /// A consumer followed: `timing` goes under the consumer at `parent` of `value`.
  void add(std::int64_t value, Path parent, xalloc::formats::ConsumerTiming timing);
  /// Puts each consumer followed under its parent in `records`; every tensor is let go.
  void attach(std::vector<xalloc::formats::Record>& records);

private:
  using TensorWeak = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
  struct Entry {
    TensorWeak weak;
    Shadow shadow;
  };
  struct Followed {
    std::int64_t value;
    Path parent;
    xalloc::formats::ConsumerTiming timing;
  };
  std::unordered_map<c10::TensorImpl*, Entry> shadows_;
  std::set<std::pair<std::int64_t, Path>> seen_;
  std::vector<Followed> followed_;
};

} // namespace xprof_hook
