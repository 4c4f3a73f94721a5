// Baseline for problem 55 (CP x TP attention layer, forward), PKB's ops in order:
//
//   cuBLAS        qkv = hidden_states w_qkv^T, [B S, 3 HL Dh] in D             (F.linear)
//   split_kv      k, v = qkv[:, :, 1], qkv[:, :, 2] -> contiguous [B, S, HL, Dh] (the .contiguous()
//                 copies of the unbind views; q is read in place from qkv by to_bhsd)
//   ring attention over the CP group (54's baseline with the group's communicator and HL heads):
//   for step = 0 .. CP-1 (the k, v block in hand comes from cp_rank - step):
//     if step + 1 < CP: grouped ncclSend(k, v -> cp_rank+1) / ncclRecv(next k, v <- cp_rank-1) on a
//                       side stream (batch_isend_irecv on PyTorch's NCCL stream overlaps the block's
//                       compute; the compute stream waits for it at the end of the step)
//     if step <= cp_rank (blocks of later CP ranks are skipped, but still forwarded):
//       to_bhsd       k, v (and q once) -> fp32 [B, HL, S, Dh]               (transpose(1, 2).float())
//       cuBLAS        scores = Q K^T, fp32 batched GEMM over B HL            (torch.matmul)
//       scale_mask    scores *= Dh^-1/2; on step 0, -inf above the diagonal (causal block)
//       row_lse       lse = logsumexp(scores, -1)
//       row_softmax   P = softmax(scores, -1), in place
//       cuBLAS        block_out = P V, fp32 batched GEMM
//       merge         step 0: out, lse = the block; later steps: out -= sigmoid(block_lse - lse)
//                     (out - block_out); lse -= logsigmoid(lse - block_lse)
//   to_d          ctx = out (fp32) -> D, [B S, HL Dh]                        (out.to(q.dtype))
//   cuBLAS        y = ctx w_o^T straight into the output, [B S, HS] in D     (F.linear)
//   ncclAllReduce y (sum) in place over the TP group                         (dist.all_reduce)
//
// With CP = 1 (W = 2) the ring is PKB's world_size == 1 branch: one causal block, no send/recv.
// GEMMs: D in and out with fp32 accumulation for the projections (CUBLAS_COMPUTE_32F, no TF32 for
// fp32); the attention GEMMs are full fp32 (torch.matmul on fp32 without TF32).
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

__device__ __forceinline__ float warp_max(float x) {
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

struct Dims {
  int B, S, H, Dh;  // H: the heads this rank attends over (HL)
};

#define PKB_GRID_STRIDE(i, n)                                                              \
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<long long>(gridDim.x) * blockDim.x)

// [B, S, (row of `row` elements) H, Dh] of T -> [B, H, S, Dh] of fp32 (i runs over the destination);
// row = H Dh for a contiguous tensor, 3 H Dh for q read in place from qkv.
template <typename T>
__global__ void to_bhsd(const T* src, long long row, float* dst, Dims d) {
  long long n = static_cast<long long>(d.B) * d.S * d.H * d.Dh;
  PKB_GRID_STRIDE(i, n) {
    int e = static_cast<int>(i % d.Dh);
    long long r = i / d.Dh;
    int s = static_cast<int>(r % d.S);
    r /= d.S;
    int h = static_cast<int>(r % d.H);
    long long b = r / d.H;
    dst[i] = to_f(src[(b * d.S + s) * row + static_cast<long long>(h) * d.Dh + e]);
  }
}

// k, v [B S, H Dh] = the second and third thirds of each qkv row [B S, 3 H Dh].
template <typename T>
__global__ void split_kv(const T* qkv, T* k, T* v, long long rows, int width) {
  long long n = rows * width;
  PKB_GRID_STRIDE(i, n) {
    long long r = i / width;
    int c = static_cast<int>(i % width);
    const T* src = qkv + r * 3 * width + c;
    k[i] = src[width];
    v[i] = src[2 * width];
  }
}

