#include "core/cuda_check.hpp"
#include "core/digest.hpp"
#include "core/poison.hpp"
#include "core/ragged.hpp"
#include "worker/kernels.cuh"

namespace pkb::worker {

namespace {

constexpr int kThreads = 256;

int grid_for(size_t n, int per_thread = 1) {
  size_t blocks = (n + static_cast<size_t>(kThreads) * per_thread - 1) / (static_cast<size_t>(kThreads) * per_thread);
  return static_cast<int>(blocks < 1 ? 1 : (blocks > 4096 ? 4096 : blocks));
}

__global__ void generate_kernel(void* data, DType dtype, size_t n, Dist dist, uint64_t key) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    generate_element(data, dtype, dist, key, i);
}

template <typename T>
__global__ void fill_kernel(T* data, size_t n, T value) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) data[i] = value;
}

__device__ bool nonfinite_bits(DType d, uint64_t b) {
  switch (d) {
    case DType::bf16: return (b & 0x7F80u) == 0x7F80u;
    case DType::fp16: return (b & 0x7C00u) == 0x7C00u;
    case DType::fp32: return (b & 0x7F800000u) == 0x7F800000u;
    case DType::fp64: return (b & 0x7FF0000000000000ull) == 0x7FF0000000000000ull;
    case DType::fp8_e4m3: return (b & 0x7Fu) == 0x7Fu;  // NaN (it has no infinities)
    case DType::fp8_e5m2: return (b & 0x7Cu) == 0x7Cu;  // infinity or NaN
    default: return false;
  }
}

__device__ unsigned long long warp_sum(unsigned long long v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}

__device__ size_t checked_elems(size_t numel, const RowLimit& lim) {
  return lim.count ? counted_elems(load_count(lim.count, lim.count_dtype), lim.rows, lim.row_elems) : numel;
}

template <typename T>
__global__ void check_kernel(const T* data, DType dtype, size_t capacity, T poison, CheckSlot* slot, RowLimit lim) {
  unsigned long long digest = 0, unwritten = 0, nonfinite = 0;
  const size_t numel = checked_elems(capacity, lim);
  const size_t bytes = numel * sizeof(T);
  const uint32_t* words = reinterpret_cast<const uint32_t*>(data);
  const size_t nwords = bytes / 4;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < nwords; i += stride) digest += digest_word(words[i], i);
  if (bytes % 4 && blockIdx.x == 0 && threadIdx.x == 0) {  // zero-padded tail word
    uint32_t w = 0;
    const unsigned char* p = reinterpret_cast<const unsigned char*>(data) + nwords * 4;
    for (size_t b = 0; b < bytes % 4; ++b) w |= uint32_t(p[b]) << (8 * b);
    digest += digest_word(w, nwords);
  }
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < numel; i += stride) {
    T v = data[i];
    unwritten += v == poison;
    nonfinite += nonfinite_bits(dtype, static_cast<uint64_t>(v));
  }
  digest = warp_sum(digest);
  unwritten = warp_sum(unwritten);
  nonfinite = warp_sum(nonfinite);
  if ((threadIdx.x & 31) == 0) {
    atomicAdd(&slot->digest, digest);
    if (unwritten) atomicAdd(&slot->unwritten, unwritten);
    if (nonfinite) atomicAdd(&slot->nonfinite, nonfinite);
  }
}

template <typename T>
__global__ void gather_kernel(const T* data, const uint64_t* pos, int k, T* out, RowLimit lim) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= k) return;
  const size_t n = checked_elems(~size_t(0), lim);
  out[i] = pos[i] < n ? data[pos[i]] : T(0);
}

__global__ void barrier_delay_kernel(ncclDevComm dc, long long delay_ns) {
  {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), dc, ncclTeamTagLsa(), 0);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
  }
  if (threadIdx.x == 0 && delay_ns > 0) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    while (t - t0 < static_cast<unsigned long long>(delay_ns));
  }
  __syncthreads();
}

__global__ void peer_pointers_kernel(ncclWindow_t win, int world, int rank, int lsa_rank, int lsa_size, void** out) {
  int r = threadIdx.x;
  if (r >= world) return;
  int lsa_peer = lsa_rank + (r - rank);
  out[r] = (lsa_peer >= 0 && lsa_peer < lsa_size) ? ncclGetLsaPointer(win, 0, lsa_peer) : nullptr;
}

__global__ void profile_mark_kernel() {}

__global__ void spin_kernel(long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  while (t - t0 < static_cast<unsigned long long>(ns));
}

}  // namespace

