#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <nccl.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "calibrate/calibrate.hpp"
#include "core/cuda_check.hpp"
#include "eval/system.hpp"
#include "report/record.hpp"

namespace pkb {

namespace {

// ---- kernels -----------------------------------------------------------------------------------

__global__ void fill_kernel(uint32_t* p, size_t n, uint32_t salt) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t x = static_cast<uint32_t>(i) * 2654435761u ^ salt;
    x ^= x >> 13;
    // Keep bf16 halves finite and moderate: exponent bits of each half in a safe range.
    p[i] = (x & 0x807F807Fu) | 0x3C003C00u;
  }
}

/// 16-byte copy, grid-stride: the SM push/pull/HBM probe.
__global__ void copy16(const int4* __restrict__ src, int4* __restrict__ dst, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) dst[i] = src[i];
}

/// Push n_per_peer vectors to each peer: blockIdx.y picks the peer.
__global__ void push_all(const int4* __restrict__ src, int4* const* dsts, size_t n_per_peer) {
  int4* dst = dsts[blockIdx.y];
  const int4* s = src + blockIdx.y * n_per_peer;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n_per_peer; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = s[i];
}

__global__ void empty_kernel() {}

__device__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/// Ping-pong: `send` lives on the peer, `recv` locally. The initiator sends first.
__global__ void ping_pong(volatile unsigned* send, volatile unsigned* recv, int iters, bool initiator, unsigned* failed) {
  unsigned long long deadline = now_ns() + 2000000000ull;  // 2 s: never hang calibration
  for (int i = 1; i <= iters; ++i) {
    if (initiator) {
      *send = i;
      __threadfence_system();
    }
    while (*recv < static_cast<unsigned>(i))
      if (now_ns() > deadline) {
        *failed = 1;
        return;
      }
    if (!initiator) {
      *send = i;
      __threadfence_system();
    }
  }
}

// ---- helpers -----------------------------------------------------------------------------------

struct Dev {
  int id = 0;
  cudaStream_t stream = nullptr;
  void* src = nullptr;
  void* dst = nullptr;
  int sms = 0;
};

class Devices {
 public:
  Devices(int n, size_t bytes) : devs_(n) {
    for (int d = 0; d < n; ++d) {
      Dev& v = devs_[d];
      v.id = d;
      CUDA_CHECK(cudaSetDevice(d));
      CUDA_CHECK(cudaStreamCreateWithFlags(&v.stream, cudaStreamNonBlocking));
      CUDA_CHECK(cudaMalloc(&v.src, bytes));
      CUDA_CHECK(cudaMalloc(&v.dst, bytes));
      cudaDeviceProp p;
      CUDA_CHECK(cudaGetDeviceProperties(&p, d));
      v.sms = p.multiProcessorCount;
      fill_kernel<<<1024, 256, 0, v.stream>>>(static_cast<uint32_t*>(v.src), bytes / 4, 0x1234u + d);
      CUDA_CHECK(cudaGetLastError());
      for (int e = 0; e < n; ++e) {
        if (e == d) continue;
        int ok = 0;
        CUDA_CHECK(cudaDeviceCanAccessPeer(&ok, d, e));
        if (!ok) all_p2p_ = false;
        cudaError_t r = cudaDeviceEnablePeerAccess(e, 0);
        if (r != cudaSuccess && r != cudaErrorPeerAccessAlreadyEnabled) CUDA_CHECK(r);
        cudaGetLastError();
      }
    }
    sync();
  }
  ~Devices() {
    for (auto& v : devs_) {
      cudaSetDevice(v.id);
      cudaFree(v.src);
      cudaFree(v.dst);
      cudaStreamDestroy(v.stream);
    }
  }
  Dev& operator[](int i) { return devs_[i]; }
  int size() const { return static_cast<int>(devs_.size()); }
  bool all_p2p() const { return all_p2p_; }
  void sync() {
    for (auto& v : devs_) {
      CUDA_CHECK(cudaSetDevice(v.id));
      CUDA_CHECK(cudaStreamSynchronize(v.stream));
    }
  }

 private:
  std::vector<Dev> devs_;
  bool all_p2p_ = true;
};

/// Milliseconds per repetition of `work` on one device's stream (one warm-up first).
template <typename F>
double time_ms(Dev& d, int reps, F&& work) {
  CUDA_CHECK(cudaSetDevice(d.id));
  work();
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  CUDA_CHECK(cudaEventRecord(a, d.stream));
  for (int r = 0; r < reps; ++r) work();
  CUDA_CHECK(cudaEventRecord(b, d.stream));
  CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  CUDA_CHECK(cudaGetLastError());
  return ms / reps;
}