// scores [B H, S, S] *= scale; with `causal`, entries above the diagonal become -inf.
__global__ void scale_mask(float* scores, long long n, int S, float scale, bool causal) {
  PKB_GRID_STRIDE(i, n) {
    int j = static_cast<int>(i % S);
    int q = static_cast<int>((i / S) % S);
    float v = scores[i] * scale;
    scores[i] = (causal && j > q) ? -INFINITY : v;
  }
}

// lse[row] = max + log(sum exp(x - max)) over each row of `cols` (one warp per row).
__global__ void row_lse(const float* x, float* lse, long long rows, int cols) {
  long long row = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (row >= rows) return;
  const float* p = x + row * cols;
  int lane = threadIdx.x & 31;
  float m = -INFINITY;
  for (int c = lane; c < cols; c += 32) m = fmaxf(m, p[c]);
  m = warp_max(m);
  float mm = isinf(m) ? 0.0f : m;  // as torch.logsumexp
  float s = 0.0f;
  for (int c = lane; c < cols; c += 32) s += expf(p[c] - mm);
  s = warp_sum(s);
  if (lane == 0) lse[row] = logf(s) + mm;
}

// In place: x = exp(x - max) / sum over each row (one warp per row).
__global__ void row_softmax(float* x, long long rows, int cols) {
  long long row = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (row >= rows) return;
  float* p = x + row * cols;
  int lane = threadIdx.x & 31;
  float m = -INFINITY;
  for (int c = lane; c < cols; c += 32) m = fmaxf(m, p[c]);
  m = warp_max(m);
  float s = 0.0f;
  for (int c = lane; c < cols; c += 32) s += expf(p[c] - m);
  s = warp_sum(s);
  for (int c = lane; c < cols; c += 32) p[c] = expf(p[c] - m) / s;
}

// Merge one block into the running (out [B, S, H, Dh], lse [B, S, H]); block_out [B, H, S, Dh] and
// block_lse [B, H, S]. One warp per (b, s, h) row. `first`: out, lse = the block (PKB's first merge).
__global__ void merge(float* out, float* lse, const float* block_out, const float* block_lse, Dims d, bool first) {
  long long rows = static_cast<long long>(d.B) * d.S * d.H;
  long long row = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (row >= rows) return;
  int lane = threadIdx.x & 31;
  int h = static_cast<int>(row % d.H);
  int s = static_cast<int>((row / d.H) % d.S);
  long long b = row / (static_cast<long long>(d.H) * d.S);
  long long brow = (b * d.H + h) * d.S + s;  // the same row in [B, H, S]
  float* o = out + row * d.Dh;
  const float* bo = block_out + brow * d.Dh;
  float bl = block_lse[brow];
  if (first) {
    for (int e = lane; e < d.Dh; e += 32) o[e] = bo[e];
    if (lane == 0) lse[row] = bl;
    return;
  }
  float l = lse[row];
  float sig = 1.0f / (1.0f + expf(-(bl - l)));              // F.sigmoid(block_lse - lse)
  float x = l - bl;
  float logsig = fminf(x, 0.0f) - log1pf(expf(-fabsf(x)));  // F.logsigmoid(lse - block_lse)
  for (int e = lane; e < d.Dh; e += 32) o[e] = o[e] - sig * (o[e] - bo[e]);
  __syncwarp();
  if (lane == 0) lse[row] = l - logsig;
}

template <typename T>
__global__ void to_d(const float* src, T* dst, long long n) {
  PKB_GRID_STRIDE(i, n) dst[i] = from_f<T>(src[i]);
}

struct State {
  Dims cap{};                       // the attention shapes the buffers were sized for (pkb_init)
  int hs = 0;                       // hidden size HS
  cudaStream_t comm = nullptr;      // side stream for the ring's send/recv
  cudaEvent_t ready = nullptr;      // compute stream -> comm stream: the step may start sending
  cudaEvent_t arrived = nullptr;    // comm stream -> compute stream: next k, v received
  void* qkv = nullptr;              // D [B S, 3 H Dh]
  void* kv_own[2] = {};             // D [B, S, H, Dh]: this rank's k and v (split_kv)
  void* kv[2][2] = {};              // [buffer][k or v] of D: ring receive buffers
  void* ctx_d = nullptr;            // D [B S, H Dh]: the context rounded to D
  float *qf = nullptr, *kf = nullptr, *vf = nullptr;  // fp32 [B, H, S, Dh]
  float* scores = nullptr;          // fp32 [B, H, S, S]
  float* block_lse = nullptr;       // fp32 [B, H, S]
  float* block_out = nullptr;       // fp32 [B, H, S, Dh]
  float* out = nullptr;             // fp32 [B, S, H, Dh]
  float* lse = nullptr;             // fp32 [B, S, H]
};

