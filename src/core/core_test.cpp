#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/digest.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/hash.hpp"
#include "core/hex.hpp"
#include "core/philox.hpp"
#include "core/poison.hpp"
#include "core/stats.hpp"
#include "core/strings.hpp"
#include "core/trial_param.hpp"

namespace pkb {
namespace {

// Known-answer vectors published with Random123 (kat_vectors), counter[4] key[2] -> out[4].
TEST(Hex, RoundTripsAnyBytesAndRejectsGarbage) {
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes.push_back(static_cast<char>(i));
  std::string hex = to_hex(bytes);
  EXPECT_EQ(hex.substr(0, 6), "000102");
  EXPECT_EQ(hex.size(), 512u);
  EXPECT_EQ(from_hex(hex), bytes);
  EXPECT_EQ(from_hex("ABff"), std::string("\xab\xff"));
  EXPECT_THROW(from_hex("abc"), Error);
  EXPECT_THROW(from_hex("zz"), Error);
}

TEST(Philox, KnownAnswers) {
  struct Kat {
    rng::U32x4 ctr;
    uint32_t k0, k1;
    rng::U32x4 want;
  };
  Kat kats[] = {
      {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
       0xffffffff,
       0xffffffff,
       {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
       0xa4093822,
       0x299f31d0,
       {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
  };
  for (auto& k : kats) {
    auto got = rng::philox4x32_10(k.ctr, k.k0, k.k1);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(got.v[i], k.want.v[i]) << "word " << i;
  }
}

TEST(Generate, StreamsDifferPerRankTrialAndTensor) {
  std::set<uint64_t> keys;
  for (uint64_t trial = 0; trial < 4; ++trial)
    for (uint64_t rank = 0; rank < 8; ++rank)
      for (uint64_t t = 0; t < 3; ++t) keys.insert(rng::tensor_key(42, trial, rank, t));
  EXPECT_EQ(keys.size(), 4u * 8 * 3);
  EXPECT_NE(rng::tensor_key(1, 0, 0, 0), rng::tensor_key(2, 0, 0, 0));
}

TEST(Generate, SplitMatricesHaveEqualRowAndColumnSumsAndEmptyEntries) {
  int empty = 0, full_rows = 0, matrices = 0;
  std::set<std::vector<int64_t>> distinct;
  for (int64_t world : {1, 2, 3, 4, 8}) {
    for (uint64_t trial = 0; trial < 50; ++trial) {
      const int64_t total = 1000 + static_cast<int64_t>(trial);
      std::vector<int64_t> m(world * world);
      for (int64_t r = 0; r < world; ++r) {
        // What rank r generates for its send row and its receive column, as the workers do.
        Dist send{DistKind::split, 0.0, static_cast<double>(r), total, world, true, kSplitSlotBase};
        Dist recv = send;
        recv.a = 1.0;
        std::vector<int64_t> row(world), col(world);
        for (int64_t j = 0; j < world; ++j) {
          generate_element(row.data(), DType::i64, send, input_key(9, trial, r, 0, send), j);
          generate_element(col.data(), DType::i64, recv, input_key(9, trial, r, 1, recv), j);
        }
        for (int64_t j = 0; j < world; ++j) m[r * world + j] = row[j];
        // Rank r's receive column is column r of the matrix every rank's send rows form: checked below.
        for (int64_t j = 0; j < world; ++j) EXPECT_EQ(col[j], split_count(input_key(9, trial, 0, 0, send), world, total, j, r));
      }
      for (int64_t i = 0; i < world; ++i) {
        int64_t rs = 0, cs = 0;
        for (int64_t j = 0; j < world; ++j) {
          EXPECT_GE(m[i * world + j], 0);
          rs += m[i * world + j];
          cs += m[j * world + i];
          empty += m[i * world + j] == 0;
          full_rows += m[i * world + j] == total;
        }
        EXPECT_EQ(rs, total);
        EXPECT_EQ(cs, total);
      }
      distinct.insert(m);
      ++matrices;
    }
  }
  EXPECT_GT(empty, 0) << "empty splits never drawn";
  EXPECT_GT(full_rows, 0);
  EXPECT_GT(distinct.size(), static_cast<size_t>(matrices) * 3 / 4);
}

TEST(Generate, SharedInputsIgnoreTheRank) {
  Dist d;
  d.shared = true;
  EXPECT_EQ(input_key(5, 1, 0, 2, d), input_key(5, 1, 3, 2, d));
  d.shared = false;
  EXPECT_NE(input_key(5, 1, 0, 2, d), input_key(5, 1, 3, 2, d));
  EXPECT_EQ(input_key(5, 1, 3, 2, d), rng::tensor_key(5, 1, 3, 2));
}

TEST(Generate, SharedByGroupsDrawAlikeWithinAGroupOnly) {
  Dist d;
  d.share_group = 1;
  Dist e = d;
  EXPECT_EQ(input_key(5, 1, 2, 0, d), input_key(5, 1, 3, 0, e));  // ranks 2 and 3, one group
  e.share_group = 0;
  EXPECT_NE(input_key(5, 1, 2, 0, d), input_key(5, 1, 0, 0, e));  // another group
  Dist plain, shared;
  shared.shared = true;
  for (uint64_t r = 0; r < 8; ++r) EXPECT_NE(input_key(5, 1, 2, 0, d), input_key(5, 1, r, 0, plain));
  EXPECT_NE(input_key(5, 1, 2, 0, d), input_key(5, 1, 2, 0, shared));
  EXPECT_NE(input_key(5, 1, 2, 0, d), input_key(5, 1, 2, 1, d));  // tensors still differ
  EXPECT_TRUE(same_draw(d, e));  // listed together: the group is a function of the rank
  EXPECT_FALSE(same_draw(d, plain));
}

TEST(TrialParams, StayInRangeVaryPerCallAndAreDeterministic) {
  TrialParam p{"step", 1, 7};
  std::set<long long> seen;
  for (uint64_t call = 0; call < 200; ++call) {
    long long v = trial_param_value(rng::mix64(call), call, 0, p);
    EXPECT_GE(v, 1);
    EXPECT_LE(v, 7);
    EXPECT_EQ(v, trial_param_value(rng::mix64(call), call, 0, p));
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 7u);
  TrialParam fixed{"k", 3, 3};
  EXPECT_EQ(trial_param_value(9, 9, 0, fixed), 3);
  int differ = 0;  // two parameters of one call are drawn independently
  TrialParam wide{"x", 0, 1000000};
  for (uint64_t call = 0; call < 20; ++call)
    differ += trial_param_value(call, call, 0, wide) != trial_param_value(call, call, 1, wide);
  EXPECT_GT(differ, 15);
}

TEST(Generate, NormalHasUnitMomentsAndIsDeterministic) {
  Dist d;  // standard normal
  const size_t n = 200000;
  std::vector<float> a(n), b(n);
  uint64_t key = rng::tensor_key(7, 0, 1, 0);
  for (size_t i = 0; i < n; ++i) {
    generate_element(a.data(), DType::fp32, d, key, i);
    generate_element(b.data(), DType::fp32, d, key, i);
  }
  EXPECT_EQ(a, b);
  double sum = 0, sq = 0;
  for (float x : a) {
    sum += x;
    sq += double(x) * x;
  }
  double mean = sum / n, var = sq / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(var, 1.0, 0.02);
}

TEST(Generate, GridSumsAreExactInBf16) {
  Dist d;
  d.kind = DistKind::grid;
  d.a = 1.0 / 16;
  d.lo = -32;
  d.hi = 32;
  std::vector<uint16_t> buf(1000);
  for (size_t i = 0; i < buf.size(); ++i) generate_element(buf.data(), DType::bf16, d, 99, i);
  for (size_t i = 0; i < buf.size(); ++i) {
    double v = num::bf16_to_float(buf[i]);
    EXPECT_EQ(v * 16, std::round(v * 16));
    EXPECT_LE(std::fabs(v), 2.0);
  }
  // Any sum of 8 such values is representable exactly in bf16 (|k| <= 256).
  double s = 0;
  for (int i = 0; i < 8; ++i) s += num::bf16_to_float(buf[i]);
  EXPECT_EQ(num::bf16_to_float(num::float_to_bf16(static_cast<float>(s))), s);
}

TEST(Generate, HeldOutCallsRedrawFloatingGridsOffTheGridWithMixedMagnitudes) {
  Dist g;
  g.kind = DistKind::grid;
  g.a = 1.0 / 16;
  g.lo = -32;
  g.hi = 32;
  EXPECT_EQ(held_out(g).kind, DistKind::grid);  // not marked: held-out calls draw it as usual
  g.heldout = true;
  Dist h = held_out(g);
  EXPECT_EQ(h.kind, DistKind::spread);
  EXPECT_EQ(held_out(h).kind, DistKind::spread);
  Dist n;  // continuous already: unchanged even if marked
  n.heldout = true;
  EXPECT_EQ(held_out(n).kind, DistKind::normal);
  EXPECT_FALSE(heldout_trial(0));
  EXPECT_TRUE(heldout_trial(1));
  EXPECT_FALSE(heldout_trial(2));

  const size_t count = 20000;
  std::vector<float> f(count);
  std::vector<double> d(count);
  size_t off_grid = 0, small = 0, positive = 0;
  for (size_t i = 0; i < count; ++i) {
    generate_element(f.data(), DType::fp32, h, 1234, i);
    generate_element(d.data(), DType::fp64, h, 1234, i);
    EXPECT_GE(f[i], -2.0f);
    EXPECT_LT(f[i], 2.0f);
    EXPECT_GE(d[i], -2.0);
    EXPECT_LT(d[i], 2.0);
    off_grid += f[i] * 16 != std::round(f[i] * 16);
    small += std::fabs(f[i]) < 0.125f;
    positive += f[i] > 0;
  }
  EXPECT_GT(off_grid, count * 95 / 100);  // an int8 code of 16 x loses them
  EXPECT_GT(small, count * 40 / 100);  // scales down to 2^-7 (about half the draws are < 1/8)
  EXPECT_NEAR(double(positive) / count, 0.5, 0.02);
  // The same bits on every call (host and device share this code; the kernel calls it too).
  std::vector<uint16_t> a(64), b(64);
  for (size_t i = 0; i < a.size(); ++i) {
    generate_element(a.data(), DType::bf16, h, 77, i);
    generate_element(b.data(), DType::bf16, h, 77, i);
  }
  EXPECT_EQ(a, b);
}

TEST(Numeric, Bf16RoundsToNearestEven) {
  EXPECT_EQ(num::float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(num::float_to_bf16(-2.0f), 0xC000);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(num::float_to_bf16(1.0f + 0x1p-8f), 0x3F80);
  EXPECT_EQ(num::float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3F81);
  EXPECT_TRUE(std::isnan(num::bf16_to_float(num::float_to_bf16(NAN))));
}

TEST(Numeric, Fp16RoundTripsAndRounds) {
  for (float f : {0.0f, 1.0f, -1.5f, 65504.0f, 0.000061035156f, 5.9604645e-08f})
    EXPECT_EQ(num::fp16_to_float(num::float_to_fp16(f)), f) << f;
  EXPECT_EQ(num::float_to_fp16(1.0f), 0x3C00);
  EXPECT_EQ(num::float_to_fp16(70000.0f), 0x7C00);  // overflow to inf
  EXPECT_EQ(num::float_to_fp16(1.0f + 0x1p-11f), 0x3C00);  // tie to even
  EXPECT_EQ(num::float_to_fp16(1.0f + 0x1p-11f + 0x1p-20f), 0x3C01);
}

// FP8: every finite code (and E5M2's infinities) survives decode then encode; a midpoint between
// neighbours rounds to the even code, a hair either side to the nearer; overflow as PyTorch's .to().
template <typename Enc, typename Dec>
void expect_fp8_rounds(Enc enc, Dec dec, const char* name) {
  for (int c = 0; c < 256; ++c) {
    float v = dec(static_cast<uint8_t>(c));
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(dec(enc(v)))) << name << " code " << c;
      continue;
    }
    EXPECT_EQ(enc(v), c) << name << " code " << c << " = " << v;
  }
  for (int c = 0; c + 1 < 0x80; ++c) {  // positive neighbours, both finite
    float lo = dec(static_cast<uint8_t>(c)), hi = dec(static_cast<uint8_t>(c + 1));
    if (!std::isfinite(lo) || !std::isfinite(hi)) continue;
    float mid = (lo + hi) / 2;  // exact: one bit more than the type has
    EXPECT_EQ(enc(mid), c % 2 == 0 ? c : c + 1) << name << " between " << lo << " and " << hi;
    EXPECT_EQ(enc(std::nextafter(mid, 0.0f)), c) << name << " just below " << mid;
    EXPECT_EQ(enc(std::nextafter(mid, INFINITY)), c + 1) << name << " just above " << mid;
    EXPECT_EQ(enc(-mid), 0x80 | (c % 2 == 0 ? c : c + 1)) << name << " at " << -mid;
  }
}

TEST(Numeric, Fp8RoundsToNearestEvenAndOverflowsAsPyTorch) {
  expect_fp8_rounds(num::float_to_fp8e4m3, num::fp8e4m3_to_float, "e4m3");
  expect_fp8_rounds(num::float_to_fp8e5m2, num::fp8e5m2_to_float, "e5m2");
  EXPECT_EQ(num::fp8e4m3_to_float(0x7E), 448.0f);
  EXPECT_EQ(num::fp8e4m3_to_float(0x01), 0x1p-9f);
  EXPECT_EQ(num::float_to_fp8e4m3(464.0f), 0x7E);  // the tie rounds down to 448 (even)
  EXPECT_EQ(num::float_to_fp8e4m3(std::nextafter(464.0f, INFINITY)), 0x7F);  // past it: NaN, no infinity
  EXPECT_EQ(num::float_to_fp8e4m3(1e6f), 0x7F);
  EXPECT_EQ(num::float_to_fp8e4m3(-INFINITY), 0xFF);
  EXPECT_EQ(num::float_to_fp8e4m3(0x1p-10f), 0x00);  // half the smallest subnormal: to even (0)
  EXPECT_EQ(num::float_to_fp8e4m3(-0.0f), 0x80);
  EXPECT_EQ(num::fp8e5m2_to_float(0x7B), 57344.0f);
  EXPECT_EQ(num::fp8e5m2_to_float(0x01), 0x1p-16f);
  EXPECT_EQ(num::fp8e5m2_to_float(0x7C), INFINITY);
  EXPECT_EQ(num::float_to_fp8e5m2(61440.0f), 0x7C);  // the tie between 57344 and infinity: infinity (even)
  EXPECT_EQ(num::float_to_fp8e5m2(std::nextafter(61440.0f, 0.0f)), 0x7B);
  EXPECT_EQ(num::float_to_fp8e5m2(-1e9f), 0xFC);
  EXPECT_TRUE(std::isnan(num::fp8e5m2_to_float(num::float_to_fp8e5m2(NAN))));
}

// FP8 inputs are the float draws rounded to the type, element by element.
TEST(Generate, Fp8InputsAreTheFloatDrawsRounded) {
  Dist d;  // normal(0, 1)
  std::vector<float> f(512);
  std::vector<uint8_t> e4(512), e5(512);
  for (size_t i = 0; i < f.size(); ++i) {
    generate_element(f.data(), DType::fp32, d, 7, i);
    generate_element(e4.data(), DType::fp8_e4m3, d, 7, i);
    generate_element(e5.data(), DType::fp8_e5m2, d, 7, i);
    EXPECT_EQ(e4[i], num::float_to_fp8e4m3(f[i])) << i;
    EXPECT_EQ(e5[i], num::float_to_fp8e5m2(f[i])) << i;
  }
  std::set<uint8_t> distinct(e4.begin(), e4.end());
  EXPECT_GT(distinct.size(), 50u);  // a spread of values, not a constant
  EXPECT_EQ(parse_dtype("fp8_e5m2"), DType::fp8_e5m2);
  EXPECT_EQ(parse_dtype("float8_e4m3fn"), DType::fp8_e4m3);
  EXPECT_EQ(dtype_size(DType::fp8_e5m2), 1u);
  EXPECT_TRUE(is_floating(DType::fp8_e5m2));
}

TEST(Poison, PatternsAreNaNForFloats) {
  for (uint64_t bits : {0ull, 1ull, 0xffffffffffffffffull, 0x123456789ull}) {
    EXPECT_TRUE(std::isnan(num::bf16_to_float(static_cast<uint16_t>(poison_pattern(DType::bf16, bits)))));
    EXPECT_TRUE(std::isnan(num::fp16_to_float(static_cast<uint16_t>(poison_pattern(DType::fp16, bits)))));
    EXPECT_TRUE(std::isnan(num::bits_float(static_cast<uint32_t>(poison_pattern(DType::fp32, bits)))));
    EXPECT_TRUE(std::isnan(num::fp8e4m3_to_float(static_cast<uint8_t>(poison_pattern(DType::fp8_e4m3, bits)))));
    EXPECT_TRUE(std::isnan(num::fp8e5m2_to_float(static_cast<uint8_t>(poison_pattern(DType::fp8_e5m2, bits)))));
  }
}

TEST(Poison, ABoolPoisonIsNeverAWrittenValue) {
  for (uint64_t bits = 0; bits < 4096; ++bits) {
    uint64_t p = poison_pattern(DType::boolean, bits * 0x9E3779B97F4A7C15ull);
    EXPECT_GE(p, 2u);
    EXPECT_LE(p, 255u);
  }
}

TEST(Digest, DetectsAnyChangeAndPosition) {
  std::vector<uint32_t> a(1024);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint32_t>(i * 2654435761u);
  uint64_t d0 = digest_bytes(a.data(), a.size() * 4);
  auto b = a;
  std::swap(b[3], b[900]);
  EXPECT_NE(digest_bytes(b.data(), b.size() * 4), d0);
  b = a;
  b[10] ^= 1;
  EXPECT_NE(digest_bytes(b.data(), b.size() * 4), d0);
  EXPECT_EQ(digest_bytes(a.data(), a.size() * 4), d0);
  EXPECT_NE(digest_bytes(a.data(), 4095), d0);
}

TEST(Sha256, KnownAnswer) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256().update("a").update("bc").hex(), sha256_hex("abc"));
}

TEST(Strings, EditDistanceAndSuggestions) {
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  auto m = closest_matches("allreduse", {"allreduce", "allgather", "reducescatter", "1_allreduce"});
  ASSERT_FALSE(m.empty());
  EXPECT_EQ(m[0], "allreduce");
  EXPECT_TRUE(closest_matches("zzzzzz", {"allreduce"}).empty());
}

TEST(Strings, ParseSize) {
  EXPECT_EQ(parse_size("8K"), 8192u);
  EXPECT_EQ(parse_size("1M"), 1u << 20);
  EXPECT_EQ(parse_size("2G"), 2ull << 30);
  EXPECT_EQ(parse_size("64KB"), 65536u);
  EXPECT_EQ(parse_size("123"), 123u);
  EXPECT_FALSE(parse_size("abc"));
  EXPECT_FALSE(parse_size(""));
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
}

TEST(Stats, PercentilesAndSummary) {
  std::vector<double> v{5, 1, 4, 2, 3};
  EXPECT_DOUBLE_EQ(percentile(v, 0.5), 3);
  EXPECT_DOUBLE_EQ(percentile(v, 0.0), 1);
  EXPECT_DOUBLE_EQ(percentile(v, 1.0), 5);
  EXPECT_DOUBLE_EQ(percentile(v, 0.1), 1.4);
  auto s = summarize(v);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 5);
  EXPECT_NEAR(s.stddev, std::sqrt(2.5), 1e-12);
  auto m = max_over_ranks({{1, 5, 3}, {2, 4, 3.5}});
  EXPECT_EQ(m, (std::vector<double>{2, 5, 3.5}));
  EXPECT_THROW(max_over_ranks({{1, 2}, {1}}), Error);
}

// Structured draws (C4). Each test generates tensors element by element with generate_element, as
// the workers and the driver's oracle path do, and checks the structure the problem relies on.

std::vector<int64_t> draw_i64(const Dist& d, uint64_t key, size_t n) {
  std::vector<int64_t> v(n);
  for (size_t i = 0; i < n; ++i) generate_element(v.data(), DType::i64, d, key, i);
  return v;
}

TEST(Generate, DistinctRowsAndTheirViewsAgree) {
  const int64_t n = 8, k = 3, rows = 200;
  Dist values{DistKind::distinct, static_cast<double>(rows), static_cast<double>(DistinctView::values), n, k};
  Dist onehot = values, mask = values, grouped = values;
  onehot.b = static_cast<double>(DistinctView::onehot);
  mask.b = static_cast<double>(DistinctView::mask);
  grouped.b = static_cast<double>(DistinctView::grouped);
  const uint64_t key = input_key(5, 1, 3, 2, values);
  auto v = draw_i64(values, key, rows * k);
  std::vector<float> hot(n * k * rows);  // a floating one-hot, as problem 28's expert mask
  for (size_t i = 0; i < hot.size(); ++i) generate_element(hot.data(), DType::fp32, onehot, key, i);
  std::vector<uint8_t> in(n * rows);
  for (size_t i = 0; i < in.size(); ++i) generate_element(in.data(), DType::boolean, mask, key, i);
  auto order = draw_i64(grouped, key, rows * k);
  std::vector<int64_t> count(n, 0), expect_order;
  for (int64_t m = 0; m < rows; ++m) {
    for (int64_t j = 0; j < k; ++j) {
      int64_t x = v[m * k + j];
      ASSERT_GE(x, 0);
      ASSERT_LT(x, n);
      if (j > 0) EXPECT_LT(v[m * k + j - 1], x) << "row " << m << " is not ascending and distinct";
      ++count[x];
    }
    for (int64_t e = 0; e < n; ++e) {
      bool holds = false;
      for (int64_t j = 0; j < k; ++j) {
        holds |= v[m * k + j] == e;
        EXPECT_EQ(hot[(e * k + j) * rows + m], v[m * k + j] == e ? 1.0f : 0.0f);
      }
      EXPECT_EQ(in[e * rows + m], holds ? 1 : 0);
    }
  }
  for (int64_t e = 0; e < n; ++e) {
    EXPECT_GT(count[e], 0) << "value " << e << " never drawn";
    for (int64_t m = 0; m < rows; ++m)
      if (in[e * rows + m]) expect_order.push_back(m);
  }
  EXPECT_EQ(order, expect_order);  // masked_select of arange(M) over the mask, value-major
  Dist other = values;
  EXPECT_NE(draw_i64(other, input_key(5, 2, 3, 2, values), rows * k), v);  // another call, another draw
}

TEST(Generate, PermuteIndexIsABijection) {
  for (uint64_t size : {1ull, 2ull, 3ull, 17ull, 64ull, 1000ull, 4097ull}) {
    std::set<uint64_t> seen;
    bool moved = false;
    for (uint64_t i = 0; i < size; ++i) {
      uint64_t p = permute_index(0x1234 + size, size, i);
      EXPECT_LT(p, size);
      seen.insert(p);
      moved |= p != i;
    }
    EXPECT_EQ(seen.size(), size);
    if (size > 16) EXPECT_TRUE(moved) << size;
  }
}

TEST(Generate, OwnerIdsFollowTheSplitMatrix) {
  for (int64_t world : {1, 2, 3, 4, 8}) {
    for (uint64_t trial = 0; trial < 10; ++trial) {
      const int64_t total = 300 + static_cast<int64_t>(trial), bound = 1000;
      std::vector<int64_t> received(world, 0);
      for (int64_t r = 0; r < world; ++r) {
        Dist d{DistKind::owner_ids, static_cast<double>(bound), static_cast<double>(r), total, world, true, kSplitSlotBase};
        Dist send{DistKind::split, 0.0, static_cast<double>(r), total, world, true, kSplitSlotBase};
        auto ids = draw_i64(d, input_key(11, trial, r, 0, d), total);
        auto row = draw_i64(send, input_key(11, trial, r, 1, send), world);  // the same matrix's row
        std::vector<int64_t> owned(world, 0);
        int descents = 0;
        for (int64_t i = 0; i < total; ++i) {
          ASSERT_GE(ids[i], 0);
          ASSERT_LT(ids[i], bound);
          ++owned[ids[i] % world];
          descents += i > 0 && ids[i] % world < ids[i - 1] % world;
        }
        EXPECT_EQ(owned, row) << "W " << world << " rank " << r;
        for (int64_t o = 0; o < world; ++o) received[o] += owned[o];
        int64_t nonempty = 0;
        for (int64_t o = 0; o < world; ++o) nonempty += owned[o] > 0;
        if (nonempty > 1) EXPECT_GT(descents, 0) << "owners arrive sorted";
      }
      for (int64_t o = 0; o < world; ++o) EXPECT_EQ(received[o], total) << "what owner " << o << " receives";
    }
  }
}

TEST(Generate, CompositionsHaveStaticTotalsAndVaryingParts) {
  const int64_t mean = 12, rows = 7, cols = 64, numel = rows * cols;
  for (int64_t world : {1, 2, 3, 4, 8}) {
    std::vector<std::vector<int64_t>> v;
    for (int64_t r = 0; r < world; ++r) {
      Dist d{DistKind::composition, static_cast<double>(numel), static_cast<double>(r), mean, world, true};
      v.push_back(draw_i64(d, input_key(3, 4, r, 0, d), numel));
      std::vector<double> f(numel);  // a floating tensor holds the same integers
      for (int64_t i = 0; i < numel; ++i) generate_element(f.data(), DType::fp64, d, input_key(3, 4, r, 0, d), i);
      for (int64_t i = 0; i < numel; ++i) EXPECT_EQ(f[i], static_cast<double>(v[r][i]));
    }
    std::set<int64_t> row_sums;
    for (int64_t r = 0; r < world; ++r) {
      int64_t sum = 0;
      for (int64_t i = 0; i < numel; ++i) {
        EXPECT_GE(v[r][i], 0);
        EXPECT_LE(v[r][i], 2 * mean);
        sum += v[r][i];
      }
      EXPECT_EQ(sum, numel * mean) << "rank " << r;
      for (int64_t q = 0; q < rows; ++q) {
        int64_t s = 0;
        for (int64_t c = 0; c < cols; ++c) s += v[r][q * cols + c];
        row_sums.insert(s);
      }
    }
    for (int64_t i = 0; i < numel; ++i) {
      int64_t s = 0;
      for (int64_t r = 0; r < world; ++r) s += v[r][i];
      EXPECT_EQ(s, world * mean) << "position " << i;
    }
    if (world > 1) EXPECT_GT(row_sums.size(), 3u) << "row sums should vary, W " << world;
  }
}

TEST(Generate, OffsetsAreRowPointersWithAStaticTotal) {
  for (int64_t mean : {0, 1, 4, 16}) {
    const int64_t rows = 5000;  // mean 16: an empty row has probability 1/289
    Dist d{DistKind::offsets, static_cast<double>(rows + 1), 1.0, mean, 0};
    auto v = draw_i64(d, input_key(9, 2, 1, 0, d), rows + 1);
    EXPECT_EQ(v.front(), 0);
    EXPECT_EQ(v.back(), rows * mean);
    std::set<int64_t> lengths;
    for (int64_t i = 0; i < rows; ++i) {
      int64_t len = v[i + 1] - v[i];
      EXPECT_GE(len, 0) << "row " << i;
      EXPECT_LE(len, 2 * mean) << "row " << i;
      lengths.insert(len);
    }
    if (mean >= 4) {
      EXPECT_GT(lengths.size(), static_cast<size_t>(mean)) << "lengths should vary, mean " << mean;
      EXPECT_EQ(lengths.count(0), 1u) << "some rows should be empty, mean " << mean;
    }
    if (mean > 0) EXPECT_NE(draw_i64(d, input_key(9, 3, 1, 0, d), rows + 1), v) << "another call";
  }
  Dist one{DistKind::offsets, 1.0, 1.0, 8, 0};  // no rows: just the 0
  EXPECT_EQ(draw_i64(one, 5, 1), std::vector<int64_t>{0});
}

TEST(Generate, PermutationsHoldDistinctValuesInRandomOrder) {
  for (int64_t n : {1, 2, 17, 1000}) {
    for (int64_t numel : {n, (n + 1) / 2}) {
      Dist d{DistKind::permutation, 0.0, 1.0, n, 0};
      auto v = draw_i64(d, input_key(4, 1, 0, 3, d), static_cast<size_t>(numel));
      std::set<int64_t> seen(v.begin(), v.end());
      EXPECT_EQ(seen.size(), static_cast<size_t>(numel)) << "n " << n;
      for (int64_t x : v) {
        EXPECT_GE(x, 0);
        EXPECT_LT(x, n);
      }
      if (n > 16) {
        EXPECT_FALSE(std::is_sorted(v.begin(), v.end())) << "n " << n;
        EXPECT_NE(draw_i64(d, input_key(4, 2, 0, 3, d), static_cast<size_t>(numel)), v) << "another call";
      }
    }
  }
}

}  // namespace
}  // namespace pkb
