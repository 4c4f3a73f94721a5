// Baseline for problem 57 (ring attention backward over CP, gradients averaged over DP), PKB's ops in
// order (non-causal: PKB's create_input_tensor passes causal False, so every block is computed):
//
//   to_bhsd / row_dot once: q, dout -> fp32 [B, H, S, Dh]; row_dot = (dout . out) per query, [B, H, S]
//                 (PKB recomputes these inside every block; they do not change between steps)
//   for step = 0 .. CP-1 (the k, v block in hand comes from cp_rank - step):
//     if step + 1 < CP: grouped ncclSend(k, v -> cp_rank+1) / ncclRecv(next k, v <- cp_rank-1) on a
//                       side stream (PyTorch's batch_isend_irecv runs on its NCCL stream)
//     to_bhsd       k, v -> fp32 [B, H, S, Dh]                          (transpose(1, 2).float())
//     cuBLAS        scores = Q K^T                                       (torch.matmul, fp32)
//     probs         P = exp(scores Dh^-1/2 - lse) in place               (lse as given: PKB's quirk)
//     cuBLAS        dP = dO V^T
//     grad_scores   dS = P (dP - row_dot) in place of dP
//     cuBLAS        dq (+)= Dh^-1/2 dS K            (fp32, accumulated over the steps)
//     wait          the dk, dv accumulators of step-1 from cp_rank-1 (d_kv_comm.wait())
//     cuBLAS        dk = Dh^-1/2 dS^T Q (+ the received dk), dv = P^T dO (+ the received dv)
//     wait          next k, v (kv_comm.wait())
//     if CP > 1:    grouped ncclSend(dk, dv -> cp_rank+1) / ncclRecv(<- cp_rank-1), fp32: after the
//                   last step each rank receives the finished gradient of its own keys
//   to_d          dq, dk, dv (fp32 [B, H, S, Dh]) -> D [B, S, H, Dh]     (.to(q.dtype))
//   ncclAllReduce dq, dk, dv (sum, in D) in place over the DP pair; halve: one kernel for the three
//                                                                        (dist.all_reduce; div_(2))
//
// With CP = 1 (W = 2) it is PKB's world_size == 1 branch: one local block, no ring. The accumulators
// travel in the [B, H, S, Dh] layout (PKB's are [B, S, H, Dh]; the same values and bytes). The block
// GEMMs are full fp32 (CUBLAS_COMPUTE_32F, as torch.matmul on fp32 without TF32); the scale Dh^-1/2 =
// 1/8 is a power of two, so folding it into alpha changes no rounding, and the "+ received" adds
// are the GEMMs' beta = 1.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <pkb/solution.h>

#include <cmath>
#include <initializer_list>

namespace {

template <typename T> __device__ __forceinline__ float to_f(T x) { return static_cast<float>(x); }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }
template <> __device__ __forceinline__ float to_f<__half>(__half x) { return __half2float(x); }
template <typename T> __device__ __forceinline__ T from_f(float x) { return static_cast<T>(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }

__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

struct Dims {
  int B, S, H, Dh;
};

#define PKB_GRID_STRIDE(i, n)                                                              \
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<long long>(gridDim.x) * blockDim.x)

// [B, S, H, Dh] of T -> [B, H, S, Dh] of fp32 (i runs over the destination).
template <typename T>
__global__ void to_bhsd(const T* src, float* dst, Dims d) {
  long long n = static_cast<long long>(d.B) * d.S * d.H * d.Dh;
  PKB_GRID_STRIDE(i, n) {
    int e = static_cast<int>(i % d.Dh);
    long long r = i / d.Dh;
    int s = static_cast<int>(r % d.S);
    r /= d.S;
    int h = static_cast<int>(r % d.H);
    long long b = r / d.H;
    dst[i] = to_f(src[((b * d.S + s) * d.H + h) * d.Dh + e]);
  }
}

// [B, H, S, Dh] of fp32 -> [B, S, H, Dh] of T, rounded (i runs over the destination).
template <typename T>
__global__ void to_d(const float* src, T* dst, Dims d) {
  long long n = static_cast<long long>(d.B) * d.S * d.H * d.Dh;
  PKB_GRID_STRIDE(i, n) {
    int e = static_cast<int>(i % d.Dh);
    long long r = i / d.Dh;
    int h = static_cast<int>(r % d.H);
    r /= d.H;
    int s = static_cast<int>(r % d.S);
    long long b = r / d.S;
    dst[i] = from_f<T>(src[((b * d.H + h) * d.S + s) * d.Dh + e]);
  }
}

