// ValueTable (values.h): the values libxprof_hook.so records, and who read them how often.
#include "values.h"

#include <algorithm>

#include "xalloc/profiler/conversion_cost.h"

namespace xprof_hook {

namespace prof = xalloc::profiler;

std::int64_t ValueTable::storageOf(const at::Tensor& t) {
  if (!t.has_storage())
    return -1;
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  auto it = storages_.find(s);
  if (it != storages_.end() && !it->second.first.expired())
    return it->second.second;
  const std::int64_t id = next_storage_++;
  storages_.insert_or_assign(s, std::make_pair(t.storage().getWeakStorageImpl(), id));
  return id;
}

void ValueTable::prune() {
  if (live_.size() < prune_at_)
    return;
  for (auto it = live_.begin(); it != live_.end();)
    it = it->second.weak.expired() ? live_.erase(it) : std::next(it);
  for (auto it = by_storage_.begin(); it != by_storage_.end();) {
    auto& list = it->second;
    list.erase(
        std::remove_if(list.begin(), list.end(), [](const auto& e) { return e.first.expired(); }),
        list.end());
    it = list.empty() ? by_storage_.erase(it) : std::next(it);
  }
  for (auto it = storages_.begin(); it != storages_.end();)
    it = it->second.first.expired() ? storages_.erase(it) : std::next(it);
  for (auto it = conversion_sources_.begin(); it != conversion_sources_.end();)
    it = it->second.first.expired() ? conversion_sources_.erase(it) : std::next(it);
  prune_at_ = std::max<std::size_t>(4096, 2 * live_.size());
}

Value& ValueTable::newValue(const at::Tensor& t) {
  values_.emplace_back();
  Value& v = values_.back();
  v.rec.id = static_cast<std::int64_t>(values_.size() - 1);
  v.rec.layout = prof::layoutOf(t);
  v.rec.contiguous = t.is_contiguous();
  v.rec.bytes = t.numel() * static_cast<std::int64_t>(t.element_size());
  v.rec.storage_id = storageOf(t);
  v.rec.storage_bytes =
      t.has_storage() ? static_cast<std::int64_t>(t.storage().nbytes()) : v.rec.bytes;
  return v;
}

void ValueTable::remember(const at::Tensor& t, std::int64_t value) {
  prune();
  auto [it, fresh] =
      live_.try_emplace(t.unsafeGetTensorImpl(), Live{TensorWeak(t.getIntrusivePtr()), value});
  if (!fresh && it->second.value == value && !it->second.weak.expired())
    return;
  it->second = Live{TensorWeak(t.getIntrusivePtr()), value};
  by_storage_[storageOf(t)].emplace_back(TensorWeak(t.getIntrusivePtr()), value);
}

std::int64_t ValueTable::argument(const at::Tensor& t, std::int64_t site, std::int64_t arg) {
  std::int64_t id;
  auto it = live_.find(t.unsafeGetTensorImpl());
  if (it != live_.end() && !it->second.weak.expired()) {
    id = it->second.value;
  } else {
    const std::string key = std::to_string(site) + ":" + std::to_string(arg);
    auto ext = external_.find(key);
    if (ext != external_.end()) {
      id = ext->second;
    } else {
      Value& v = newValue(t);
      v.rec.origin = t.requires_grad() && t.is_leaf() ? xalloc::formats::Origin::Attribute
                                                      : xalloc::formats::Origin::Input;
      v.rec.name = v.rec.origin == xalloc::formats::Origin::Attribute ? "param" : "input";
      v.rec.first_use = site;
      v.rec.last_use = site;
      id = v.rec.id;
      external_.emplace(key, id);
    }
    remember(t, id);
  }
  ++reads_[{id, site, arg}];
  return id;
}

std::int64_t ValueTable::output(const at::Tensor& t, std::int64_t site, std::int64_t index) {
  const std::string key = std::to_string(site) + "#" + std::to_string(index);
  auto it = produced_.find(key);
  std::int64_t id;
  if (it != produced_.end()) {
    id = it->second;
  } else {
    Value& v = newValue(t);
    v.rec.producer_op = site;
    v.rec.output_index = index;
    v.rec.origin = xalloc::formats::Origin::Op;
    v.rec.name = "v" + std::to_string(v.rec.id);
    v.rec.first_use = site;
    v.rec.last_use = site;
    id = v.rec.id;
    produced_.emplace(key, id);
  }
  remember(t, id);
  return id;
}

void ValueTable::countRead(const at::Tensor& t, std::int64_t site, std::int64_t arg) {
  auto it = live_.find(t.unsafeGetTensorImpl());
  if (it != live_.end() && !it->second.weak.expired())
    ++reads_[{it->second.value, site, arg}];
}

void ValueTable::follow(const at::Tensor& t, std::int64_t value) {
  const xalloc::formats::Record& r = (*this)[value].rec;
  if (t.sizes().equals(r.layout.sizes) && t.strides().equals(r.layout.strides) &&
      t.numel() * static_cast<std::int64_t>(t.element_size()) == r.bytes)
    remember(t, value);
}

void ValueTable::markWritten(const at::Tensor& t) {
  auto it = by_storage_.find(storageOf(t));
  if (it == by_storage_.end())
    return;
  for (const auto& [weak, value] : it->second)
    if (!weak.expired())
      (*this)[value].rec.has_writers = true;
}

void ValueTable::keepSource(const at::Tensor& dst, const at::Tensor& src) {
  conversion_sources_.insert_or_assign(dst.unsafeGetTensorImpl(),
                                       std::make_pair(TensorWeak(dst.getIntrusivePtr()), src));
}

at::Tensor ValueTable::sourceOf(const at::Tensor& t) const {
  auto src = conversion_sources_.find(t.unsafeGetTensorImpl());
  if (src != conversion_sources_.end() && !src->second.first.expired())
    return src->second.second;
  return {};
}

std::vector<xalloc::formats::Record> ValueTable::finish() {
  conversion_sources_.clear();
  live_.clear();
  by_storage_.clear();
  std::vector<xalloc::formats::Record> out;
  for (auto& v : values_) {
    for (auto& c : v.rec.consumers) {
      auto n = reads_.find({v.rec.id, c.op_id, c.input_index});
      c.reads = n == reads_.end() ? 1 : std::max<std::int64_t>(1, n->second);
    }
    out.push_back(v.rec);
  }
  return out;
}

} // namespace xprof_hook
