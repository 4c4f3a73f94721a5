// Input distributions, evaluated per element from Philox bits, identically on host and device.
//
// Arithmetic is chosen so that host and device round the same way: integer sums, products by
// powers of two, and explicit fma() where a multiply-add is wanted (so that nvcc's contraction
// cannot change a result).
#pragma once
#include <cmath>
#include <cstdint>

#include "core/hd.hpp"
#include "core/philox.hpp"

namespace pkb {

enum class DistKind : int32_t {
  normal,  // approximately N(a, b^2): centred Irwin-Hall sum of four 24-bit uniforms, scaled to
           // unit variance (bounded to +-3.46 sigma; exact integer arithmetic)
  uniform,  // uniform in [a, b)
  grid,  // k * a for an integer k uniform in [lo, hi]: with a power-of-two a, sums of such
         // values are exact in any order (reductions that every correct algorithm gets
         // bit-identically, as nccl-tests does)
  randint,  // integer uniform in [lo, hi]
  zeros,
  ones,
  arange,  // element index (lo + index)
  split,  // one row or column of a random W x W count matrix whose rows and columns all sum to
          // `total` (all-to-all split sizes every rank agrees on); see split_count
  spread,  // a grid's held-out redraw (held_out below): continuous in [lo * a, hi * a), times 2^-s
           // for s uniform in 0..7, so that values are off the grid and of mixed magnitudes
  // Structured integer draws (C4): each element is still a pure function of (key, index), but of a
  // draw that spans a row, a tensor or every rank; integer valued, stored in any dtype.
  distinct,  // rows of k distinct integers in [0, n), ascending, or a view of such a draw (DistinctView)
  owner_ids,  // integers in [0, a) whose owners (value mod W) follow row `rank` of a split matrix, in a
              // random order: an exchange by owner has static sizes; see owner_id
  composition,  // integers in [0, 2 lo] whose sum over each rank's tensor is numel * lo and whose sum over
                // the ranks at every position is W * lo (jagged lengths with static totals); see composed
  offsets,  // nondecreasing row pointers of a jagged (CSR / CSC) layout of numel - 1 rows: element i is
            // i lo + u_i (u uniform in [0, lo], 0 at both ends), so row lengths lie in [0, 2 lo] and
            // sum to (numel - 1) lo; see offset_at
  permutation,  // distinct integers in [0, lo) in random order: a random bijection of [0, lo) at the
                // element indices (numel <= lo); see permutation_at
};

/// What a `distinct` tensor holds of its draw: M rows of k distinct values in [0, n), ascending.
enum class DistinctView : int32_t {
  values = 0,  // [M, k]: the rows themselves
  onehot = 1,  // [n, k, M]: 1 where row m's j-th value is v (an expert mask, one-hot per top-k slot)
  mask = 2,  // [n, M]: 1 where row m holds v (a routing map)
  grouped = 3,  // [k * M]: row indices grouped by value, ascending within a value (an expert-major
                // token order, masked_select of a routing map); O(M) work per element
};

/// Limits of `distinct`: k values per row, and n for the grouped view (its per-value counters).
inline constexpr int64_t kDistinctMaxK = 16;
inline constexpr int64_t kGroupedMaxN = 64;

/// One distribution, trivially copyable so that it can be passed to kernels.
/// For `split`: lo = total, hi = W, a = side (0: this rank's sends, row `rank`; 1: its receives,
/// column `rank`), b = rank.
/// For `distinct`: lo = n, hi = k, a = M (rows), b = view (DistinctView).
/// For `owner_ids`: lo = numel (the split total), hi = W, a = bound, b = rank; keyed as its split matrix.
/// For `composition`: lo = mean, hi = W, a = numel, b = rank; keyed alike on every rank (shared).
/// For `offsets`: lo = mean, a = numel. For `permutation`: lo = n. Both are keyed as any input.
struct Dist {
  DistKind kind = DistKind::normal;
  double a = 0.0;
  double b = 1.0;
  int64_t lo = 0;
  int64_t hi = 0;
  bool shared = false;  // the same values on every rank: the key ignores the rank
  int64_t slot = -1;  // key slot instead of the tensor index (>= 0: tensors with one slot share draws)
  int64_t share_group = -1;  // >= 0: this rank's value of the input's `shared_by`; ranks with one value
                             // draw alike (the key uses kShareGroupBase + share_group for the rank)
  bool heldout = false;  // a floating grid input that held-out calls redraw as `spread` (held_out)
};

/// Held-out calls: the odd trials and every warm-up and timed call. Their grid-drawn floating inputs
/// become `spread` draws, so that a solution specialised to the spec's grid (exact sums, values
/// that fit in int8) is wrong there; their floating outputs are compared under the norm-wise
/// bound of Comparison::heldout_rtol (spec/spec.hpp).
inline constexpr bool heldout_trial(uint64_t trial) { return trial % 2 == 1; }

/// The distribution a held-out call draws `d` from.
PKB_HD Dist held_out(Dist d) {
  if (d.heldout && d.kind == DistKind::grid) d.kind = DistKind::spread;
  return d;
}

/// Whether `d` is keyed alike on every rank (shared) while each rank draws its own part of it (b is
/// the rank): split rows and columns, owner ids, compositions.
inline bool per_rank_part(const Dist& d) {
  return d.kind == DistKind::split || d.kind == DistKind::owner_ids || d.kind == DistKind::composition;
}

/// Whether two ranks' tensors are drawn alike, for listing ranks together (a split's `b` is the
/// rank, which its description does not name).
inline bool same_draw(const Dist& x, const Dist& y) {
  return x.kind == y.kind && x.a == y.a && (x.b == y.b || per_rank_part(x)) && x.lo == y.lo && x.hi == y.hi &&
         x.shared == y.shared && x.slot == y.slot && (x.share_group < 0) == (y.share_group < 0) && x.heldout == y.heldout;
}

/// The key slot of `split` matrices, offset so that it cannot meet a tensor index.
inline constexpr int64_t kSplitSlotBase = 1 << 20;
/// The rank that shared tensors are keyed with.
inline constexpr uint64_t kSharedRank = 0xFFFFFFFFull;

/// The rank that tensors shared within a sub-group (shared_by) are keyed with: this base plus the
/// group's value, above every rank and kSharedRank.
inline constexpr uint64_t kShareGroupBase = 1ull << 32;

/// Key of input `tensor` of `rank` for (seed, stream), honouring shared tensors (every rank, or
/// ranks with one `shared_by` value) and key slots.
PKB_HD uint64_t input_key(uint64_t seed, uint64_t stream, uint64_t rank, uint64_t tensor, const Dist& d) {
  uint64_t who = d.shared ? kSharedRank : d.share_group >= 0 ? kShareGroupBase + static_cast<uint64_t>(d.share_group) : rank;
  return rng::tensor_key(seed, stream, who, d.slot >= 0 ? static_cast<uint64_t>(d.slot) : tensor);
}

/// Entry (from, to) of the split matrix keyed by `key`: rows sent from rank `from` to rank `to`.
/// The matrix is sum_k c_k P_k over K in 1..min(W, 4) random permutations P_k (shifts and
/// reflections i -> +-i + s mod W) with weights c_k, a random composition of `total` in which some
/// parts are zero. Every row and column therefore sums to `total`, entries are often zero (empty
/// splits), and any element can be computed on its own, on host or device.
PKB_HD int64_t split_count(uint64_t key, int64_t world, int64_t total, int64_t from, int64_t to) {
  constexpr uint64_t kBase = 1ull << 62;  // counters no element index reaches
  if (world <= 0) return 0;
  rng::U32x4 head = rng::element_bits(key, kBase);
  int parts = 1 + static_cast<int>(head.v[0] % static_cast<uint32_t>(world < 4 ? world : 4));
  uint32_t weight[4] = {0, 0, 0, 0}, sum = 0;
  int64_t shift[4] = {0, 0, 0, 0};
  bool reflect[4] = {false, false, false, false};
  for (int k = 0; k < parts; ++k) {
    rng::U32x4 r = rng::element_bits(key, kBase + 1 + static_cast<uint64_t>(k));
    weight[k] = (r.v[0] & 3u) == 0 ? 0u : 1u + r.v[1] % 16u;
    shift[k] = static_cast<int64_t>(r.v[2] % static_cast<uint32_t>(world));
    reflect[k] = (r.v[3] & 1u) != 0;
    sum += weight[k];
  }
  if (sum == 0) weight[0] = sum = 1;
  int64_t count = 0;
  uint32_t prefix = 0;
  for (int k = 0; k < parts; ++k) {
    int64_t lo = total * static_cast<int64_t>(prefix) / sum;
    prefix += weight[k];
    int64_t hi = total * static_cast<int64_t>(prefix) / sum;
    int64_t image = ((reflect[k] ? world - 1 - from : from) + shift[k]) % world;
    if (image == to) count += hi - lo;
  }
  return count;
}

namespace detail {
PKB_HD uint64_t bounded(uint64_t bits, uint64_t range) { return range == 0 ? bits : bits % range; }
PKB_HD uint64_t bits64(const rng::U32x4& r) { return (static_cast<uint64_t>(r.v[1]) << 32) | r.v[0]; }

/// splitmix64's finaliser: the round function of permute_index.
PKB_HD uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// Row `row` of a distinct draw into out[0..k): k distinct values in [0, n), ascending. Floyd's
/// algorithm, uniform over the k-subsets; four 32-bit draws per Philox block.
PKB_HD void distinct_row(uint64_t key, int64_t n, int k, uint64_t row, int64_t* out) {
  rng::U32x4 r{};
  for (int d = 0; d < k; ++d) {
    if (d % 4 == 0) r = rng::element_bits(key, row * 4 + static_cast<uint64_t>(d / 4));
    int64_t j = n - k + d;
    int64_t t = static_cast<int64_t>(r.v[d % 4] % static_cast<uint32_t>(j + 1));
    bool seen = false;
    for (int q = 0; q < d; ++q) seen |= out[q] == t;
    out[d] = seen ? j : t;
  }
  for (int i = 1; i < k; ++i)  // insertion sort: k is small
    for (int q = i; q > 0 && out[q - 1] > out[q]; --q) {
      int64_t tmp = out[q];
      out[q] = out[q - 1];
      out[q - 1] = tmp;
    }
}

/// x(s, t) of a composition: uniform in [0, range), from counters (rank << 40) + position.
PKB_HD int64_t composition_term(uint64_t key, int64_t rank, uint64_t t, uint64_t range) {
  return static_cast<int64_t>(bits64(rng::element_bits(key, (static_cast<uint64_t>(rank) << 40) + t)) % range);
}

PKB_HD bool row_holds(const int64_t* row, int k, int64_t v) {
  bool in = false;
  for (int q = 0; q < k; ++q) in |= row[q] == v;
  return in;
}
}  // namespace detail

/// Element `index` of a `distinct` tensor (DistinctView gives the layouts); lo = n, hi = k, a = M.
PKB_HD int64_t distinct_element(const Dist& d, uint64_t key, uint64_t index) {
  const int64_t n = d.lo;
  const int k = static_cast<int>(d.hi);
  const uint64_t rows = static_cast<uint64_t>(d.a);
  if (k <= 0 || k > kDistinctMaxK || n < k || rows == 0) return 0;  // rejected when a spec resolves
  int64_t row[kDistinctMaxK];
  switch (static_cast<DistinctView>(static_cast<int32_t>(d.b))) {
    case DistinctView::values: detail::distinct_row(key, n, k, index / k, row); return row[index % k];
    case DistinctView::onehot: {
      uint64_t m = index % rows, j = (index / rows) % k;
      detail::distinct_row(key, n, k, m, row);
      return row[j] == static_cast<int64_t>(index / (rows * k)) ? 1 : 0;
    }
    case DistinctView::mask:
      detail::distinct_row(key, n, k, index % rows, row);
      return detail::row_holds(row, k, static_cast<int64_t>(index / rows)) ? 1 : 0;
    case DistinctView::grouped: {
      if (n > kGroupedMaxN) return 0;
      uint32_t count[kGroupedMaxN] = {};
      for (uint64_t m = 0; m < rows; ++m) {
        detail::distinct_row(key, n, k, m, row);
        for (int q = 0; q < k; ++q) ++count[row[q]];
      }
      uint64_t start = 0;
      int64_t v = 0;
      while (v < n - 1 && start + count[v] <= index) start += count[v++];
      uint64_t want = index - start;  // the want-th row (ascending) that holds v
      for (uint64_t m = 0; m < rows; ++m) {
        detail::distinct_row(key, n, k, m, row);
        if (detail::row_holds(row, k, v) && want-- == 0) return static_cast<int64_t>(m);
      }
      return 0;
    }
  }
  return 0;
}

/// A bijection of [0, size) keyed by `key`: four Feistel rounds over the smallest even number of
/// bits that holds size, walking the cycle until the image falls inside (fewer than 4 steps expected).
PKB_HD uint64_t permute_index(uint64_t key, uint64_t size, uint64_t i) {
  if (size <= 1) return 0;
  int half = 1;
  while (half < 32 && (1ull << (2 * half)) < size) ++half;
  const uint64_t mask = (1ull << half) - 1;
  uint64_t x = i;
  do {
    uint64_t l = x >> half, r = x & mask;
    for (uint64_t round = 0; round < 4; ++round) {
      uint64_t f = detail::mix64(key + 0x9e3779b97f4a7c15ull * (round + 1) + r) & mask;
      uint64_t t = l ^ f;
      l = r;
      r = t;
    }
    x = (l << half) | r;
  } while (x >= size);
  return x;
}

/// Element `index` of an `owner_ids` tensor of rank b, keyed by the key of its split matrix: the
/// elements are owner + W * u (u uniform, the value below `a`), where owners take the counts of row
/// `rank` of the matrix (owner 0 the first ones, ...) in the order of a random bijection of the
/// positions. Every rank thus receives `total` ids when ids go to their owners.
PKB_HD int64_t owner_id(const Dist& d, uint64_t key, uint64_t index) {
  constexpr uint64_t kBase = 1ull << 61;  // below split_count's counters, above any element index
  const int64_t total = d.lo, world = d.hi, rank = static_cast<int64_t>(d.b);
  const uint64_t bound = static_cast<uint64_t>(d.a);
  if (world <= 0 || bound < static_cast<uint64_t>(world)) return 0;  // rejected when a spec resolves
  uint64_t rank_key = detail::bits64(rng::element_bits(key, kBase + static_cast<uint64_t>(rank)));
  int64_t slot = static_cast<int64_t>(permute_index(rank_key, static_cast<uint64_t>(total), index));
  int64_t owner = 0;
  for (int64_t start = 0; owner < world - 1; ++owner) {
    start += split_count(key, world, total, rank, owner);
    if (slot < start) break;
  }
  uint64_t choices = (bound - 1 - static_cast<uint64_t>(owner)) / static_cast<uint64_t>(world) + 1;
  uint64_t u = detail::bits64(rng::element_bits(key, kBase + (static_cast<uint64_t>(rank) + 1) * (1ull << 40) + index));
  return owner + world * static_cast<int64_t>(u % choices);
}

/// Element `index` of a `composition` tensor of rank b (lo = mean m, hi = W, a = numel L), keyed alike
/// on every rank: m + x(s, t) - x(s-1, t) - x(s, t') + x(s-1, t') for x uniform in [0, m / 2], ranks
/// s taken cyclically and t' = t - h (mod L) with h about L / 3. The four terms cancel in the sum over
/// ranks at any position and in the sum over the positions of any rank, so values lie in [0, 2m],
/// every rank's tensor sums to L * m and the ranks' elements at one position sum to W * m, while
/// sums over parts of a tensor (one feature's lengths) vary.
PKB_HD int64_t composed(const Dist& d, uint64_t key, uint64_t index) {
  const int64_t mean = d.lo, world = d.hi, rank = static_cast<int64_t>(d.b);
  const uint64_t numel = static_cast<uint64_t>(d.a);
  if (world <= 0 || numel == 0 || mean < 0) return mean;
  uint64_t h = (numel + 2) / 3;
  if (numel > 2 && (2 * h) % numel == 0) ++h;  // t -> t' must not be an involution
  const uint64_t partner = (index + numel - h % numel) % numel;
  const int64_t prev = (rank + world - 1) % world;
  const uint64_t range = static_cast<uint64_t>(mean / 2) + 1;
  return mean + detail::composition_term(key, rank, index, range) - detail::composition_term(key, prev, index, range) -
         detail::composition_term(key, rank, partner, range) + detail::composition_term(key, prev, partner, range);
}

/// Element `index` of an `offsets` tensor (lo = mean m, a = numel L + 1): index * m + u with u uniform
/// in [0, m], except the first element (0) and the last (L m). Neighbours differ by m + u' - u, in
/// [0, 2m]: the row pointers of L rows of random lengths (empty rows included) with the static total
/// L m, while every prefix sum varies. Each element is computed on its own, on host or device.
PKB_HD int64_t offset_at(const Dist& d, uint64_t key, uint64_t index) {
  const int64_t mean = d.lo;
  const uint64_t last = d.a >= 1.0 ? static_cast<uint64_t>(d.a) - 1 : 0;
  if (mean <= 0) return 0;
  const int64_t base = mean * static_cast<int64_t>(index);
  if (index == 0 || index >= last) return base;
  return base + static_cast<int64_t>(detail::bits64(rng::element_bits(key, index)) % static_cast<uint64_t>(mean + 1));
}

/// Element `index` of a `permutation` tensor (lo = n): the image of index under a random bijection of
/// [0, n) (permute_index), so the elements are distinct values in [0, n) in random order, and a tensor
/// of n elements is a random permutation. numel <= n is checked when a spec resolves.
PKB_HD int64_t permutation_at(const Dist& d, uint64_t key, uint64_t index) {
  const uint64_t n = d.lo > 0 ? static_cast<uint64_t>(d.lo) : 0;
  if (index >= n) return 0;  // rejected when a spec resolves
  return static_cast<int64_t>(permute_index(detail::bits64(rng::element_bits(key, 0)), n, index));
}

/// Whether `d` is one of the structured integer draws, which every dtype stores through sample_int_at.
PKB_HD bool structured(const Dist& d) {
  return d.kind == DistKind::distinct || d.kind == DistKind::owner_ids || d.kind == DistKind::composition ||
         d.kind == DistKind::offsets || d.kind == DistKind::permutation;
}

/// The value of one element as a float (for bf16 / fp16 / fp32 tensors).
PKB_HD float sample_float(const Dist& d, const rng::U32x4& r) {
  switch (d.kind) {
    case DistKind::normal: {
      uint32_t s = (r.v[0] >> 8) + (r.v[1] >> 8) + (r.v[2] >> 8) + (r.v[3] >> 8);  // < 2^26
      float centred = static_cast<float>(s) * 0x1p-24f - 2.0f;  // exact product, one rounding
      float z = centred * 1.7320508075688772f;  // unit variance
      return fmaf(static_cast<float>(d.b), z, static_cast<float>(d.a));
    }
    case DistKind::uniform: {
      float u = static_cast<float>(r.v[0] >> 8) * 0x1p-24f;
      float span = static_cast<float>(d.b) - static_cast<float>(d.a);
      return fmaf(span, u, static_cast<float>(d.a));
    }
    case DistKind::grid: {
      uint64_t range = static_cast<uint64_t>(d.hi - d.lo) + 1;
      int64_t k = d.lo + static_cast<int64_t>(detail::bounded(detail::bits64(r), range));
      return static_cast<float>(k) * static_cast<float>(d.a);
    }
    case DistKind::randint: {
      uint64_t range = static_cast<uint64_t>(d.hi - d.lo) + 1;
      return static_cast<float>(d.lo + static_cast<int64_t>(detail::bounded(detail::bits64(r), range)));
    }
    case DistKind::spread: {
      // Products by powers of two and one explicit fma: the same bits on host and device.
      float u = static_cast<float>(r.v[2] >> 8) * 0x1p-24f;
      float span = static_cast<float>(d.hi - d.lo);
      float t = fmaf(span, u, static_cast<float>(d.lo));
      return t * static_cast<float>(d.a) * (static_cast<float>(128u >> (r.v[3] & 7u)) * 0x1p-7f);
    }
    case DistKind::zeros: return 0.0f;
    case DistKind::ones: return 1.0f;
    case DistKind::arange: return 0.0f;  // handled by the caller, which knows the index
    case DistKind::split: return 0.0f;  // integer tensors only (checked when a spec resolves)
    case DistKind::distinct:
    case DistKind::owner_ids:
    case DistKind::composition:
    case DistKind::offsets:
    case DistKind::permutation: return 0.0f;  // structured: generate_element uses sample_int_at
  }
  return 0.0f;
}

/// The value of one element as a double (for fp64 tensors).
PKB_HD double sample_double(const Dist& d, const rng::U32x4& r) {
  switch (d.kind) {
    case DistKind::normal: {
      uint64_t s = static_cast<uint64_t>(r.v[0] >> 8) + (r.v[1] >> 8) + (r.v[2] >> 8) + (r.v[3] >> 8);
      double centred = static_cast<double>(s) * 0x1p-24 - 2.0;
      double z = centred * 1.7320508075688772;
      return fma(d.b, z, d.a);
    }
    case DistKind::uniform: {
      double u = static_cast<double>(detail::bits64(r) >> 11) * 0x1p-53;
      return fma(d.b - d.a, u, d.a);
    }
    case DistKind::spread: {
      double u = static_cast<double>(detail::bits64(r) >> 11) * 0x1p-53;
      double t = fma(static_cast<double>(d.hi - d.lo), u, static_cast<double>(d.lo));
      return t * d.a * (static_cast<double>(128u >> (r.v[3] & 7u)) * 0x1p-7);
    }
    default: return static_cast<double>(sample_float(d, r));
  }
}

/// The value of one element as an integer (for integer and bool tensors).
PKB_HD int64_t sample_int(const Dist& d, const rng::U32x4& r, uint64_t index) {
  switch (d.kind) {
    case DistKind::randint:
    case DistKind::grid: {
      uint64_t range = static_cast<uint64_t>(d.hi - d.lo) + 1;
      return d.lo + static_cast<int64_t>(detail::bounded(detail::bits64(r), range));
    }
    case DistKind::ones: return 1;
    case DistKind::arange: return d.lo + static_cast<int64_t>(index);
    default: return 0;
  }
}

/// Element `index` of an integer tensor keyed by `key` (split matrices need the key itself).
PKB_HD int64_t sample_int_at(const Dist& d, uint64_t key, uint64_t index) {
  if (d.kind == DistKind::split) {
    int64_t rank = static_cast<int64_t>(d.b), other = static_cast<int64_t>(index);
    return d.a == 0.0 ? split_count(key, d.hi, d.lo, rank, other) : split_count(key, d.hi, d.lo, other, rank);
  }
  if (d.kind == DistKind::distinct) return distinct_element(d, key, index);
  if (d.kind == DistKind::owner_ids) return owner_id(d, key, index);
  if (d.kind == DistKind::composition) return composed(d, key, index);
  if (d.kind == DistKind::offsets) return offset_at(d, key, index);
  if (d.kind == DistKind::permutation) return permutation_at(d, key, index);
  return sample_int(d, rng::element_bits(key, index), index);
}

}  // namespace pkb