// row_dot[b, h, s] = sum_e dout[b, s, h, e] out[b, s, h, e] in fp32 (one warp per row).
template <typename T>
__global__ void row_dot(const T* dout, const T* out, float* dst, Dims d) {
  long long rows = static_cast<long long>(d.B) * d.H * d.S;
  long long row = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (row >= rows) return;
  int lane = threadIdx.x & 31;
  int s = static_cast<int>(row % d.S);
  int h = static_cast<int>((row / d.S) % d.H);
  long long b = row / (static_cast<long long>(d.S) * d.H);
  long long base = ((b * d.S + s) * d.H + h) * d.Dh;
  float acc = 0.0f;
  for (int e = lane; e < d.Dh; e += 32) acc += to_f(dout[base + e]) * to_f(out[base + e]);
  acc = warp_sum(acc);
  if (lane == 0) dst[row] = acc;
}

// In place over scores [B H S, S]: P = exp(scores * scale - lse[row]); lse is [B, H, S], one per row.
__global__ void probs(float* scores, const float* lse, long long n, int S, float scale) {
  PKB_GRID_STRIDE(i, n) scores[i] = expf(scores[i] * scale - lse[i / S]);
}

// In place over dp [B H S, S]: dS = P (dP - row_dot[row]).
__global__ void grad_scores(float* dp, const float* p, const float* rd, long long n, int S) {
  PKB_GRID_STRIDE(i, n) dp[i] = p[i] * (dp[i] - rd[i / S]);
}

// dq, dk, dv /= 2 in D (PKB's div_(dp_size) after each all-reduce; one launch for the three).
template <typename T>
__global__ void halve3(T* a, T* b, T* c, long long n, float div) {
  PKB_GRID_STRIDE(i, n) {
    a[i] = from_f<T>(to_f(a[i]) / div);
    b[i] = from_f<T>(to_f(b[i]) / div);
    c[i] = from_f<T>(to_f(c[i]) / div);
  }
}

struct State {
  Dims cap{};                        // the shapes the buffers were sized for (pkb_init)
  cudaStream_t comm = nullptr;       // side stream for both rings' send/recv
  cudaEvent_t ready = nullptr;       // compute stream -> comm stream: the next send/recv may start
  cudaEvent_t kv_arrived = nullptr;  // comm -> compute: next k, v received
  cudaEvent_t acc_arrived = nullptr; // comm -> compute: the dk, dv accumulators received
  void* kv[2][2] = {};               // [buffer][k or v] of D: ring receive buffers
  float *qf = nullptr, *dof = nullptr, *kf = nullptr, *vf = nullptr;  // fp32 [B, H, S, Dh]
  float* rd = nullptr;               // row_dot, fp32 [B, H, S]
  float* p = nullptr;                // fp32 [B H, S, S]: P
  float* ds = nullptr;               // fp32 [B H, S, S]: dP, then dS
  float* dq = nullptr;               // fp32 [B, H, S, Dh]
  float* acc[2][2] = {};             // [buffer][dk or dv], fp32 [B, H, S, Dh]: the travelling accumulators
};

unsigned blocks_for(long long threads) { return static_cast<unsigned>((threads + 255) / 256); }
unsigned grid_stride_blocks(long long n, const pkb_context* ctx) {
  long long cap = 16LL * (ctx->topo.sm_count > 0 ? ctx->topo.sm_count : 132);
  long long b = (n + 255) / 256;
  return static_cast<unsigned>(b < 1 ? 1 : (b > cap ? cap : b));
}

