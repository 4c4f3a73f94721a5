// The profile phase of a rank's checker (--profile, issue 23): after the timed phase and its
// checks, a few more calls with CUPTI recording in the runner (worker/cupti.hpp). Each call is
// prepared as a timed call is (fresh inputs, L2 pushed out, barrier and GPU-side delay before
// pkb_run), so that the profile shows the calls the timing measured; their outputs are not
// checked and their times enter no timing record. The activity goes to the driver as one
// `profile` frame per step; a runner without CUPTI sends the reason instead, and the job goes on.
#include "core/cuda_check.hpp"
#include "worker/runner.hpp"
#include "worker/session.hpp"

namespace pkb::worker {

using nlohmann::json;

void Session::run_profile() {
  enter("profile");
  const TimingPlan& tp = step_->timing;
  cudaStream_t s = hs_->get();
  size_t l2 = l2_bytes_ ? l2_bytes_ : (60u << 20);
  DeviceBuffer flush(static_cast<size_t>(std::max(tp.l2_factor, 1.0) * static_cast<double>(l2)));
  json started = runner_->call({{"op", "profile_start"}});
  json body{{"step", step_index_}};
  if (started.contains("unavailable")) {
    body["error"] = started["unavailable"];
    send_message(fd_, {MsgKind::profile, std::move(body), {}});
    return;
  }
  // Call -1 is unmarked: CUPTI's first instrumented launches cost more than the rest.
  for (int i = -1; i < step_->profile_calls; ++i) {
    TensorSet& in = ins_[(i + 2) % 2];
    regenerate(in, step_->warmup_seed, kProfileStream + static_cast<uint64_t>(i + 1), nullptr);
    CUDA_CHECK(cudaMemsetAsync(flush.get(), (i + 1) & 0xff, flush.bytes(), s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    json op{{"delay_us", tp.predelay_us}, {"clear_l2", true}, {"barrier_after", true}};
    if (i >= 0) op["profile"] = i;
    run_call(in, op, nullptr, {});
  }
  json r = runner_->call({{"op", "profile_stop"}});
  if (r.contains("activity")) body["activity"] = std::move(r["activity"]);
  else body["error"] = r.value("unavailable", std::string("the solution's process returned no activity"));
  send_message(fd_, {MsgKind::profile, std::move(body), {}});
}

}  // namespace pkb::worker
