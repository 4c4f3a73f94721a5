// Checking macros for harness code, one per API family: each throws pkb::Error carrying the call,
// file:line and the library's own message.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "core/error.hpp"

#define PKB_STR_(x) #x
#define PKB_WHERE_ (std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": ")

#define CUDA_CHECK(call)                                                                                         \
  do {                                                                                                           \
    cudaError_t pkb_err_ = (call);                                                                               \
    if (pkb_err_ != cudaSuccess)                                                                                 \
      ::pkb::fail(::pkb::Errc::cuda_error,                                                                       \
                  PKB_WHERE_ + #call + ": " + cudaGetErrorName(pkb_err_) + ": " + cudaGetErrorString(pkb_err_)); \
  } while (0)

#define NCCL_CHECK(call)                                                                                                         \
  do {                                                                                                                           \
    ncclResult_t pkb_err_ = (call);                                                                                              \
    if (pkb_err_ != ncclSuccess) ::pkb::fail(::pkb::Errc::nccl_error, PKB_WHERE_ + #call + ": " + ncclGetErrorString(pkb_err_)); \
  } while (0)

#define CUBLAS_CHECK(call)                                                                                 \
  do {                                                                                                     \
    cublasStatus_t pkb_err_ = (call);                                                                      \
    if (pkb_err_ != CUBLAS_STATUS_SUCCESS)                                                                 \
      ::pkb::fail(::pkb::Errc::cublas_error, PKB_WHERE_ + #call + ": " + cublasGetStatusString(pkb_err_)); \
  } while (0)
