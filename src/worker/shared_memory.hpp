// Tensor sets shared between a rank's two processes (docs/evaluation.md, "Threat model"): the
// checker allocates every input and output set as one CUDA VMM allocation (cuMemCreate) and passes
// it to the runner, where the solution runs, as a POSIX file descriptor. The runner maps inputs
// read-only (unless the problem modifies one in place) and outputs read-write. Each process maps the
// same physical memory at an address of its own.
#pragma once
#include <cuda.h>

#include <cstddef>
#include <vector>

#include "pkb/solution.h"
#include "proto/plan.hpp"

namespace pkb::worker {

/// Offsets of a set's tensors inside its allocation (each 512-byte aligned, at least 256 bytes).
struct SetLayout {
  std::vector<size_t> offsets;
  size_t bytes = 0;  // rounded up to the allocation granularity
  static SetLayout of(const std::vector<TensorDesc>& descs, size_t granularity);
};

/// A mapping of one VMM allocation into this process. Move-only; unmaps and releases on destruction.
class SharedMapping {
 public:
  SharedMapping() = default;
  /// The checker's side: a new allocation on `device`, mapped read-write here.
  static SharedMapping create(int device, size_t bytes);
  /// The runner's side: imports `fd` (closed here), maps it; read_only unless a tensor is written in
  /// place. Falls back to read-write where the driver refuses a read-only mapping (writable() says).
  static SharedMapping import(int device, int fd, size_t bytes, bool read_only);
  ~SharedMapping();
  SharedMapping(SharedMapping&& o) noexcept;
  SharedMapping& operator=(SharedMapping&& o) noexcept;
  SharedMapping(const SharedMapping&) = delete;
  SharedMapping& operator=(const SharedMapping&) = delete;

  /// A new POSIX descriptor for the allocation (the caller passes it on and closes it).
  int export_fd() const;
  char* base() const { return reinterpret_cast<char*>(ptr_); }
  size_t bytes() const { return bytes_; }
  bool read_only() const { return read_only_; }

  /// The allocation granularity of `device` for shareable allocations.
  static size_t granularity(int device);

 private:
  void release();
  CUmemGenericAllocationHandle handle_ = 0;
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
  bool read_only_ = false;
};

/// Tensor views over a mapped set.
std::vector<pkb_tensor> views_of(const SharedMapping& m, const SetLayout& layout, const std::vector<TensorDesc>& descs);

}  // namespace pkb::worker
