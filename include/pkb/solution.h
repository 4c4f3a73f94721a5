/* pkb solution ABI, version 2.
 *
 * A solution (a candidate, or a problem's baseline `reference.cu`) is one .cu file that includes
 * this header and defines three extern "C" entry points:
 *
 *   int  pkb_init(pkb_context* ctx);
 *       Once per job, collective over all ranks, outside timing. Allocate symmetric buffers
 *       (ctx->symmetric_alloc), workspaces, extra streams and events; keep them in ctx->user.
 *
 *   int  pkb_run(pkb_context* ctx, const pkb_tensor* inputs, int n_inputs,
 *                pkb_tensor* outputs, int n_outputs);
 *       One call of the workload. Enqueue all device work on ctx->stream (work on other streams
 *       must be joined back into ctx->stream before returning) and return without synchronizing
 *       unless the algorithm needs the host (data-dependent sizes). Outputs are preallocated by
 *       the harness with the shapes the problem defines; write every element. Inputs are
 *       read-only. Input and output pointers change from call to call: never cache results or
 *       assume an input already sits in a symmetric buffer.
 *
 *   int  pkb_finalize(pkb_context* ctx);
 *       Once, collective, after the last run: free what pkb_init took. Symmetric buffers still
 *       allocated afterwards are freed by the harness.
 *
 * Every entry point returns 0 on success. On failure call ctx->set_error(ctx, "what happened")
 * (or use the PKB_CUDA / PKB_NCCL / PKB_CUBLAS macros below) and return non-zero: the harness
 * records a runtime_error with that message and the rank.
 *
 * Tensors are dense, contiguous, row-major device buffers. Shapes, dtypes and the order of inputs
 * and outputs are those of the problem's spec.toml (`pkb show <problem>` prints them).
 *
 * Symmetric memory: ctx->symmetric_alloc is collective (every rank calls it with the same size,
 * in the same order). It returns this rank's buffer, every peer's buffer mapped into this process
 * (peers[r] on the host, peers_dev[r] on the device; peers[ctx->rank] == local), and the NCCL
 * window for the NCCL device API (ncclGetLsaPointer and friends). A peer's host pointer is also a
 * valid cudaMemcpyAsync / cudaMemcpy2DAsync destination: the copy engines then move the data and
 * leave the SMs to compute (the experts for 12, 13, 16 and 45 overlap their GEMMs and norms with
 * such copies). ctx->devcomm is an ncclDevComm created by the harness with
 * PKB_DEVCOMM_LSA_BARRIERS LSA barriers for the candidate's own use.
 * Where NCCL offers no symmetric memory (ranks on several hosts without support for it),
 * ctx->devcomm is NULL, ctx->topo.all_pairs_p2p is 0 and symmetric_alloc fails: use NCCL.
 * With `--oversubscribe` (several ranks on one GPU) symmetric_alloc always fails: a solution that
 * then gives up (returns non-zero from the entry point that called it) is recorded `unsupported`,
 * not as a failure; one that falls back to NCCL collectives is evaluated as usual.
 * NVLink multicast (NVLS, multimem) is not available: it is switched off on the test machines.
 *
 * Libraries: every solution links NCCL, cuBLAS and cuBLASLt; one whose .cu includes <cufft.h> (or
 * <cufftXt.h>) also links cuFFT, and one that includes <cudnn.h> (or a <cudnn_*.h>) links cuDNN 9.
 *
 * Parameters: ctx->params lists the problem's integer parameters (sizes, W, the spec's `params`)
 * and its per-call parameters (spec `step = { trial_low = 1, trial_high = 7 }`), whose value
 * changes from call to call: read it with ctx->param inside every pkb_run, never cache it in
 * pkb_init (there it holds trial_low). Real-valued parameters (spec `lr = 1e-3`) are not in
 * ctx->params: read them with ctx->fparam (ABI 2), which also returns integer parameters as doubles.
 *
 * The ABI is plain C structs and function pointers so that the harness and a solution built by
 * different compilers agree; it only grows by appending fields (abi_version tells which).
 * Version 2 appended ctx->fparam; pkb_param is unchanged, so that a solution built against
 * version 1 still reads ctx->params and ctx->param as before.
 */
