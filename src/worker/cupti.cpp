#include "worker/cupti.hpp"

#include <cupti.h>
#include <cxxabi.h>
#include <time.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.hpp"
#include "worker/kernels.cuh"

namespace pkb::worker {

using profile::Activity;

/// What CUPTI's buffer callbacks collect, read once collection has stopped. CUPTI calls them from
/// its own thread, hence the lock.
struct ActivityRecorder::Sink {
  std::mutex mu;
  std::vector<Activity> activity;
  size_t kernels = 0, copies = 0, memsets = 0;  // records received, for the message when marks are missing
  size_t dropped = 0;  // records past kMaxActivity
};

namespace {

constexpr size_t kBufferBytes = 8u << 20;
constexpr size_t kMaxActivity = 200'000;  // a bound on what one rank reports

ActivityRecorder::Sink* g_sink = nullptr;  // the active recorder's (CUPTI's callbacks have no user data)

void check(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  throw Error(Errc::cuda_error, std::string("CUPTI ") + what + ": " + (s ? s : "unknown error"));
}

uint64_t CUPTIAPI monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

std::string demangled(const char* name) {
  if (!name) return "?";
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && d ? d : name;
  std::free(d);
  return out;
}

const char* copy_kind(uint8_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "PtoP";
    default: return "other";
  }
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void take(ActivityRecorder::Sink& sink, const CUpti_Activity* r) {
  auto add = [&](Activity a) {  // pkb's call marks are kept past the limit: the calls are found by them
    if (sink.activity.size() < kMaxActivity || a.name.find(kProfileMarkKernel) != std::string::npos)
      sink.activity.push_back(std::move(a));
    else ++sink.dropped;
  };
  switch (r->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
      auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(r);
      ++sink.kernels;
      add({Activity::Kind::kernel, demangled(k->name), k->streamId, k->start, k->end, 0});
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(r);
      ++sink.copies;
      add({Activity::Kind::memcpy, copy_kind(m->copyKind), m->streamId, m->start, m->end, m->bytes});
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {  // peer to peer
      auto* m = reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(r);
      ++sink.copies;
      add({Activity::Kind::memcpy, "PtoP", m->streamId, m->start, m->end, m->bytes});
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(r);
      ++sink.memsets;
      add({Activity::Kind::memset, "memset", m->streamId, m->start, m->end, m->bytes});
      break;
    }
    default: break;
  }
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  if (g_sink && valid > 0) {
    std::lock_guard<std::mutex> lock(g_sink->mu);
    CUpti_Activity* r = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) take(*g_sink, r);
  }
  std::free(buffer);
}

constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMCPY2, CUPTI_ACTIVITY_KIND_MEMSET};

void stop_collection() {
  for (auto k : kKinds) cuptiActivityDisable(k);
}

}  // namespace

ActivityRecorder::ActivityRecorder() {
  if (g_sink) throw Error(Errc::internal, "CUPTI: a second activity recorder in one process");
  static bool registered = false;  // once per process: a sweep profiles every size in the same runner
  g_sink = new Sink;
  try {
    if (!registered) {
      check(cuptiActivityRegisterTimestampCallback(monotonic_ns), "cannot take pkb's clock");
      check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cannot register its buffers");
      registered = true;
    }
    for (auto k : kKinds) check(cuptiActivityEnable(k), "cannot enable an activity kind");
  } catch (...) {
    stop_collection();
    delete g_sink;
    g_sink = nullptr;
    throw;
  }
  active_ = true;
}

ActivityRecorder::~ActivityRecorder() {
  if (!active_) return;
  stop_collection();
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  delete g_sink;
  g_sink = nullptr;
}

void ActivityRecorder::mark(cudaStream_t stream, int call) {
  launch_profile_mark(stream);
  calls_ = std::max(calls_, call + 1);
}

profile::RankProfile ActivityRecorder::finish(int rank) {
  if (!active_) throw Error(Errc::internal, "CUPTI: finish() twice");
  active_ = false;
  stop_collection();
  CUptiResult flushed = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::unique_ptr<Sink> sink(g_sink);  // owned here whatever happens next: the next recorder may start
  g_sink = nullptr;
  check(flushed, "cannot flush its buffers");
  std::lock_guard<std::mutex> lock(sink->mu);
  profile::RankProfile rp;
  rp.rank = rank;
  try {
    rp.calls = profile::calls_between_marks(sink->activity, calls_, kProfileMarkKernel);
  } catch (const Error& e) {
    throw Error(Errc::cuda_error,
                fmt::format("CUPTI: {} ({} kernels, {} copies, {} memsets recorded{})", e.what(), sink->kernels, sink->copies,
                            sink->memsets, sink->dropped ? fmt::format(", {} past the limit", sink->dropped) : ""));
  }
  rp.activity = std::move(sink->activity);
  rp.dropped = sink->dropped;
  return rp;
}

}  // namespace pkb::worker
