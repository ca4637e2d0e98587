// Bit-for-bit comparison of op results: the test that a layout change does not change results.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/ivalue.h>

namespace xalloc::tspass {

/// Same dtype, same sizes, and the same bytes element by element (NaN payloads included;
/// strides may differ). Lists and tuples compare element-wise; other values by equality.
bool bitwiseEqual(const c10::IValue& a, const c10::IValue& b);
bool bitwiseEqual(const std::vector<c10::IValue>& a, const std::vector<c10::IValue>& b);

/// How far `x` is from `reference`, output by output, element by element: for each
/// floating-point tensor (in lists, tuples and dicts too), max over its elements of
/// |x - ref| / max(|ref|, floor), where floor is the 10th percentile of |ref| over the non-zero
/// elements that differ (the near-zero elements are judged against what the small ones are,
/// and a large element, such as a mask's -1e9, hides nothing); the largest over all tensors.
/// NaN against NaN and an infinity against the same one count as equal. Integer and boolean
/// tensors and other values count 0 when equal and +inf when not; so do tensors of other sizes
/// or dtypes. 0 means the same values (not necessarily the same bits of -0 / NaN).
double maxRelativeError(const c10::IValue& reference, const c10::IValue& x);

/// maxRelativeError of each tensor's values sorted (flattened, NaN last): the outputs compared as
/// multisets, blind to order. For outputs whose order the model itself does not hold (top-k and
/// NMS put nearly equal scores in either order: one ulp of a detector's input swaps them).
double maxSortedError(const c10::IValue& reference, const c10::IValue& x);
double maxRelativeError(const std::vector<c10::IValue>& reference,
                        const std::vector<c10::IValue>& x);

/// True when `v` holds floating-point tensors (in lists, tuples and dicts too) and each holds
/// one value repeated (all zeros, say): outputs that cannot show a rewrite is wrong.
bool constantFloatOutputs(const c10::IValue& v);

/// How many elements the tensors `v` holds (in lists, tuples and dicts too): 0 for an empty
/// batch's outputs, which no comparison can check.
std::int64_t tensorElements(const c10::IValue& v);

/// Tensors (in lists and tuples too) with the same sizes and strides; other values ignored.
bool sameLayout(const std::vector<c10::IValue>& a, const std::vector<c10::IValue>& b);

} // namespace xalloc::tspass
