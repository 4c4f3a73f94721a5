#include "proto/plan.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/hash.hpp"
#include "core/philox.hpp"

namespace pkb {

using nlohmann::json;

void to_json(json& j, const Dist& d) {
  j = json{{"kind", static_cast<int>(d.kind)},
           {"a", d.a},
           {"b", d.b},
           {"lo", d.lo},
           {"hi", d.hi},
           {"shared", d.shared},
           {"slot", d.slot},
           {"heldout", d.heldout}};
  if (d.share_group >= 0) j["share_group"] = d.share_group;
}
void from_json(const json& j, Dist& d) {
  d.kind = static_cast<DistKind>(j.at("kind").get<int>());
  d.a = j.at("a").get<double>();
  d.b = j.at("b").get<double>();
  d.lo = j.at("lo").get<int64_t>();
  d.hi = j.at("hi").get<int64_t>();
  d.shared = j.value("shared", false);
  d.slot = j.value("slot", int64_t{-1});
  d.share_group = j.value("share_group", int64_t{-1});
  d.heldout = j.value("heldout", false);
}

void to_json(json& j, const TensorDesc& t) {
  j = json{{"name", t.name}, {"dtype", std::string(to_string(t.dtype))}, {"shape", t.shape}, {"dist", t.dist}};
  if (t.writable) j["writable"] = true;
  if (t.count_of >= 0) j["count_of"] = t.count_of;
}
void from_json(const json& j, TensorDesc& t) {
  t.name = j.at("name").get<std::string>();
  auto d = parse_dtype(j.at("dtype").get<std::string>());
  if (!d) fail(Errc::protocol_error, "plan: unknown dtype");
  t.dtype = *d;
  t.shape = j.at("shape").get<std::vector<long long>>();
  t.dist = j.at("dist").get<Dist>();
  t.writable = j.value("writable", false);
  t.count_of = j.value("count_of", -1);
}

void to_json(json& j, const TimingPlan& t) {
  j = json{{"enabled", t.enabled},
           {"graph", t.graph},
           {"checks", t.checks},
           {"warmup", t.warmup},
           {"warmup_budget_ms", t.warmup_budget_ms},
           {"iters", t.iters},
           {"groups", t.groups},
           {"l2_factor", t.l2_factor},
           {"samples_per_output", t.samples_per_output},
           {"predelay_us", t.predelay_us},
           {"full_checks", t.full_checks}};
}
void from_json(const json& j, TimingPlan& t) {
  t.enabled = j.at("enabled").get<bool>();
  t.graph = j.at("graph").get<bool>();
  t.checks = j.value("checks", true);
  t.warmup = j.at("warmup").get<int>();
  t.warmup_budget_ms = j.at("warmup_budget_ms").get<double>();
  t.iters = j.at("iters").get<int>();
  t.groups = j.at("groups").get<int>();
  t.l2_factor = j.at("l2_factor").get<double>();
  t.samples_per_output = j.at("samples_per_output").get<int>();
  t.predelay_us = j.at("predelay_us").get<double>();
  t.full_checks = j.value("full_checks", 0);
}

void to_json(json& j, const StepPlan& s) {
  json params = json::array();
  for (auto& [k, v] : s.params) params.push_back({{"name", k}, {"value", v}});
  json fparams = json::array(), tparams = json::array();
  for (auto& [k, v] : s.float_params) fparams.push_back({{"name", k}, {"value", v}});
  for (auto& p : s.trial_params) tparams.push_back({{"name", p.name}, {"low", p.low}, {"high", p.high}});
  j = json{{"name", s.name},          {"inputs", s.inputs},      {"outputs", s.outputs},         {"params", params},
           {"float_params", fparams}, {"trial_params", tparams}, {"trial_seeds", s.trial_seeds}, {"warmup_seed", s.warmup_seed},
           {"trials", s.trials},      {"timing", s.timing}};
  if (s.profile_calls > 0) j["profile_calls"] = s.profile_calls;
  // s.seed stays with the driver: it is never serialized.
}
void from_json(const json& j, StepPlan& s) {
  s.name = j.at("name").get<std::string>();
  s.inputs = j.at("inputs").get<std::vector<TensorDesc>>();
  s.outputs = j.at("outputs").get<std::vector<TensorDesc>>();
  for (size_t o = 0; o < s.outputs.size(); ++o) {
    int c = s.outputs[o].count_of;
    if (c < 0) continue;
    const TensorDesc* d = static_cast<size_t>(c) < s.outputs.size() && static_cast<size_t>(c) != o ? &s.outputs[c] : nullptr;
    if (!d || (d->dtype != DType::i32 && d->dtype != DType::i64) || d->numel() != 1 || s.outputs[o].shape.empty())
      fail(Errc::protocol_error,
           "plan: output '" + s.outputs[o].name + "' has a count that is not a one-element int32/int64 output");
  }
  for (auto& kv : j.at("params")) s.params.emplace_back(kv.at("name").get<std::string>(), kv.at("value").get<long long>());
  if (j.contains("float_params"))
    for (auto& kv : j.at("float_params"))
      s.float_params.emplace_back(kv.at("name").get<std::string>(), kv.at("value").get<double>());
  if (j.contains("trial_params"))
    for (auto& kv : j.at("trial_params"))
      s.trial_params.push_back({kv.at("name").get<std::string>(), kv.at("low").get<long long>(), kv.at("high").get<long long>()});
  s.trial_seeds = j.at("trial_seeds").get<std::vector<uint64_t>>();
  s.warmup_seed = j.at("warmup_seed").get<uint64_t>();
  s.trials = j.at("trials").get<int>();
  s.timing = j.at("timing").get<TimingPlan>();
  s.profile_calls = j.value("profile_calls", 0);
  if (s.profile_calls < 0 || s.profile_calls > kMaxProfileCalls) fail(Errc::protocol_error, "plan: profile_calls out of range");
}

void to_json(json& j, const WorkerPlan& p) {
  json groups = json::array();
  for (auto& g : p.groups) groups.push_back({{"name", g.name}, {"color", g.color}, {"key", g.key}, {"members", g.members}});
  j = json{{"role", p.role},
           {"problem", p.problem},
           {"world", p.world},
           {"rank", p.rank},
           {"device", p.device},
           {"oversubscribed", p.oversubscribed},
           {"dtype", std::string(to_string(p.dtype))},
           {"so_path", p.so_path},
           {"nccl_id", p.nccl_id_hex},
           {"groups", groups},
           {"send_inputs", p.send_inputs},
           {"link_gbps", p.link_gbps},
           {"hbm_gbps", p.hbm_gbps},
           {"steps", p.steps}};
  if (p.confine.enabled) j["confine"] = {{"hidden", p.confine.hidden}, {"writable", p.confine.writable}};
}

void from_json(const json& j, WorkerPlan& p) {
  p.role = j.at("role").get<std::string>();
  p.problem = j.at("problem").get<std::string>();
  p.world = j.at("world").get<int>();
  p.rank = j.at("rank").get<int>();
  p.device = j.at("device").get<int>();
  p.oversubscribed = j.value("oversubscribed", false);
  auto d = parse_dtype(j.at("dtype").get<std::string>());
  if (!d) fail(Errc::protocol_error, "plan: unknown dtype");
  p.dtype = *d;
  p.so_path = j.at("so_path").get<std::string>();
  p.nccl_id_hex = j.at("nccl_id").get<std::string>();
  for (auto& g : j.at("groups"))
    p.groups.push_back({g.at("name").get<std::string>(), g.at("color").get<int>(), g.at("key").get<int>(),
                        g.at("members").get<std::vector<int>>()});
  p.send_inputs = j.at("send_inputs").get<bool>();
  p.link_gbps = j.value("link_gbps", 0.0);
  p.hbm_gbps = j.value("hbm_gbps", 0.0);
  p.steps = j.at("steps").get<std::vector<StepPlan>>();
  if (j.contains("confine")) {
    p.confine.enabled = true;
    p.confine.hidden = j.at("confine").at("hidden").get<std::vector<std::string>>();
    p.confine.writable = j.at("confine").at("writable").get<std::vector<std::string>>();
  }
}

uint64_t poison_bits(uint64_t seed, uint64_t call) { return rng::mix64(rng::tensor_key(seed, kPoisonStream, call, 0)); }

namespace {
uint64_t derive(uint64_t seed, const char* domain, uint64_t index) {
  char buf[16];
  for (int i = 0; i < 8; ++i) buf[i] = static_cast<char>(seed >> (8 * i));
  for (int i = 0; i < 8; ++i) buf[8 + i] = static_cast<char>(index >> (8 * i));
  std::string h = Sha256().update(domain).update(std::string_view(buf, sizeof buf)).hex();
  return std::stoull(h.substr(0, 16), nullptr, 16);
}
}  // namespace

uint64_t stream_seed(uint64_t step_seed, uint64_t stream) { return derive(step_seed, "pkb-stream-v1", stream); }
uint64_t sample_key(uint64_t step_seed, int call) { return derive(step_seed, "pkb-sample-v1", static_cast<uint64_t>(call)); }

std::vector<int> full_check_calls(uint64_t step_seed, int iters, int count) {
  std::vector<int> calls;
  count = std::min(count, iters);
  for (uint64_t j = 0; static_cast<int>(calls.size()) < count; ++j) {
    int c = static_cast<int>(derive(step_seed, "pkb-full-v1", j) % static_cast<uint64_t>(iters));
    if (std::find(calls.begin(), calls.end(), c) == calls.end()) calls.push_back(c);
  }
  std::sort(calls.begin(), calls.end());
  return calls;
}

WorkerPlan seal_for_worker(WorkerPlan plan) {
  for (auto& st : plan.steps) {
    st.trial_seeds.clear();
    for (int t = 0; t < st.trials; ++t) st.trial_seeds.push_back(stream_seed(st.seed, static_cast<uint64_t>(t)));
    st.warmup_seed = stream_seed(st.seed, kWarmupStream);
    st.seed = 0;
  }
  return plan;
}

WorkerPlan seal_for_runner(WorkerPlan plan) {
  plan.send_inputs = false;
  for (auto& st : plan.steps) {
    st.seed = 0;
    st.trial_seeds.assign(st.trial_seeds.size(), 0);  // the count stays: the runner runs that many trials
    st.warmup_seed = 0;
    st.timing.samples_per_output = 0;
    st.timing.full_checks = 0;
  }
  return plan;
}

}  // namespace pkb

namespace pkb {
std::vector<uint64_t> sample_positions(uint64_t seed, int rank, int output, size_t numel, int k) {
  std::vector<uint64_t> pos;
  if (numel == 0) return pos;
  size_t n = std::min<size_t>(static_cast<size_t>(k), numel);
  uint64_t key = rng::tensor_key(seed, kSampleStream + static_cast<uint64_t>(output), static_cast<uint64_t>(rank), 0);
  pos.reserve(n);
  for (size_t j = 0; j < n; ++j) pos.push_back(rng::mix64(key ^ (j * 0x9E3779B97F4A7C15ull)) % numel);
  return pos;
}
}  // namespace pkb