unsigned blocks_for(long long threads) { return static_cast<unsigned>((threads + 255) / 256); }
unsigned grid_stride_blocks(long long n, const pkb_context* ctx) {
  long long cap = 16LL * (ctx->topo.sm_count > 0 ? ctx->topo.sm_count : 132);
  long long b = (n + 255) / 256;
  return static_cast<unsigned>(b < 1 ? 1 : (b > cap ? cap : b));
}

cudaDataType_t cuda_type(pkb_dtype d) {
  switch (d) {
    case PKB_BF16: return CUDA_R_16BF;
    case PKB_FP16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

// Row-major Y[m, n] = X[m, k] Wt[n, k]^T (F.linear without bias) is the column-major product
// Y^T = Wt (op T) X^T.
int linear(pkb_context* ctx, const void* X, const void* Wt, void* Y, long long m, long long n, long long k) {
  const float one = 1.0f, zero = 0.0f;
  cudaDataType_t t = cuda_type(ctx->dtype);
  PKB_CUBLAS(ctx, cublasGemmEx(ctx->cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                               static_cast<int>(k), &one, Wt, t, static_cast<int>(k), X, t, static_cast<int>(k), &zero,
                               Y, t, static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return 0;
}

// One attention block of this rank's queries (already in st->qf) against the k, v in hand, merged
// into (out, lse).
template <typename T>
int attend(pkb_context* ctx, State* st, Dims d, const T* k, const T* v, bool diagonal, bool first, float scale) {
  cudaStream_t s = ctx->stream;
  long long n = static_cast<long long>(d.B) * d.S * d.H * d.Dh;
  long long batch = static_cast<long long>(d.B) * d.H;
  long long rows = batch * d.S;
  long long row = static_cast<long long>(d.H) * d.Dh;
  to_bhsd<T><<<grid_stride_blocks(n, ctx), 256, 0, s>>>(k, row, st->kf, d);
  PKB_LAUNCH(ctx);
  to_bhsd<T><<<grid_stride_blocks(n, ctx), 256, 0, s>>>(v, row, st->vf, d);
  PKB_LAUNCH(ctx);
  const float one = 1.0f, zero = 0.0f;
  long long sd = static_cast<long long>(d.S) * d.Dh, ss = static_cast<long long>(d.S) * d.S;
  // Row-major scores [S_q, S_k] = Q K^T is the column-major S_k x S_q product K^T(op T) * Q.
  PKB_CUBLAS(ctx, cublasGemmStridedBatchedEx(ctx->cublas, CUBLAS_OP_T, CUBLAS_OP_N, d.S, d.S, d.Dh, &one, st->kf,
                                              CUDA_R_32F, d.Dh, sd, st->qf, CUDA_R_32F, d.Dh, sd, &zero, st->scores,
                                              CUDA_R_32F, d.S, ss, static_cast<int>(batch), CUBLAS_COMPUTE_32F,
                                              CUBLAS_GEMM_DEFAULT));
  scale_mask<<<grid_stride_blocks(rows * d.S, ctx), 256, 0, s>>>(st->scores, rows * d.S, d.S, scale, diagonal);
  PKB_LAUNCH(ctx);
  row_lse<<<blocks_for(rows * 32), 256, 0, s>>>(st->scores, st->block_lse, rows, d.S);
  PKB_LAUNCH(ctx);
  row_softmax<<<blocks_for(rows * 32), 256, 0, s>>>(st->scores, rows, d.S);
  PKB_LAUNCH(ctx);
  // Row-major block_out [S_q, Dh] = P V is the column-major Dh x S_q product V * P.
  PKB_CUBLAS(ctx, cublasGemmStridedBatchedEx(ctx->cublas, CUBLAS_OP_N, CUBLAS_OP_N, d.Dh, d.S, d.S, &one, st->vf,
                                              CUDA_R_32F, d.Dh, sd, st->scores, CUDA_R_32F, d.S, ss, &zero,
                                              st->block_out, CUDA_R_32F, d.Dh, sd, static_cast<int>(batch),
                                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  long long out_rows = static_cast<long long>(d.B) * d.S * d.H;
  merge<<<blocks_for(out_rows * 32), 256, 0, s>>>(st->out, st->lse, st->block_out, st->block_lse, d, first);
  PKB_LAUNCH(ctx);
  return 0;
}

// PKB's _ring_attn_forward over `cp`: q is read from st->qkv, k and v start in st->kv_own; the
// context, rounded to D, lands in st->ctx_d.
template <typename T>
int ring_attention(pkb_context* ctx, State* st, Dims d, const pkb_group* cp) {
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.Dh)));  // softmax_scale None
  long long n = static_cast<long long>(d.B) * d.S * d.H * d.Dh;
  int rank = cp->rank, world = cp->size;
  int next = (rank + 1) % world, prev = (rank - 1 + world) % world;
  ncclDataType_t dt = pkb_nccl_dtype(ctx->dtype);
  cudaStream_t s = ctx->stream;

  to_bhsd<T><<<grid_stride_blocks(n, ctx), 256, 0, s>>>(static_cast<const T*>(st->qkv), 3LL * d.H * d.Dh, st->qf, d);
  PKB_LAUNCH(ctx);
  const T* k = static_cast<const T*>(st->kv_own[0]);
  const T* v = static_cast<const T*>(st->kv_own[1]);
  for (int step = 0; step < world; ++step) {
    bool forward = step + 1 < world;
    T* next_k = static_cast<T*>(st->kv[step % 2][0]);
    T* next_v = static_cast<T*>(st->kv[step % 2][1]);
    if (forward) {
      // The receive buffers were last read by this stream's previous step.
      PKB_CUDA(ctx, cudaEventRecord(st->ready, s));
      PKB_CUDA(ctx, cudaStreamWaitEvent(st->comm, st->ready, 0));
      PKB_NCCL(ctx, ncclGroupStart());
      PKB_NCCL(ctx, ncclSend(k, n, dt, next, cp->comm, st->comm));
      PKB_NCCL(ctx, ncclRecv(next_k, n, dt, prev, cp->comm, st->comm));
      PKB_NCCL(ctx, ncclSend(v, n, dt, next, cp->comm, st->comm));
      PKB_NCCL(ctx, ncclRecv(next_v, n, dt, prev, cp->comm, st->comm));
      PKB_NCCL(ctx, ncclGroupEnd());
      PKB_CUDA(ctx, cudaEventRecord(st->arrived, st->comm));
    }
    if (step <= rank)
      if (attend<T>(ctx, st, d, k, v, /*diagonal=*/step == 0, /*first=*/step == 0, scale)) return 1;
    if (forward) {
      PKB_CUDA(ctx, cudaStreamWaitEvent(s, st->arrived, 0));
      k = next_k;
      v = next_v;
    }
  }
  to_d<T><<<grid_stride_blocks(n, ctx), 256, 0, s>>>(st->out, static_cast<T*>(st->ctx_d), n);
  PKB_LAUNCH(ctx);
  return 0;
}

template <typename T>
int run_typed(pkb_context* ctx, const pkb_tensor* in, pkb_tensor* out) {
  State* st = static_cast<State*>(ctx->user);
  const pkb_group* tp = ctx->find_group(ctx, "tp");
  const pkb_group* cp = ctx->find_group(ctx, "cp");
  if (!tp || !cp) {
    ctx->set_error(ctx, "the spec's tp and cp groups are missing");
    return 1;
  }
  const pkb_tensor& hidden = in[0];  // [B, S, HS]
  const pkb_tensor& w_qkv = in[1];   // [3 HL Dh, HS]
  const pkb_tensor& w_o = in[2];     // [HS, HL Dh]
  Dims d = st->cap;
  if (hidden.shape[0] != d.B || hidden.shape[1] != d.S || hidden.shape[2] != st->hs ||
      w_qkv.shape[0] != 3LL * d.H * d.Dh || w_o.shape[1] != static_cast<long long>(d.H) * d.Dh) {
    ctx->set_error(ctx, "input shape differs from the size variables pkb_init sized its buffers for");
    return 1;
  }
  const long long rows = static_cast<long long>(d.B) * d.S, width = static_cast<long long>(d.H) * d.Dh;
  // qkv = F.linear(hidden_states, w_qkv); k, v = .contiguous() of their thirds
  if (linear(ctx, hidden.data, w_qkv.data, st->qkv, rows, 3 * width, st->hs)) return 1;
  split_kv<T><<<grid_stride_blocks(rows * width, ctx), 256, 0, ctx->stream>>>(
      static_cast<const T*>(st->qkv), static_cast<T*>(st->kv_own[0]), static_cast<T*>(st->kv_own[1]), rows,
      static_cast<int>(width));
  PKB_LAUNCH(ctx);
  if (ring_attention<T>(ctx, st, d, cp)) return 1;
  // out = F.linear(context, w_o), summed over the TP pair
  if (linear(ctx, st->ctx_d, w_o.data, out[0].data, rows, st->hs, width)) return 1;
  if (tp->size > 1)
    PKB_NCCL(ctx, ncclAllReduce(out[0].data, out[0].data, static_cast<size_t>(rows * st->hs),
                                pkb_nccl_dtype(ctx->dtype), ncclSum, tp->comm, ctx->stream));
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  State* st = new State;
  ctx->user = st;
  Dims d{static_cast<int>(ctx->param(ctx, "B", 0)), static_cast<int>(ctx->param(ctx, "S", 0)),
         static_cast<int>(ctx->param(ctx, "HL", 0)), static_cast<int>(ctx->param(ctx, "Dh", 0))};
  st->cap = d;
  st->hs = static_cast<int>(ctx->param(ctx, "HS", 0));
  size_t n = static_cast<size_t>(d.B) * d.S * d.H * d.Dh;
  size_t rows = static_cast<size_t>(d.B) * d.H * d.S;
  size_t e = pkb_dtype_size(ctx->dtype);
  PKB_CUDA(ctx, cudaStreamCreateWithFlags(&st->comm, cudaStreamNonBlocking));
  PKB_CUDA(ctx, cudaEventCreateWithFlags(&st->ready, cudaEventDisableTiming));
  PKB_CUDA(ctx, cudaEventCreateWithFlags(&st->arrived, cudaEventDisableTiming));
  PKB_CUDA(ctx, cudaMalloc(&st->qkv, 3 * n * e));
  for (void** p : {&st->kv_own[0], &st->kv_own[1], &st->kv[0][0], &st->kv[0][1], &st->kv[1][0], &st->kv[1][1],
                   &st->ctx_d})
    PKB_CUDA(ctx, cudaMalloc(p, n * e));
  for (float** p : {&st->qf, &st->kf, &st->vf, &st->block_out, &st->out})
    PKB_CUDA(ctx, cudaMalloc(p, n * sizeof(float)));
  PKB_CUDA(ctx, cudaMalloc(&st->scores, rows * d.S * sizeof(float)));
  PKB_CUDA(ctx, cudaMalloc(&st->block_lse, rows * sizeof(float)));
  PKB_CUDA(ctx, cudaMalloc(&st->lse, rows * sizeof(float)));
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
  for (void* p : {st->qkv, st->kv_own[0], st->kv_own[1], st->kv[0][0], st->kv[0][1], st->kv[1][0], st->kv[1][1],
                  st->ctx_d})
    PKB_CUDA(ctx, cudaFree(p));
  for (float* p : {st->qf, st->kf, st->vf, st->block_out, st->out, st->scores, st->block_lse, st->lse})
    PKB_CUDA(ctx, cudaFree(p));
  PKB_CUDA(ctx, cudaEventDestroy(st->ready));
  PKB_CUDA(ctx, cudaEventDestroy(st->arrived));
  PKB_CUDA(ctx, cudaStreamDestroy(st->comm));
  delete st;
  ctx->user = nullptr;
  return 0;
}
