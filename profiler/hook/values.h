// The tensor values libxprof_hook.so records: a tensor is its TensorImpl, held weakly so an
// address is never reused while we remember it; the values over each storage (a write reaches
// them all); the source of each conversion, kept to re-run its consumers without it; and how
// often each consumer read each value, counted on every call, measured or not.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include "xalloc/formats/profile.h"

namespace xprof_hook {

struct Value {
  xalloc::formats::Record rec;
  std::set<std::pair<std::int64_t, std::int64_t>> consumers_seen; // (op id, input index)
};

class ValueTable {
public:
  Value& operator[](std::int64_t v) { return values_[static_cast<std::size_t>(v)]; }

  /// The value a tensor argument of op `site` is: one an op produced (while it lives), else a
  /// value of its own for this site and argument (a parameter, or a tensor made where we do not
  /// look). Counts the read.
  std::int64_t argument(const at::Tensor& t, std::int64_t site, std::int64_t arg);
  /// The value output `index` of op `site` is: one per site and output, whichever call made it.
  std::int64_t output(const at::Tensor& t, std::int64_t site, std::int64_t index);

  /// A call past the measured ones: counts its read of `t` when `t` is a value we follow.
  void countRead(const at::Tensor& t, std::int64_t site, std::int64_t arg);
  /// A call past the measured ones made `t`: it is `value` again when it has the layout measured
  /// (a loop's later trips); other shapes are not what the profile describes.
  void follow(const at::Tensor& t, std::int64_t value);

  /// A write to `t`'s storage while values over it are alive: converting one of them earlier
  /// would snapshot data the write then changes, so none of them may be converted or left
  /// unconverted by an edit. Views made after the write are not affected.
  void markWritten(const at::Tensor& t);

  /// `dst` is the output of a conversion of `src` (not contiguous), kept while `dst` lives.
  void keepSource(const at::Tensor& dst, const at::Tensor& src);
  /// The source of the conversion that made `t`, or an undefined tensor.
  at::Tensor sourceOf(const at::Tensor& t) const;

  /// The records, each consumer with the reads counted; every tensor is let go.
  std::vector<xalloc::formats::Record> finish();

private:
  using TensorWeak = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
  using StorageWeak = c10::weak_intrusive_ptr<c10::StorageImpl>;
  struct Live {
    TensorWeak weak;
    std::int64_t value = 0;
  };

  std::int64_t storageOf(const at::Tensor& t);
  void prune();
  Value& newValue(const at::Tensor& t);
  void remember(const at::Tensor& t, std::int64_t value);

  std::deque<Value> values_; // stable references
  std::unordered_map<c10::TensorImpl*, Live> live_;
  std::size_t prune_at_ = 4096;
  std::unordered_map<c10::StorageImpl*, std::pair<StorageWeak, std::int64_t>> storages_;
  std::int64_t next_storage_ = 0;
  std::unordered_map<c10::TensorImpl*, std::pair<TensorWeak, at::Tensor>> conversion_sources_;
  std::map<std::string, std::int64_t> external_, produced_;
  std::unordered_map<std::int64_t, std::vector<std::pair<TensorWeak, std::int64_t>>> by_storage_;
  // (value, consumer op, argument) -> calls that read it
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, std::int64_t> reads_;
};

} // namespace xprof_hook