#ifndef PKB_SOLUTION_H_
#define PKB_SOLUTION_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#include <nccl_device.h>
#else
struct ncclDevComm;
typedef struct ncclDevComm ncclDevComm;
#endif

#define PKB_ABI_VERSION 2
#define PKB_MAX_DIMS 8
/* LSA barriers in ctx->devcomm (index them 0..PKB_DEVCOMM_LSA_BARRIERS-1, e.g. one per block). */
#define PKB_DEVCOMM_LSA_BARRIERS 256

#ifdef __cplusplus
extern "C" {
#endif

/* Element types. The numbering is part of the ABI. */
typedef enum pkb_dtype {
  PKB_BF16 = 0,
  PKB_FP16 = 1,
  PKB_FP32 = 2,
  PKB_FP64 = 3,
  PKB_INT8 = 4,
  PKB_UINT8 = 5,
  PKB_INT32 = 6,
  PKB_INT64 = 7,
  PKB_BOOL = 8,
  PKB_FP8_E4M3 = 9,
  PKB_FP8_E5M2 = 10,
} pkb_dtype;

/* A dense row-major device tensor. */
typedef struct pkb_tensor {
  void* data;                     /* device pointer, 256-byte aligned */
  pkb_dtype dtype;
  int ndim;
  int64_t shape[PKB_MAX_DIMS];
  const char* name;               /* the spec's name for this input or output */
} pkb_tensor;

/* A process sub-group the problem declares (spec [[groups]]), created with ncclCommSplit. */
typedef struct pkb_group {
  const char* name;
  ncclComm_t comm;
  int rank;                       /* this process's rank inside the group */
  int size;
  const int* world_ranks;         /* world rank of each group member, [size] */
} pkb_group;

/* One collective symmetric allocation (NCCL window, NCCL_WIN_COLL_SYMMETRIC). */
typedef struct pkb_symmetric {
  void* local;                    /* this rank's buffer */
  void* const* peers;             /* host array [world]: each rank's buffer, mapped here */
  void* const* peers_dev;         /* device array [world] of the same pointers */
  size_t bytes;
  ncclWindow_t window;            /* for ncclGetLsaPointer(window, offset, peer) in kernels */
} pkb_symmetric;

/* What the harness knows about the machine (measured values are 0 when not calibrated). */
typedef struct pkb_topology {
  int gpus_per_node;
  int all_pairs_p2p;              /* 1 if every pair of ranks can load/store each other's memory */
  int sm_count;
  size_t l2_bytes;
  double link_gbps;               /* measured unidirectional peer bandwidth, GB/s (pkb calibrate) */
  double hbm_gbps;                /* measured HBM copy bandwidth, GB/s */
  const char* gpu_name;
} pkb_topology;

/* A named integer parameter of the problem instance (M, N, root, ..., and per-call ones such as an
 * optimizer step, whose value is the current call's). */
typedef struct pkb_param {
  const char* name;
  int64_t value;
} pkb_param;

typedef struct pkb_context pkb_context;

struct pkb_context {
  int abi_version;                /* PKB_ABI_VERSION of the harness */
  int rank;
  int world;
  int device;                     /* CUDA device ordinal, already current */
  cudaStream_t stream;            /* enqueue all work here */
  ncclComm_t comm;                /* WORLD communicator */
  const ncclDevComm* devcomm;     /* NCCL device communicator (LSA barriers) for this solution */
  int n_groups;
  const pkb_group* groups;
  cublasHandle_t cublas;          /* bound to ctx->stream, with a workspace set */
  pkb_topology topo;
  const char* problem;            /* the problem's stem, e.g. "1_allreduce" */
  pkb_dtype dtype;                /* the benchmark dtype D */
  int n_params;
  const pkb_param* params;

  /* Collective: every rank, same size, same order. Returns 0 on success. */
  int (*symmetric_alloc)(pkb_context* ctx, size_t bytes, pkb_symmetric* out);
  /* Collective: free a buffer from symmetric_alloc. */
  int (*symmetric_free)(pkb_context* ctx, pkb_symmetric* buf);
  /* Record an error message for the current entry point (the last one wins). */
  void (*set_error)(pkb_context* ctx, const char* message);
  /* Look up a declared sub-group by name; NULL if the problem declares none of that name. */
  const pkb_group* (*find_group)(const pkb_context* ctx, const char* name);
  /* Look up an integer parameter by name; returns `fallback` if absent (and for a real-valued one). */
  int64_t (*param)(const pkb_context* ctx, const char* name, int64_t fallback);

  void* user;                     /* the solution's own state */
  void* harness;                  /* private to the harness */

  /* ABI 2 (ctx->abi_version >= 2). Look up a real-valued parameter (spec `lr = 1e-3`) by name, or an
   * integer one as a double; returns `fallback` if absent. */
  double (*fparam)(const pkb_context* ctx, const char* name, double fallback);
};

/* The entry points a solution defines. */
int pkb_init(pkb_context* ctx);
int pkb_run(pkb_context* ctx, const pkb_tensor* inputs, int n_inputs, pkb_tensor* outputs,
            int n_outputs);
int pkb_finalize(pkb_context* ctx);

typedef int (*pkb_init_fn)(pkb_context*);
typedef int (*pkb_run_fn)(pkb_context*, const pkb_tensor*, int, pkb_tensor*, int);
typedef int (*pkb_finalize_fn)(pkb_context*);

/* Number of elements of a tensor. */
static inline int64_t pkb_numel(const pkb_tensor* t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}

/* Bytes per element of a dtype. */
static inline size_t pkb_dtype_size(pkb_dtype d) {
  switch (d) {
    case PKB_BF16: case PKB_FP16: return 2;
    case PKB_FP32: case PKB_INT32: return 4;
    case PKB_FP64: case PKB_INT64: return 8;
    default: return 1;
  }
}

/* The NCCL datatype of a dtype (ncclUint8 for types NCCL lacks). */
static inline ncclDataType_t pkb_nccl_dtype(pkb_dtype d) {
  switch (d) {
    case PKB_BF16: return ncclBfloat16;
    case PKB_FP16: return ncclFloat16;
    case PKB_FP32: return ncclFloat32;
    case PKB_FP64: return ncclFloat64;
    case PKB_INT32: return ncclInt32;
    case PKB_INT64: return ncclInt64;
    case PKB_INT8: return ncclInt8;
    default: return ncclUint8;
  }
}

#ifdef __cplusplus
}  /* extern "C" */
#endif