// Column-major view of the row-major block products, batched over B H with strides sd = S Dh, ss = S S.
int gemm(pkb_context* ctx, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
         const float* A, int lda, long long sa, const float* B, int ldb, long long sb, float beta, float* C,
         int ldc, long long sc, int batch) {
  PKB_CUBLAS(ctx, cublasGemmStridedBatchedEx(ctx->cublas, ta, tb, m, n, k, &alpha, A, CUDA_R_32F, lda, sa, B,
                                              CUDA_R_32F, ldb, sb, &beta, C, CUDA_R_32F, ldc, sc, batch,
                                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return 0;
}

// One block of PKB's _local_attn_backward: this rank's queries (st->qf, st->dof, st->rd, lse)
// against the k, v in hand. dq is accumulated in st->dq (from step 1 on); dk, dv land in `dk`, `dv`,
// added to what they hold when `add_kv` (the accumulators received from cp_rank-1: the compute stream
// waits for them just before their GEMMs, as PKB's d_kv_comm.wait() after dq).
template <typename T>
int block(pkb_context* ctx, State* st, Dims d, const T* k, const T* v, const float* lse, float* dk, float* dv,
          bool first, bool add_kv, float scale) {
  cudaStream_t s = ctx->stream;
  long long n = static_cast<long long>(d.B) * d.S * d.H * d.Dh;
  int batch = d.B * d.H;
  long long sd = static_cast<long long>(d.S) * d.Dh, ss = static_cast<long long>(d.S) * d.S;
  long long nss = static_cast<long long>(batch) * ss;
  to_bhsd<T><<<grid_stride_blocks(n, ctx), 256, 0, s>>>(k, st->kf, d);
  PKB_LAUNCH(ctx);
  to_bhsd<T><<<grid_stride_blocks(n, ctx), 256, 0, s>>>(v, st->vf, d);
  PKB_LAUNCH(ctx);
  // Row-major scores [S_q, S_k] = Q K^T is the column-major S_k x S_q product K^T(op T) * Q.
  if (gemm(ctx, CUBLAS_OP_T, CUBLAS_OP_N, d.S, d.S, d.Dh, 1.0f, st->kf, d.Dh, sd, st->qf, d.Dh, sd, 0.0f, st->p,
           d.S, ss, batch))
    return 1;
  probs<<<grid_stride_blocks(nss, ctx), 256, 0, s>>>(st->p, lse, nss, d.S, scale);
  PKB_LAUNCH(ctx);
  // dP [S_q, S_k] = dO V^T, the same shape of product.
  if (gemm(ctx, CUBLAS_OP_T, CUBLAS_OP_N, d.S, d.S, d.Dh, 1.0f, st->vf, d.Dh, sd, st->dof, d.Dh, sd, 0.0f, st->ds,
           d.S, ss, batch))
    return 1;
  grad_scores<<<grid_stride_blocks(nss, ctx), 256, 0, s>>>(st->ds, st->p, st->rd, nss, d.S);
  PKB_LAUNCH(ctx);
  // Row-major dq [S_q, Dh] += scale dS K is the column-major Dh x S_q product K * dS (both op N).
  if (gemm(ctx, CUBLAS_OP_N, CUBLAS_OP_N, d.Dh, d.S, d.S, scale, st->kf, d.Dh, sd, st->ds, d.S, ss,
           first ? 0.0f : 1.0f, st->dq, d.Dh, sd, batch))
    return 1;
  if (add_kv) PKB_CUDA(ctx, cudaStreamWaitEvent(s, st->acc_arrived, 0));
  // Row-major dk [S_k, Dh] = scale dS^T Q is the column-major Dh x S_k product Q * dS^T (dS op T);
  // dv [S_k, Dh] = P^T dO likewise.
  const float beta = add_kv ? 1.0f : 0.0f;
  if (gemm(ctx, CUBLAS_OP_N, CUBLAS_OP_T, d.Dh, d.S, d.S, scale, st->qf, d.Dh, sd, st->ds, d.S, ss, beta, dk, d.Dh,
           sd, batch))
    return 1;
  if (gemm(ctx, CUBLAS_OP_N, CUBLAS_OP_T, d.Dh, d.S, d.S, 1.0f, st->dof, d.Dh, sd, st->p, d.S, ss, beta, dv, d.Dh,
           sd, batch))
    return 1;
  return 0;
}

// Grouped send of (a, b) to `next` and receive of (ra, rb) from `prev` on the comm stream, after
// the compute stream's work so far; `arrived` is recorded when it is done.
int ring_round(pkb_context* ctx, State* st, const pkb_group* cp, const void* a, const void* b, void* ra, void* rb,
               size_t count, ncclDataType_t dt, cudaEvent_t arrived) {
  int next = (cp->rank + 1) % cp->size, prev = (cp->rank - 1 + cp->size) % cp->size;
  PKB_CUDA(ctx, cudaEventRecord(st->ready, ctx->stream));
  PKB_CUDA(ctx, cudaStreamWaitEvent(st->comm, st->ready, 0));
  PKB_NCCL(ctx, ncclGroupStart());
  PKB_NCCL(ctx, ncclSend(a, count, dt, next, cp->comm, st->comm));
  PKB_NCCL(ctx, ncclRecv(ra, count, dt, prev, cp->comm, st->comm));
  PKB_NCCL(ctx, ncclSend(b, count, dt, next, cp->comm, st->comm));
  PKB_NCCL(ctx, ncclRecv(rb, count, dt, prev, cp->comm, st->comm));
  PKB_NCCL(ctx, ncclGroupEnd());
  PKB_CUDA(ctx, cudaEventRecord(arrived, st->comm));
  return 0;
}

template <typename T>
int run_typed(pkb_context* ctx, const pkb_tensor* in, pkb_tensor* out) {
  State* st = static_cast<State*>(ctx->user);
  const pkb_group* cp = ctx->find_group(ctx, "cp");
  const pkb_group* dp = ctx->find_group(ctx, "dp");
  if (!cp || !dp) {
    ctx->set_error(ctx, "the spec's cp and dp groups are missing");
    return 1;
  }
  Dims d = st->cap;
  for (int i = 0; i < 5; ++i)
    if (in[i].shape[0] != d.B || in[i].shape[1] != d.S || in[i].shape[2] != d.H || in[i].shape[3] != d.Dh) {
      ctx->set_error(ctx, "input shape differs from the size variables pkb_init sized its buffers for");
      return 1;
    }
  const T* dout = static_cast<const T*>(in[0].data);
  const T* k = static_cast<const T*>(in[2].data);
  const T* v = static_cast<const T*>(in[3].data);
  const float* lse = static_cast<const float*>(in[5].data);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.Dh)));  // softmax_scale None
  const long long n = static_cast<long long>(d.B) * d.S * d.H * d.Dh;
  const long long rows = static_cast<long long>(d.B) * d.H * d.S;
  const int world = cp->size;
  cudaStream_t s = ctx->stream;

  to_bhsd<T><<<grid_stride_blocks(n, ctx), 256, 0, s>>>(static_cast<const T*>(in[1].data), st->qf, d);
  PKB_LAUNCH(ctx);
  to_bhsd<T><<<grid_stride_blocks(n, ctx), 256, 0, s>>>(dout, st->dof, d);
  PKB_LAUNCH(ctx);
  row_dot<T><<<blocks_for(rows * 32), 256, 0, s>>>(dout, static_cast<const T*>(in[4].data), st->rd, d);
  PKB_LAUNCH(ctx);
  for (int step = 0; step < world; ++step) {
    bool forward = step + 1 < world;
    T* next_k = static_cast<T*>(st->kv[step % 2][0]);
    T* next_v = static_cast<T*>(st->kv[step % 2][1]);
    // The receive buffers were last read by the previous step's block (ring_round orders after it).
    if (forward && ring_round(ctx, st, cp, k, v, next_k, next_v, static_cast<size_t>(n),
                              pkb_nccl_dtype(ctx->dtype), st->kv_arrived))
      return 1;
    // Step s writes accumulator buffer s % 2: at s >= 1 it holds what cp_rank-1 sent at step s-1.
    float** acc = st->acc[step % 2];
    if (block<T>(ctx, st, d, k, v, lse, acc[0], acc[1], /*first=*/step == 0, /*add_kv=*/step > 0, scale)) return 1;
    if (forward) {
      PKB_CUDA(ctx, cudaStreamWaitEvent(s, st->kv_arrived, 0));
      k = next_k;
      v = next_v;
    }
    // Pass dk, dv on; buffer (s+1) % 2 was sent at step s-1, earlier on the same comm stream.
    if (world > 1) {
      float** nxt = st->acc[(step + 1) % 2];
      if (ring_round(ctx, st, cp, acc[0], acc[1], nxt[0], nxt[1], static_cast<size_t>(n), ncclFloat32,
                     st->acc_arrived))
        return 1;
    }
  }
  // After the last round the gradient of this rank's own keys sits in buffer CP % 2 (0 without a ring).
  float** fin = st->acc[world > 1 ? world % 2 : 0];
  if (world > 1) PKB_CUDA(ctx, cudaStreamWaitEvent(s, st->acc_arrived, 0));
  const float* grads[3] = {st->dq, fin[0], fin[1]};
  for (int o = 0; o < 3; ++o) {
    to_d<T><<<grid_stride_blocks(n, ctx), 256, 0, s>>>(grads[o], static_cast<T*>(out[o].data), d);
    PKB_LAUNCH(ctx);
  }
  if (dp->size > 1) {
    PKB_NCCL(ctx, ncclGroupStart());
    for (int o = 0; o < 3; ++o)
      PKB_NCCL(ctx, ncclAllReduce(out[o].data, out[o].data, static_cast<size_t>(n), pkb_nccl_dtype(ctx->dtype),
                                  ncclSum, dp->comm, s));
    PKB_NCCL(ctx, ncclGroupEnd());
    halve3<T><<<grid_stride_blocks(n, ctx), 256, 0, s>>>(static_cast<T*>(out[0].data), static_cast<T*>(out[1].data),
                                                         static_cast<T*>(out[2].data), n,
                                                         static_cast<float>(dp->size));
    PKB_LAUNCH(ctx);
  }
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  State* st = new State;
  ctx->user = st;
  Dims d{static_cast<int>(ctx->param(ctx, "B", 0)), static_cast<int>(ctx->param(ctx, "S", 0)),
         static_cast<int>(ctx->param(ctx, "H", 0)), static_cast<int>(ctx->param(ctx, "Dh", 0))};
  st->cap = d;
  size_t n = static_cast<size_t>(d.B) * d.S * d.H * d.Dh;
  size_t rows = static_cast<size_t>(d.B) * d.H * d.S;
  PKB_CUDA(ctx, cudaStreamCreateWithFlags(&st->comm, cudaStreamNonBlocking));
  for (cudaEvent_t* e : {&st->ready, &st->kv_arrived, &st->acc_arrived})
    PKB_CUDA(ctx, cudaEventCreateWithFlags(e, cudaEventDisableTiming));
  for (auto& buf : st->kv)
    for (auto& p : buf) PKB_CUDA(ctx, cudaMalloc(&p, n * pkb_dtype_size(ctx->dtype)));
  for (float** p : {&st->qf, &st->dof, &st->kf, &st->vf, &st->dq, &st->acc[0][0], &st->acc[0][1], &st->acc[1][0],
                    &st->acc[1][1]})
    PKB_CUDA(ctx, cudaMalloc(p, n * sizeof(float)));
  PKB_CUDA(ctx, cudaMalloc(&st->rd, rows * sizeof(float)));
  PKB_CUDA(ctx, cudaMalloc(&st->p, rows * d.S * sizeof(float)));
  PKB_CUDA(ctx, cudaMalloc(&st->ds, rows * d.S * sizeof(float)));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  switch (ctx->dtype) {
    case PKB_BF16: return run_typed<__nv_bfloat16>(ctx, in, out);
    case PKB_FP16: return run_typed<__half>(ctx, in, out);
    case PKB_FP32: return run_typed<float>(ctx, in, out);
    default: ctx->set_error(ctx, "unsupported dtype"); return 1;
  }
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  State* st = static_cast<State*>(ctx->user);
  if (!st) return 0;
  for (auto& buf : st->kv)
    for (auto& p : buf) PKB_CUDA(ctx, cudaFree(p));
  for (float* p : {st->qf, st->dof, st->kf, st->vf, st->dq, st->acc[0][0], st->acc[0][1], st->acc[1][0],
                   st->acc[1][1], st->rd, st->p, st->ds})
    PKB_CUDA(ctx, cudaFree(p));
  for (cudaEvent_t e : {st->ready, st->kv_arrived, st->acc_arrived}) PKB_CUDA(ctx, cudaEventDestroy(e));
  PKB_CUDA(ctx, cudaStreamDestroy(st->comm));
  delete st;
  ctx->user = nullptr;
  return 0;
}