void launch_profile_mark(cudaStream_t s) {
  profile_mark_kernel<<<1, 1, 0, s>>>();
  CUDA_CHECK(cudaGetLastError());
}

void launch_generate(void* data, DType dtype, size_t numel, const Dist& dist, uint64_t key, cudaStream_t s) {
  if (numel == 0) return;
  generate_kernel<<<grid_for(numel, 4), kThreads, 0, s>>>(data, dtype, numel, dist, key);
  CUDA_CHECK(cudaGetLastError());
}

void launch_fill_pattern(void* data, size_t elem_size, size_t numel, uint64_t pattern, cudaStream_t s) {
  if (numel == 0) return;
  int g = grid_for(numel, 4);
  switch (elem_size) {
    case 1: fill_kernel<<<g, kThreads, 0, s>>>(static_cast<uint8_t*>(data), numel, uint8_t(pattern)); break;
    case 2: fill_kernel<<<g, kThreads, 0, s>>>(static_cast<uint16_t*>(data), numel, uint16_t(pattern)); break;
    case 4: fill_kernel<<<g, kThreads, 0, s>>>(static_cast<uint32_t*>(data), numel, uint32_t(pattern)); break;
    case 8: fill_kernel<<<g, kThreads, 0, s>>>(static_cast<uint64_t*>(data), numel, uint64_t(pattern)); break;
    default: fail(Errc::internal, "fill: unsupported element size");
  }
  CUDA_CHECK(cudaGetLastError());
}

void launch_check(const void* data, DType dtype, size_t numel, uint64_t poison, CheckSlot* slot, cudaStream_t s,
                  RowLimit limit) {
  if (numel == 0) return;
  int g = grid_for(numel, 8);
  switch (dtype_size(dtype)) {
    case 1: check_kernel<<<g, kThreads, 0, s>>>(static_cast<const uint8_t*>(data), dtype, numel, uint8_t(poison), slot, limit); break;
    case 2: check_kernel<<<g, kThreads, 0, s>>>(static_cast<const uint16_t*>(data), dtype, numel, uint16_t(poison), slot, limit); break;
    case 4: check_kernel<<<g, kThreads, 0, s>>>(static_cast<const uint32_t*>(data), dtype, numel, uint32_t(poison), slot, limit); break;
    case 8: check_kernel<<<g, kThreads, 0, s>>>(static_cast<const uint64_t*>(data), dtype, numel, uint64_t(poison), slot, limit); break;
    default: fail(Errc::internal, "check: unsupported element size");
  }
  CUDA_CHECK(cudaGetLastError());
}

void launch_gather_samples(const void* data, size_t elem_size, const uint64_t* positions, int k, void* out, cudaStream_t s,
                           RowLimit limit) {
  if (k == 0) return;
  int g = (k + kThreads - 1) / kThreads;
  switch (elem_size) {
    case 1:
      gather_kernel<<<g, kThreads, 0, s>>>(static_cast<const uint8_t*>(data), positions, k, static_cast<uint8_t*>(out), limit);
      break;
    case 2:
      gather_kernel<<<g, kThreads, 0, s>>>(static_cast<const uint16_t*>(data), positions, k, static_cast<uint16_t*>(out), limit);
      break;
    case 4:
      gather_kernel<<<g, kThreads, 0, s>>>(static_cast<const uint32_t*>(data), positions, k, static_cast<uint32_t*>(out), limit);
      break;
    case 8:
      gather_kernel<<<g, kThreads, 0, s>>>(static_cast<const uint64_t*>(data), positions, k, static_cast<uint64_t*>(out), limit);
      break;
    default: fail(Errc::internal, "gather: unsupported element size");
  }
  CUDA_CHECK(cudaGetLastError());
}

void launch_barrier_delay(const ncclDevComm& dc, double delay_us, cudaStream_t s) {
  barrier_delay_kernel<<<1, 32, 0, s>>>(dc, static_cast<long long>(delay_us * 1000.0));
  CUDA_CHECK(cudaGetLastError());
}

void launch_peer_pointers(ncclWindow_t win, int world, int rank, int lsa_rank, int lsa_size, void** out, cudaStream_t s) {
  peer_pointers_kernel<<<1, 64, 0, s>>>(win, world, rank, lsa_rank, lsa_size, out);
  CUDA_CHECK(cudaGetLastError());
}

void launch_spin(double us, cudaStream_t s) {
  spin_kernel<<<1, 1, 0, s>>>(static_cast<long long>(us * 1000.0));
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace pkb::worker