/* Error helpers for solutions: on failure they record "file:line: call: reason" and return 1
 * from the enclosing entry point. */
#include <stdio.h>
#define PKB_FAIL_(ctx, what, reason)                                                     \
  do {                                                                                  \
    char pkb_msg_[512];                                                                 \
    snprintf(pkb_msg_, sizeof pkb_msg_, "%s:%d: %s: %s", __FILE__, __LINE__, what, reason); \
    (ctx)->set_error((ctx), pkb_msg_);                                                  \
    return 1;                                                                           \
  } while (0)
#define PKB_CUDA(ctx, call)                                                             \
  do {                                                                                  \
    cudaError_t pkb_e_ = (call);                                                        \
    if (pkb_e_ != cudaSuccess) PKB_FAIL_(ctx, #call, cudaGetErrorString(pkb_e_));       \
  } while (0)
#define PKB_NCCL(ctx, call)                                                             \
  do {                                                                                  \
    ncclResult_t pkb_e_ = (call);                                                       \
    if (pkb_e_ != ncclSuccess) PKB_FAIL_(ctx, #call, ncclGetErrorString(pkb_e_));       \
  } while (0)
#define PKB_CUBLAS(ctx, call)                                                           \
  do {                                                                                  \
    cublasStatus_t pkb_e_ = (call);                                                     \
    if (pkb_e_ != CUBLAS_STATUS_SUCCESS) PKB_FAIL_(ctx, #call, cublasGetStatusString(pkb_e_)); \
  } while (0)
/* Check the last kernel launch. */
#define PKB_LAUNCH(ctx) PKB_CUDA(ctx, cudaGetLastError())

#endif /* PKB_SOLUTION_H_ */
