// Consumers followed downstream by libxprof_hook.so (see downstream.h).
#include "downstream.h"

#include <algorithm>
#include <map>

#include "replay.h"

namespace xprof_hook {

void Downstream::shadow(const std::vector<at::Tensor>& real, const std::vector<c10::IValue>& other,
                        bool to_contiguous, std::int64_t value, const Path& path) {
  // Outputs the program has let go of are forgotten (their address may come back).
  for (auto it = shadows_.begin(); it != shadows_.end();)
    it = it->second.weak.expired() ? shadows_.erase(it) : std::next(it);
  std::vector<at::Tensor> flat;
  for (const c10::IValue& v : other)
    forEachTensor(v, [&](const at::Tensor& t) { flat.push_back(t); });
  if (flat.size() != real.size())
    return; // not the outputs the program got: nothing to pair
  for (std::size_t i = 0; i < real.size(); ++i) {
    const at::Tensor& a = real[i];
    const at::Tensor& b = flat[i];
    if (a.sizes() != b.sizes() || a.strides() == b.strides())
      continue; // the same layout: what reads it cannot tell
    shadows_.insert_or_assign(
        a.unsafeGetTensorImpl(),
        Entry{TensorWeak(a.getIntrusivePtr()), Shadow{b, to_contiguous, value, path}});
  }
}

const Shadow* Downstream::find(const at::Tensor& t) {
  auto it = shadows_.find(t.unsafeGetTensorImpl());
  if (it == shadows_.end())
    return nullptr;
  if (it->second.weak.expired()) {
    shadows_.erase(it);
    return nullptr;
  }
  return &it->second.shadow;
}

bool Downstream::firstVisit(std::int64_t value, const Path& path) {
  return seen_.insert({value, path}).second;
}

void Downstream::add(std::int64_t value, Path parent, xalloc::formats::ConsumerTiming timing) {
  followed_.push_back({value, std::move(parent), std::move(timing)});
}

void Downstream::attach(std::vector<xalloc::formats::Record>& records) {
  shadows_.clear();
  std::map<std::int64_t, std::size_t> by_id;
  for (std::size_t i = 0; i < records.size(); ++i)
    by_id[records[i].id] = i;
  // Parents before the consumers followed under them.
  std::stable_sort(followed_.begin(), followed_.end(), [](const Followed& a, const Followed& b) {
    return a.parent.size() < b.parent.size();
  });
  using Timing = xalloc::formats::ConsumerTiming;
  auto step = [](std::vector<Timing>& list, const std::pair<std::int64_t, std::int64_t>& at) {
    auto it = std::find_if(list.begin(), list.end(), [&](const Timing& c) {
      return c.op_id == at.first && c.input_index == at.second;
    });
    return it == list.end() ? nullptr : &*it;
  };
  for (Followed& f : followed_) {
    auto r = by_id.find(f.value);
    if (r == by_id.end() || f.parent.empty())
      continue;
    Timing* c = step(records[r->second].consumers, f.parent.front());
    for (std::size_t k = 1; c && k < f.parent.size(); ++k)
      c = step(c->downstream, f.parent[k]);
    if (c)
      c->downstream.push_back(std::move(f.timing));
  }
  followed_.clear();
}

} // namespace xprof_hook
