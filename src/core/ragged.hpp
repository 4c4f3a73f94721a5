// Ragged outputs (spec: `count = "<output>"`): a capacity of `rows` rows, of which the solution says
// how many hold values in a one-element int32/int64 output. The checker's kernels and the driver
// both take the counted part through counted_elems, so that they agree on every element.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/dtype.hpp"
#include "core/hd.hpp"

namespace pkb {

/// Elements per row of the first dimension of `shape` (1 for a one-dimensional shape).
inline size_t row_elems(const std::vector<long long>& shape) {
  size_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= static_cast<size_t>(shape[i]);
  return n;
}

/// The elements that hold values: `count` rows of `row_elems` elements, with `count` clamped to
/// [0, rows] (a count out of range is wrong by itself: the count is compared exactly).
PKB_HD size_t counted_elems(long long count, size_t rows, size_t row_elems) {
  size_t n = count < 0 ? 0 : (static_cast<unsigned long long>(count) > rows ? rows : static_cast<size_t>(count));
  return n * row_elems;
}

/// The count held in a one-element int32/int64 buffer (any alignment).
PKB_HD long long load_count(const void* p, DType d) {
  if (d == DType::i32) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
  }
  int64_t v;
  memcpy(&v, p, sizeof v);
  return static_cast<long long>(v);
}

}  // namespace pkb
