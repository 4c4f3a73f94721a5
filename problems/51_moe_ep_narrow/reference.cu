// Baseline for problem 51 (moe_ep_narrow): problem 31's expert-parallel fused MoE forward run inside
// EP sub-groups. E = the largest proper divisor of W experts (the spec's E), one per rank of an EP
// group of E consecutive ranks (the spec's group "ep", PKB's cached dist.new_group blocks), top
// TOPK = min(2, E); every collective below runs on the EP group's communicator, never on WORLD.
// PKB's reference step by step:
//
//   1. router: logits = hidden_states · gate_weightᵀ + gate_bias (cuBLAS GEMM, fp32 accumulate,
//      rounded once to D after the bias, as torch's addmm; the spec's ternary router inputs make
//      the logits small integers, exact however a GEMM adds, so PyTorch's router GEMM, which
//      seems to round partial sums to D at E = 2 and 4, gives these bits too), softmax in fp32
//      rounded to D, top-TOPK on the rounded probs (an equal value at the boundary goes to the
//      lower expert index; equal logits are frequent with these inputs);
//   2. tokens per expert (PKB: one_hot + sum), copied to the host for the send splits (PKB's first
//      .tolist()); expert e lives on group rank e, so the splits are the counts;
//   3. ncclAllGather of the E counts over the EP group, copied to the host for the receive splits
//      (PKB's second .tolist());
//   4. permutation: the token rows, expert-major and in token order within an expert (PKB:
//      masked_select + index_select), i.e. grouped by destination group rank;
//   5. all-to-all dispatch over the EP group with those splits (ncclSend/ncclRecv per peer, empty
//      splits skipped as torch's all_to_all_single does). In a group of one (E = 1) PKB's
//      _AllToAll returns its input, and so does this: the MLP reads the permuted rows;
//   6. PKB's _sort_chunks_by_idxs with one local expert keeps the chunk order (a copy): skipped;
//   7. this rank's MLP on every received row: down(SiLU(gate(x)) * up(x)), three cuBLAS GEMMs
//      whose C is pre-filled with the bias (beta = 1, as torch's addmm), one kernel for SiLU and
//      one for the product, each rounding to D;
//   8. all-to-all combine with the splits swapped (again the identity in a group of one);
//   9. unpermute: out[t] = D(D(p0 * y0) + D(p1 * y1)) for TOPK = 2, D(p0 * y0) for TOPK = 1 (with
//      E = 1, p0 = 1 and the row comes back unchanged) — PKB multiplies every returned row by its
//      prob (rounding to D) and scatter-adds a token's rows into zeros; the sum of two values is
//      the same in either order, so a gather gives PKB's bits without atomics.
//
// Scratch is sized in pkb_init for the worst routing (every token of every group rank sending one
// row here: a token's experts are distinct, one per rank); the host synchronizes twice per call,
// as PKB's .tolist() calls do.
#include <pkb/solution.h>

#include <cub/block/block_scan.cuh>
#include <cuda_bf16.h>

#include <vector>