/// Runs `work(d)` on every device at once; returns the slowest device's ms per repetition.
template <typename F>
double time_all_ms(Devices& devs, int reps, F&& work) {
  int n = devs.size();
  std::vector<cudaEvent_t> a(n), b(n);
  for (int d = 0; d < n; ++d) {
    CUDA_CHECK(cudaSetDevice(d));
    work(devs[d]);  // warm-up
  }
  devs.sync();
  for (int d = 0; d < n; ++d) {
    CUDA_CHECK(cudaSetDevice(d));
    CUDA_CHECK(cudaEventCreate(&a[d]));
    CUDA_CHECK(cudaEventCreate(&b[d]));
    CUDA_CHECK(cudaEventRecord(a[d], devs[d].stream));
    for (int r = 0; r < reps; ++r) work(devs[d]);
    CUDA_CHECK(cudaEventRecord(b[d], devs[d].stream));
  }
  double worst = 0;
  for (int d = 0; d < n; ++d) {
    CUDA_CHECK(cudaSetDevice(d));
    CUDA_CHECK(cudaEventSynchronize(b[d]));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a[d], b[d]));
    worst = std::max(worst, static_cast<double>(ms) / reps);
    cudaEventDestroy(a[d]);
    cudaEventDestroy(b[d]);
  }
  return worst;
}

double gbps(size_t bytes, double ms) { return ms > 0 ? static_cast<double>(bytes) / (ms * 1e6) : 0.0; }

void launch_copy(Dev& on, const void* src, void* dst, size_t bytes) {
  copy16<<<2 * on.sms, 512, 0, on.stream>>>(static_cast<const int4*>(src), static_cast<int4*>(dst), bytes / 16);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// ---- measurements ------------------------------------------------------------------------------

std::vector<PairRate> measure_pairs(Devices& devs, size_t bytes, int reps) {
  std::vector<PairRate> out;
  for (int i = 0; i < devs.size(); ++i)
    for (int j = 0; j < devs.size(); ++j) {
      if (i == j) continue;
      PairRate p{i, j, 0, 0, 0};
      p.store_gbps = gbps(bytes, time_ms(devs[i], reps, [&] { launch_copy(devs[i], devs[i].src, devs[j].dst, bytes); }));
      p.load_gbps = gbps(bytes, time_ms(devs[i], reps, [&] { launch_copy(devs[i], devs[j].src, devs[i].dst, bytes); }));
      p.ce_gbps = gbps(bytes, time_ms(devs[i], reps, [&] {
                         CUDA_CHECK(cudaMemcpyPeerAsync(devs[j].dst, j, devs[i].src, i, bytes, devs[i].stream));
                       }));
      out.push_back(p);
    }
  return out;
}

double measure_ring(Devices& devs, size_t bytes, int reps) {
  int n = devs.size();
  double ms = time_all_ms(devs, reps, [&](Dev& d) { launch_copy(d, d.src, devs[(d.id + 1) % n].dst, bytes); });
  return gbps(bytes, ms);
}

double measure_all_to_all(Devices& devs, size_t bytes, int reps) {
  int n = devs.size();
  size_t per_peer = bytes / 16 / (n - 1);
  std::vector<int4**> tables(n);
  for (int d = 0; d < n; ++d) {
    std::vector<int4*> peers;
    for (int e = 0; e < n; ++e)
      if (e != d) peers.push_back(static_cast<int4*>(devs[e].dst) + d * per_peer);
    CUDA_CHECK(cudaSetDevice(d));
    CUDA_CHECK(cudaMalloc(&tables[d], sizeof(int4*) * peers.size()));
    CUDA_CHECK(cudaMemcpy(tables[d], peers.data(), sizeof(int4*) * peers.size(), cudaMemcpyHostToDevice));
  }
  double ms = time_all_ms(devs, reps, [&](Dev& d) {
    dim3 grid(std::max(1, 2 * d.sms / (n - 1)), n - 1);
    push_all<<<grid, 512, 0, d.stream>>>(static_cast<const int4*>(d.src), tables[d.id], per_peer);
  });
  for (int d = 0; d < n; ++d) {
    cudaSetDevice(d);
    cudaFree(tables[d]);
  }
  return gbps(per_peer * 16 * (n - 1), ms);
}

double measure_hbm(Dev& d, size_t bytes, int reps) {
  void *a = nullptr, *b = nullptr;
  CUDA_CHECK(cudaSetDevice(d.id));
  CUDA_CHECK(cudaMalloc(&a, bytes));
  CUDA_CHECK(cudaMalloc(&b, bytes));
  fill_kernel<<<1024, 256, 0, d.stream>>>(static_cast<uint32_t*>(a), bytes / 4, 7u);
  double ms = time_ms(d, reps, [&] { launch_copy(d, a, b, bytes); });
  cudaFree(a);
  cudaFree(b);
  return gbps(2 * bytes, ms);  // bytes read + bytes written
}

double measure_gemm(Dev& d, int n, bool bf16, int reps) {
  CUDA_CHECK(cudaSetDevice(d.id));
  size_t elems = static_cast<size_t>(n) * n;
  size_t esz = bf16 ? 2 : 4;
  void *A, *B, *C;
  CUDA_CHECK(cudaMalloc(&A, elems * esz));
  CUDA_CHECK(cudaMalloc(&B, elems * esz));
  CUDA_CHECK(cudaMalloc(&C, elems * 4));
  fill_kernel<<<1024, 256, 0, d.stream>>>(static_cast<uint32_t*>(A), elems * esz / 4, 11u);
  fill_kernel<<<1024, 256, 0, d.stream>>>(static_cast<uint32_t*>(B), elems * esz / 4, 13u);
  cublasHandle_t h;
  CUBLAS_CHECK(cublasCreate(&h));
  CUBLAS_CHECK(cublasSetStream(h, d.stream));
  float alpha = 1.0f, beta = 0.0f;
  auto run = [&] {
    if (bf16)
      CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, A, CUDA_R_16BF, n, B, CUDA_R_16BF, n, &beta, C,
                                CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    else
      CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, static_cast<float*>(A), n,
                               static_cast<float*>(B), n, &beta, static_cast<float*>(C), n));
  };
  double ms = time_ms(d, reps, run);
  cublasDestroy(h);
  cudaFree(A);
  cudaFree(B);
  cudaFree(C);
  return 2.0 * n * double(n) * n / (ms * 1e9);  // TFLOP/s
}

