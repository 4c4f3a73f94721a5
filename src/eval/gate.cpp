#include "eval/gate.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace pkb {

CallGate::CallGate(int world, int round) : world_(world), round_(round) {
  if (world < 1 || round < 1) throw std::invalid_argument("CallGate: world and round must be positive");
}

void CallGate::committed(int job, int step, int rank, int call) {
  (void)rank;  // each rank commits each call once (the runner checks that); counting is enough
  std::lock_guard<std::mutex> lock(m_);
  auto& c = sides_[job].commits;
  if (step >= static_cast<int>(c.size())) c.resize(static_cast<size_t>(step) + 1);
  auto& calls = c[static_cast<size_t>(step)];
  if (call + 1 >= static_cast<int>(calls.size())) calls.resize(static_cast<size_t>(call) + 2, 0);
  ++calls[static_cast<size_t>(call + 1)];
}

int CallGate::count(const Side& s, int step, int call) const {
  if (step >= static_cast<int>(s.commits.size())) return 0;
  const auto& calls = s.commits[static_cast<size_t>(step)];
  return call + 1 < static_cast<int>(calls.size()) ? calls[static_cast<size_t>(call + 1)] : 0;
}

bool CallGate::may_answer(int job, int step, int call, int iters) const {
  std::lock_guard<std::mutex> lock(m_);
  const Side& self = sides_[job];
  const Side& other = sides_[1 - job];
  if (other.left) return true;
  int next = call + 1;
  if (next >= iters) return all(other, step, iters - 1);  // the last answer: the other has run everything
  if (next % round_ != 0) return true;  // within a round
  int k = next / round_;  // the round this answer starts
  if (!all(self, step, -1) || !all(other, step, -1)) return false;  // both warmed up first
  if (job == 0) return k == 0 || all(other, step, k * round_ - 1);  // after the candidate's round k - 1
  return all(other, step, std::min((k + 1) * round_, iters) - 1);  // after the baseline's round k
}

void CallGate::leave(int job) {
  std::lock_guard<std::mutex> lock(m_);
  sides_[job].left = true;
}

namespace {
double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
}  // namespace

RoundSpeedup round_speedup(const std::vector<double>& base_us, const std::vector<double>& cand_us, int round) {
  RoundSpeedup out;
  size_t n = std::min(base_us.size(), cand_us.size());
  if (round < 1 || n == 0) return out;
  std::vector<double> ratios;
  for (size_t at = 0; at < n; at += static_cast<size_t>(round)) {
    size_t end = std::min(n, at + static_cast<size_t>(round));
    std::vector<double> b(base_us.begin() + static_cast<long>(at), base_us.begin() + static_cast<long>(end));
    std::vector<double> c(cand_us.begin() + static_cast<long>(at), cand_us.begin() + static_cast<long>(end));
    double mc = median_of(c);
    if (mc > 0) ratios.push_back(median_of(b) / mc);
  }
  out.rounds = static_cast<int>(ratios.size());
  if (ratios.empty()) return out;
  out.median = median_of(ratios);
  std::sort(ratios.begin(), ratios.end());
  // The median lies below the j-th smallest of K ratios with probability P(Binomial(K, 1/2) < j):
  // the largest j with that at most 2.5 % on each side gives [r_(j), r_(K+1-j)], at least 95 %.
  int K = out.rounds;
  double tail = 0;
  int j = 0;
  for (int i = 0; i < K; ++i) {
    double p = std::exp(std::lgamma(K + 1.0) - std::lgamma(i + 1.0) - std::lgamma(K - i + 1.0) - K * std::log(2.0));
    if (tail + p > 0.025) break;
    tail += p;
    j = i + 1;
  }
  if (j >= 1) {
    out.lo = ratios[static_cast<size_t>(j - 1)];
    out.hi = ratios[static_cast<size_t>(K - j)];
  }
  return out;
}

}  // namespace pkb