namespace {

constexpr int kMaxExperts = 16;  // E <= 12 for the W <= 24 the spec's expression covers
constexpr int kMaxTopK = 2;      // PKB: top_k = min(2, num_experts)

// ---- element type helpers -------------------------------------------------------------------

template <typename T> __device__ __forceinline__ float to_f(T v);
template <> __device__ __forceinline__ float to_f<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// Copies one row of `bytes` bytes (a multiple of 2) with the block's threads.
__device__ __forceinline__ void copy_row(char* dst, const char* src, size_t bytes) {
  if (bytes % 16 == 0) {
    auto* d = reinterpret_cast<uint4*>(dst);
    auto* s = reinterpret_cast<const uint4*>(src);
    for (size_t i = threadIdx.x; i < bytes / 16; i += blockDim.x) d[i] = s[i];
  } else {
    auto* d = reinterpret_cast<uint16_t*>(dst);
    auto* s = reinterpret_cast<const uint16_t*>(src);
    for (size_t i = threadIdx.x; i < bytes / 2; i += blockDim.x) d[i] = s[i];
  }
}

// ---- kernels ----------------------------------------------------------------------------------

/// dst[r, c] = bias[c] for r < rows: the C operand of a beta = 1 GEMM (torch's addmm copies the
/// bias into the result the same way).
template <typename Out, typename In>
__global__ void fill_rows(Out* dst, const In* bias, long long rows, int cols) {
  long long n = rows * cols;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    dst[i] = static_cast<Out>(to_f(bias[i % cols]));
}
template <typename In>
__global__ void fill_rows_d(In* dst, const In* bias, long long rows, int cols) {
  long long n = rows * cols;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    dst[i] = bias[i % cols];
}

/// probs[t] = D(softmax(D(logits32[t]))), one thread per token, in torch's order: max, exp(x - max)
/// in fp32, the sum as the butterfly of torch's warp softmax over the next power of two of E lanes
/// (lanes past E hold exp(-inf) = 0), then x / sum.
template <typename T>
__global__ void router_softmax(const float* logits32, T* probs, int tokens, int experts) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= tokens) return;
  float l[kMaxExperts], v[kMaxExperts], m = -INFINITY;
  for (int e = 0; e < experts; ++e) {
    l[e] = to_f(from_f<T>(logits32[t * experts + e]));  // addmm's one rounding to D
    m = fmaxf(m, l[e]);
  }
  int lanes = 1;
  while (lanes < experts) lanes *= 2;
  for (int e = 0; e < experts; ++e) l[e] = expf(l[e] - m);
  for (int e = 0; e < lanes; ++e) v[e] = e < experts ? l[e] : 0.0f;
  // Lane i adds lane i ^ off, for off = lanes/2 .. 1; lane 0's sum is what every lane ends with.
  for (int off = lanes / 2; off >= 1; off /= 2)
    for (int i = 0; i < off; ++i) v[i] = v[i] + v[i + off];
  const float s = v[0];
  for (int e = 0; e < experts; ++e) probs[t * experts + e] = from_f<T>(l[e] / s);
}

/// Top-k (k = 1 or 2) of each token's rounded probs: the largest first; among equal values the lower
/// expert index wins (torch.topk takes the elements equal to the k-th value in index order).
template <typename T>
__global__ void router_topk(const T* probs, T* topw, int* topi, int tokens, int experts, int topk) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= tokens) return;
  float p[kMaxExperts];
  for (int e = 0; e < experts; ++e) p[e] = to_f(probs[t * experts + e]);
  int a = 0;
  for (int e = 1; e < experts; ++e)
    if (p[e] > p[a]) a = e;
  topi[t * topk] = a;
  topw[t * topk] = probs[t * experts + a];
  if (topk < 2) return;
  int b = a == 0 ? 1 : 0;
  for (int e = b + 1; e < experts; ++e)
    if (e != a && p[e] > p[b]) b = e;
  topi[t * topk + 1] = b;
  topw[t * topk + 1] = probs[t * experts + b];
}

/// Block e: counts[e] = tokens routed to expert e, and for each such token its rank among them in
/// token order (slot[t, k] for the choice k that names e) — PKB's masked_select order.
constexpr int kScanThreads = 1024;
__global__ void __launch_bounds__(kScanThreads)
    route_scan(const int* topi, int* slot, long long* counts, int tokens, int topk) {
  using Scan = cub::BlockScan<int, kScanThreads>;
  __shared__ typename Scan::TempStorage tmp;
  __shared__ int carry;
  int e = blockIdx.x;
  if (threadIdx.x == 0) carry = 0;
  __syncthreads();
  for (int base = 0; base < tokens; base += kScanThreads) {
    int t = base + threadIdx.x;
    int k = -1;
    if (t < tokens)
      for (int c = 0; c < topk; ++c)
        if (topi[t * topk + c] == e) k = c;
    int rank_in, total;
    Scan(tmp).ExclusiveSum(k >= 0 ? 1 : 0, rank_in, total);
    if (k >= 0) slot[t * topk + k] = carry + rank_in;
    __syncthreads();
    if (threadIdx.x == 0) carry += total;
    __syncthreads();
  }
  if (threadIdx.x == 0) counts[e] = carry;
}

