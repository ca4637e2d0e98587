// Bit-for-bit comparison of op results: the test that a layout change does not change results.
#pragma once

#include <vector>

#include <ATen/core/ivalue.h>

namespace xalloc::tspass {

/// Same dtype, same sizes, and the same bytes element by element (NaN payloads included;
/// strides may differ). Lists and tuples compare element-wise; other values by equality.
bool bitwiseEqual(const c10::IValue& a, const c10::IValue& b);
bool bitwiseEqual(const std::vector<c10::IValue>& a, const std::vector<c10::IValue>& b);

/// Tensors (in lists and tuples too) with the same sizes and strides; other values ignored.
bool sameLayout(const std::vector<c10::IValue>& a, const std::vector<c10::IValue>& b);

} // namespace xalloc::tspass
