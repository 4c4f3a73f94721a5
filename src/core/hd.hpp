// PKB_HD marks functions compiled for both host and device, so that the host (oracles, tests) and
// the workers' kernels compute bit-identical values.
#pragma once
#if defined(__CUDACC__)
#define PKB_HD __host__ __device__ __forceinline__
#else
#define PKB_HD inline
#endif