struct ExpertOffsets {
  long long v[kMaxExperts];  // first permuted row of each expert
};

/// send[offset[e] + slot] = hidden_states[t] for each of the token's top-k experts e (block t k + c).
__global__ void permute_rows(const char* x, char* send, const int* topi, const int* slot, ExpertOffsets off,
                             size_t row_bytes, int topk) {
  int t = blockIdx.x / topk, k = blockIdx.x % topk;
  long long pos = off.v[topi[t * topk + k]] + slot[t * topk + k];
  copy_row(send + pos * row_bytes, x + t * row_bytes, row_bytes);
}

/// x = D(silu(x)) in place (torch: x / (1 + exp(-x)) in fp32).
template <typename T>
__global__ void silu_inplace(T* x, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    float v = to_f(x[i]);
    x[i] = from_f<T>(v / (1.0f + expf(-v)));
  }
}

/// a = D(a * b) in place.
template <typename T>
__global__ void mul_inplace(T* a, const T* b, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    a[i] = from_f<T>(to_f(a[i]) * to_f(b[i]));
}

/// out[t] = D(D(p0 * y[pos0]) + D(p1 * y[pos1])), or D(p0 * y[pos0]) for top-1 (PKB's scatter-add
/// into zeros adds the one row to 0, which changes no bit): PKB's weighted unpermute of a token.
template <typename T>
__global__ void unpermute_combine(const T* y, T* out, const T* topw, const int* topi, const int* slot,
                                  ExpertOffsets off, int n, int topk) {
  int t = blockIdx.x;
  long long p0 = off.v[topi[t * topk]] + slot[t * topk];
  float w0 = to_f(topw[t * topk]);
  if (topk == 1) {
    for (int c = threadIdx.x; c < n; c += blockDim.x)
      out[(long long)t * n + c] = from_f<T>(w0 * to_f(y[p0 * n + c]));
    return;
  }
  long long p1 = off.v[topi[t * topk + 1]] + slot[t * topk + 1];
  float w1 = to_f(topw[t * topk + 1]);
  for (int c = threadIdx.x; c < n; c += blockDim.x) {
    float a = to_f(from_f<T>(w0 * to_f(y[p0 * n + c])));
    float b = to_f(from_f<T>(w1 * to_f(y[p1 * n + c])));
    out[(long long)t * n + c] = from_f<T>(a + b);
  }
}

// ---- state ------------------------------------------------------------------------------------

struct Scratch {
  int experts = 0, topk = 0, inner = 0;  // E (= the EP group's size), TOPK, I
  long long tokens = 0, hidden = 0, max_rows = 0;
  float* logits32 = nullptr;  // [M, E]
  void* probs = nullptr;      // [M, E] D
  void* topw = nullptr;       // [M, TOPK] D
  int* topi = nullptr;        // [M, TOPK]
  int* slot = nullptr;        // [M, TOPK]
  long long* counts = nullptr;   // [E]
  long long* gcounts = nullptr;  // [E, E]: row j = group rank j's counts
  long long* host_counts = nullptr;   // pinned [E]
  long long* host_gcounts = nullptr;  // pinned [E, E]
  char* send = nullptr;    // [TOPK M, N] permuted tokens
  char* recv = nullptr;    // [max_rows, N] received tokens, by source
  char* y = nullptr;       // [max_rows, N] expert outputs, by source
  void* gate = nullptr;    // [max_rows, I]
  void* up = nullptr;      // [max_rows, I]
  char* back = nullptr;    // [TOPK M, N] expert outputs of this rank's tokens, permuted order
};