double measure_launch(Dev& d) {
  const int launches = 2000;
  double ms = time_ms(d, 1, [&] {
    for (int i = 0; i < launches; ++i) empty_kernel<<<1, 1, 0, d.stream>>>();
  });
  return ms * 1000.0 / launches;
}

double measure_flag_rtt(Devices& devs) {
  const int iters = 2000;
  unsigned *f0, *f1, *failed0, *failed1;
  CUDA_CHECK(cudaSetDevice(0));
  CUDA_CHECK(cudaMalloc(&f0, 4));
  CUDA_CHECK(cudaMalloc(&failed0, 4));
  CUDA_CHECK(cudaMemset(f0, 0, 4));
  CUDA_CHECK(cudaMemset(failed0, 0, 4));
  CUDA_CHECK(cudaSetDevice(1));
  CUDA_CHECK(cudaMalloc(&f1, 4));
  CUDA_CHECK(cudaMalloc(&failed1, 4));
  CUDA_CHECK(cudaMemset(f1, 0, 4));
  CUDA_CHECK(cudaMemset(failed1, 0, 4));
  CUDA_CHECK(cudaDeviceSynchronize());
  cudaEvent_t a, b;
  CUDA_CHECK(cudaSetDevice(0));
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  CUDA_CHECK(cudaSetDevice(1));
  ping_pong<<<1, 1, 0, devs[1].stream>>>(f0, f1, iters, false, failed1);  // responder first
  CUDA_CHECK(cudaSetDevice(0));
  CUDA_CHECK(cudaEventRecord(a, devs[0].stream));
  ping_pong<<<1, 1, 0, devs[0].stream>>>(f1, f0, iters, true, failed0);
  CUDA_CHECK(cudaEventRecord(b, devs[0].stream));
  devs.sync();
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  unsigned bad0 = 0, bad1 = 0;
  CUDA_CHECK(cudaMemcpy(&bad0, failed0, 4, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaSetDevice(1));
  CUDA_CHECK(cudaMemcpy(&bad1, failed1, 4, cudaMemcpyDeviceToHost));
  cudaFree(f1);
  cudaFree(failed1);
  CUDA_CHECK(cudaSetDevice(0));
  cudaFree(f0);
  cudaFree(failed0);
  if (bad0 || bad1) return 0.0;  // the ping-pong timed out: report "not measured"
  return ms * 1000.0 / iters;
}

double measure_nccl_allreduce(Devices& devs, size_t bytes) {
  int n = devs.size();
  std::vector<ncclComm_t> comms(n);
  std::vector<int> ids(n);
  for (int d = 0; d < n; ++d) ids[d] = d;
  NCCL_CHECK(ncclCommInitAll(comms.data(), n, ids.data()));
  const int iters = 200;
  auto one = [&] {
    NCCL_CHECK(ncclGroupStart());
    for (int d = 0; d < n; ++d)
      NCCL_CHECK(ncclAllReduce(devs[d].src, devs[d].dst, bytes / 2, ncclBfloat16, ncclSum, comms[d], devs[d].stream));
    NCCL_CHECK(ncclGroupEnd());
  };
  for (int i = 0; i < 20; ++i) one();
  devs.sync();
  std::vector<cudaEvent_t> a(n), b(n);
  for (int d = 0; d < n; ++d) {
    CUDA_CHECK(cudaSetDevice(d));
    CUDA_CHECK(cudaEventCreate(&a[d]));
    CUDA_CHECK(cudaEventCreate(&b[d]));
    CUDA_CHECK(cudaEventRecord(a[d], devs[d].stream));
  }
  for (int i = 0; i < iters; ++i) one();
  double worst = 0;
  for (int d = 0; d < n; ++d) {
    CUDA_CHECK(cudaSetDevice(d));
    CUDA_CHECK(cudaEventRecord(b[d], devs[d].stream));
  }
  for (int d = 0; d < n; ++d) {
    CUDA_CHECK(cudaSetDevice(d));
    CUDA_CHECK(cudaEventSynchronize(b[d]));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a[d], b[d]));
    worst = std::max(worst, ms * 1000.0 / iters);
  }
  for (auto c : comms) ncclCommDestroy(c);
  return worst;
}

}  // namespace