void free_scratch(Scratch* s) {
  for (void* p : {(void*)s->logits32, s->probs, s->topw, (void*)s->topi, (void*)s->slot, (void*)s->counts,
                  (void*)s->gcounts, (void*)s->send, (void*)s->recv, (void*)s->y, s->gate, s->up, (void*)s->back})
    if (p) cudaFree(p);
  if (s->host_counts) cudaFreeHost(s->host_counts);
  if (s->host_gcounts) cudaFreeHost(s->host_gcounts);
  delete s;
}

int grid_for(long long n, int threads = 256) {
  long long b = (n + threads - 1) / threads;
  return static_cast<int>(b < 1 ? 1 : (b > 65535 ? 65535 : b));
}

// y[rows, out_f] = x[rows, in_f] · Wᵀ + bias (nn.Linear): C pre-filled with the bias, beta = 1.
template <typename T>
int linear(pkb_context* ctx, cudaDataType_t dt, const void* x, const pkb_tensor& w, const pkb_tensor& b, void* y,
           long long rows) {
  int out_f = static_cast<int>(w.shape[0]), in_f = static_cast<int>(w.shape[1]);
  fill_rows_d<T><<<grid_for(rows * out_f), 256, 0, ctx->stream>>>(static_cast<T*>(y), static_cast<const T*>(b.data),
                                                                  rows, out_f);
  PKB_LAUNCH(ctx);
  const float one = 1.0f;
  PKB_CUBLAS(ctx, cublasGemmEx(ctx->cublas, CUBLAS_OP_T, CUBLAS_OP_N, out_f, static_cast<int>(rows), in_f, &one, w.data,
                               dt, in_f, x, dt, in_f, &one, y, dt, out_f, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return 0;
}

/// All-to-all over the EP group: rows [off[j], off[j] + rows[j]) of `src` go to group rank j,
/// and group rank j's rows land at [roff[j], roff[j] + rrows[j]) of `dst`; empty splits skipped.
int exchange(pkb_context* ctx, const pkb_group* g, ncclDataType_t nt, const char* src, const std::vector<long long>& off,
             const std::vector<long long>& rows, char* dst, const std::vector<long long>& roff,
             const std::vector<long long>& rrows, long long n, size_t row_bytes) {
  PKB_NCCL(ctx, ncclGroupStart());
  for (int j = 0; j < g->size; ++j) {
    if (rows[j] > 0) PKB_NCCL(ctx, ncclSend(src + off[j] * row_bytes, rows[j] * n, nt, j, g->comm, ctx->stream));
    if (rrows[j] > 0) PKB_NCCL(ctx, ncclRecv(dst + roff[j] * row_bytes, rrows[j] * n, nt, j, g->comm, ctx->stream));
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  return 0;
}

template <typename T>
int run(pkb_context* ctx, Scratch* s, const pkb_tensor* in, pkb_tensor* out) {
  const pkb_tensor &x = in[0], &gate_w = in[1], &gate_b = in[2];
  const pkb_group* g = ctx->find_group(ctx, "ep");
  if (!g) PKB_FAIL_(ctx, "pkb_run", "the spec's group \"ep\" is missing");
  const int E = s->experts, K = s->topk, G = g->size, gr = g->rank;
  if (G != E) PKB_FAIL_(ctx, "pkb_run", "the EP group must have one rank per expert (size E)");
  const long long M = x.shape[0], N = x.shape[1];
  if (M > s->tokens || N != s->hidden) PKB_FAIL_(ctx, "pkb_run", "input shape differs from the one pkb_init sized for");
  const cudaDataType_t dt = ctx->dtype == PKB_BF16 ? CUDA_R_16BF : CUDA_R_32F;
  const size_t row_bytes = N * sizeof(T);
  const ncclDataType_t nt = pkb_nccl_dtype(ctx->dtype);
  cudaStream_t st = ctx->stream;
  const float one = 1.0f;

  // 1. Router: fp32 logits with the bias, then one rounding to D inside the softmax kernel.
  fill_rows<float, T><<<grid_for(M * E), 256, 0, st>>>(s->logits32, static_cast<const T*>(gate_b.data), M, E);
  PKB_LAUNCH(ctx);
  PKB_CUBLAS(ctx, cublasGemmEx(ctx->cublas, CUBLAS_OP_T, CUBLAS_OP_N, E, static_cast<int>(M), static_cast<int>(N),
                               &one, gate_w.data, dt, static_cast<int>(N), x.data, dt, static_cast<int>(N), &one,
                               s->logits32, CUDA_R_32F, E, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  router_softmax<T><<<grid_for(M, 128), 128, 0, st>>>(s->logits32, static_cast<T*>(s->probs), static_cast<int>(M), E);
  PKB_LAUNCH(ctx);
  router_topk<T><<<grid_for(M, 128), 128, 0, st>>>(static_cast<const T*>(s->probs), static_cast<T*>(s->topw), s->topi,
                                                   static_cast<int>(M), E, K);
  PKB_LAUNCH(ctx);

  // 2. Tokens per expert = rows per group rank; the send splits need them on the host.
  route_scan<<<E, kScanThreads, 0, st>>>(s->topi, s->slot, s->counts, static_cast<int>(M), K);
  PKB_LAUNCH(ctx);
  PKB_CUDA(ctx, cudaMemcpyAsync(s->host_counts, s->counts, E * sizeof(long long), cudaMemcpyDeviceToHost, st));
  PKB_CUDA(ctx, cudaStreamSynchronize(st));
  std::vector<long long> send_rows(G, 0), send_off(G + 1, 0);
  ExpertOffsets eoff{};
  for (int e = 0; e < E; ++e) {
    send_rows[e] = s->host_counts[e];
    send_off[e + 1] = send_off[e] + send_rows[e];
    eoff.v[e] = send_off[e];
  }

  // 3. Every group rank's counts; the receive splits need them on the host.
  PKB_NCCL(ctx, ncclAllGather(s->counts, s->gcounts, E, ncclInt64, g->comm, st));
  PKB_CUDA(ctx, cudaMemcpyAsync(s->host_gcounts, s->gcounts, (size_t)G * E * sizeof(long long),
                                cudaMemcpyDeviceToHost, st));
  PKB_CUDA(ctx, cudaStreamSynchronize(st));
  std::vector<long long> recv_rows(G, 0), recv_off(G + 1, 0);
  for (int j = 0; j < G; ++j) {
    recv_rows[j] = s->host_gcounts[j * E + gr];
    recv_off[j + 1] = recv_off[j] + recv_rows[j];
  }
  const long long R = recv_off[G];
  if (R > s->max_rows) PKB_FAIL_(ctx, "pkb_run", "more rows received than the worst case allows");

  // 4. Permute this rank's tokens into expert-major order (= grouped by destination group rank).
  permute_rows<<<static_cast<unsigned>(M * K), 128, 0, st>>>(static_cast<const char*>(x.data), s->send, s->topi,
                                                             s->slot, eoff, row_bytes, K);
  PKB_LAUNCH(ctx);

  // 5. Dispatch (the identity in a group of one, as PKB's _AllToAll).
  const bool alone = G == 1;
  if (!alone && exchange(ctx, g, nt, s->send, send_off, send_rows, s->recv, recv_off, recv_rows, N, row_bytes)) return 1;
  const char* mlp_in = alone ? s->send : s->recv;

  // 7. The MLP on every received row, already in source order (one local expert).
  if (R > 0) {
    if (linear<T>(ctx, dt, mlp_in, in[3], in[4], s->gate, R)) return 1;
    if (linear<T>(ctx, dt, mlp_in, in[5], in[6], s->up, R)) return 1;
    long long n_inner = R * s->inner;
    silu_inplace<T><<<grid_for(n_inner), 256, 0, st>>>(static_cast<T*>(s->gate), n_inner);
    PKB_LAUNCH(ctx);
    mul_inplace<T><<<grid_for(n_inner), 256, 0, st>>>(static_cast<T*>(s->gate), static_cast<const T*>(s->up), n_inner);
    PKB_LAUNCH(ctx);
    if (linear<T>(ctx, dt, s->gate, in[7], in[8], s->y, R)) return 1;
  }

  // 8. Combine: the outputs go back along the dispatch's routes.
  if (!alone && exchange(ctx, g, nt, s->y, recv_off, recv_rows, s->back, send_off, send_rows, N, row_bytes)) return 1;
  const T* back = reinterpret_cast<const T*>(alone ? s->y : s->back);

  // 9. Weighted unpermute.
  if (M > 0) {
    unpermute_combine<T><<<static_cast<unsigned>(M), 256, 0, st>>>(back, static_cast<T*>(out[0].data),
                                                                   static_cast<const T*>(s->topw), s->topi, s->slot,
                                                                   eoff, static_cast<int>(N), K);
    PKB_LAUNCH(ctx);
  }
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  if (ctx->dtype != PKB_BF16 && ctx->dtype != PKB_FP32) PKB_FAIL_(ctx, "pkb_init", "dtype must be bf16 or fp32");
  auto* s = new Scratch;
  ctx->user = s;
  s->experts = static_cast<int>(ctx->param(ctx, "E", 0));
  s->topk = static_cast<int>(ctx->param(ctx, "TOPK", 0));
  s->inner = static_cast<int>(ctx->param(ctx, "I", 128));
  s->tokens = ctx->param(ctx, "M", 0);
  s->hidden = ctx->param(ctx, "N", 0);
  if (s->experts < 1 || s->experts > kMaxExperts || ctx->world % s->experts != 0)
    PKB_FAIL_(ctx, "pkb_init", "the expert count E must divide W and be at most 16");
  if (s->topk < 1 || s->topk > kMaxTopK || s->topk > s->experts)
    PKB_FAIL_(ctx, "pkb_init", "TOPK must be 1 or 2 and at most E");
  if (s->tokens <= 0 || s->hidden <= 0) PKB_FAIL_(ctx, "pkb_init", "size parameters M and N are missing");
  // A token's top-k experts are distinct, one per group rank: at most one row from each source token.
  s->max_rows = s->experts * s->tokens;
  const size_t e = pkb_dtype_size(ctx->dtype);
  const long long M = s->tokens, N = s->hidden, R = s->max_rows, E = s->experts, K = s->topk;
  PKB_CUDA(ctx, cudaMalloc(&s->logits32, M * E * sizeof(float)));
  PKB_CUDA(ctx, cudaMalloc(&s->probs, M * E * e));
  PKB_CUDA(ctx, cudaMalloc(&s->topw, M * K * e));
  PKB_CUDA(ctx, cudaMalloc(&s->topi, M * K * sizeof(int)));
  PKB_CUDA(ctx, cudaMalloc(&s->slot, M * K * sizeof(int)));
  PKB_CUDA(ctx, cudaMalloc(&s->counts, E * sizeof(long long)));
  PKB_CUDA(ctx, cudaMalloc(&s->gcounts, E * E * sizeof(long long)));
  PKB_CUDA(ctx, cudaMallocHost(&s->host_counts, E * sizeof(long long)));
  PKB_CUDA(ctx, cudaMallocHost(&s->host_gcounts, E * E * sizeof(long long)));
  PKB_CUDA(ctx, cudaMalloc(&s->send, M * K * N * e));
  PKB_CUDA(ctx, cudaMalloc(&s->back, M * K * N * e));
  PKB_CUDA(ctx, cudaMalloc(&s->recv, R * N * e));
  PKB_CUDA(ctx, cudaMalloc(&s->y, R * N * e));
  PKB_CUDA(ctx, cudaMalloc(&s->gate, R * s->inner * e));
  PKB_CUDA(ctx, cudaMalloc(&s->up, R * s->inner * e));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  auto* s = static_cast<Scratch*>(ctx->user);
  return ctx->dtype == PKB_BF16 ? run<__nv_bfloat16>(ctx, s, in, out) : run<float>(ctx, s, in, out);
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  if (ctx->user) free_scratch(static_cast<Scratch*>(ctx->user));
  ctx->user = nullptr;
  return 0;
}