CalibrateResult calibrate(const CalibrateOptions& opts) {
  setenv("NCCL_NVLS_ENABLE", "0", 1);  // never NVLink multicast on these machines
  SystemInfo sys = probe_system();
  int n = opts.gpus > 0 ? std::min(opts.gpus, sys.gpu_count) : sys.gpu_count;
  if (n < 1) fail(Errc::invalid_argument, "no GPU is visible: " + sys.error);
  const int steps = n > 1 ? 9 : 4;
  int step = 0;
  auto progress = [&](const std::string& what) {
    if (opts.progress) opts.progress(++step, steps, what);
  };
  CalibrateResult res;
  HardwareFacts& h = res.facts;
  h.gpu_name = sys.gpu_name;
  h.gpu_count = n;
  h.driver = sys.nvidia_driver;
  h.nccl = nccl_version_string(sys.nccl);
  h.measured_at = now_iso8601();
  Devices devs(n, opts.link_bytes);
  h.topology = n > 1 ? (devs.all_p2p() ? "peer access between every pair" : "some pairs lack peer access") : "single GPU";
  if (n > 1) {
    progress("peer bandwidth per pair (SM stores, SM loads, copy engine)");
    res.pairs = measure_pairs(devs, opts.link_bytes, opts.reps);
    std::vector<double> st, ld, ce;
    for (auto& p : res.pairs) {
      st.push_back(p.store_gbps);
      ld.push_back(p.load_gbps);
      ce.push_back(p.ce_gbps);
    }
    h.link_store_gbps = median(st);
    h.link_load_gbps = median(ld);
    h.link_ce_gbps = median(ce);
    progress("ring push, every GPU at once");
    h.ring_gbps = measure_ring(devs, opts.link_bytes, opts.reps);
    progress("all-to-all push, every GPU at once");
    h.all_to_all_gbps = measure_all_to_all(devs, opts.link_bytes, opts.reps);
  }
  progress("HBM copy bandwidth");
  h.hbm_gbps = measure_hbm(devs[0], opts.hbm_bytes, opts.reps);
  progress("bf16 GEMM (cuBLAS)");
  h.gemm_bf16_tflops = measure_gemm(devs[0], opts.gemm_n, true, opts.reps);
  progress("fp32 GEMM (cuBLAS)");
  h.gemm_fp32_tflops = measure_gemm(devs[0], opts.gemm_n / 2, false, opts.reps);
  progress("kernel launch cost");
  h.launch_us = measure_launch(devs[0]);
  if (n > 1) {
    progress("cross-GPU flag round trip");
    h.flag_rtt_us = measure_flag_rtt(devs);
    progress("NCCL all-reduce, 8 KiB");
    h.nccl_allreduce_8k_us = measure_nccl_allreduce(devs, 8192);
  }
  return res;
}

}  // namespace pkb
