#include "worker/shared_memory.hpp"

#include <unistd.h>

#include <string>
#include <utility>

#include "core/error.hpp"

namespace pkb::worker {

namespace {

void drv(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* text = nullptr;
  cuGetErrorName(r, &name);
  cuGetErrorString(r, &text);
  fail(Errc::cuda_error, std::string(what) + ": " + (name ? name : "?") + ": " + (text ? text : ""));
}

CUmemAllocationProp prop_for(int device) {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = device;
  p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return p;
}

CUmemAccessDesc access(int device, CUmemAccess_flags flags) {
  CUmemAccessDesc a{};
  a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  a.location.id = device;
  a.flags = flags;
  return a;
}

}  // namespace

SetLayout SetLayout::of(const std::vector<TensorDesc>& descs, size_t granularity) {
  SetLayout l;
  size_t off = 0;
  for (auto& d : descs) {
    l.offsets.push_back(off);
    off += (std::max<size_t>(d.bytes(), 256) + 511) / 512 * 512;
  }
  off = std::max<size_t>(off, 1);
  l.bytes = (off + granularity - 1) / granularity * granularity;
  return l;
}

size_t SharedMapping::granularity(int device) {
  CUmemAllocationProp p = prop_for(device);
  size_t g = 0;
  drv(cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM), "cuMemGetAllocationGranularity");
  return g;
}

SharedMapping SharedMapping::create(int device, size_t bytes) {
  SharedMapping m;
  CUmemAllocationProp p = prop_for(device);
  drv(cuMemCreate(&m.handle_, bytes, &p, 0), "cuMemCreate (a shareable tensor set)");
  m.bytes_ = bytes;
  drv(cuMemAddressReserve(&m.ptr_, bytes, 0, 0, 0), "cuMemAddressReserve");
  drv(cuMemMap(m.ptr_, bytes, 0, m.handle_, 0), "cuMemMap");
  CUmemAccessDesc a = access(device, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  drv(cuMemSetAccess(m.ptr_, bytes, &a, 1), "cuMemSetAccess");
  return m;
}

SharedMapping SharedMapping::import(int device, int fd, size_t bytes, bool read_only) {
  SharedMapping m;
  CUresult r = cuMemImportFromShareableHandle(&m.handle_, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
                                              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  ::close(fd);
  drv(r, "cuMemImportFromShareableHandle");
  m.bytes_ = bytes;
  drv(cuMemAddressReserve(&m.ptr_, bytes, 0, 0, 0), "cuMemAddressReserve");
  drv(cuMemMap(m.ptr_, bytes, 0, m.handle_, 0), "cuMemMap");
  if (read_only) {
    CUmemAccessDesc a = access(device, CU_MEM_ACCESS_FLAGS_PROT_READ);
    if (cuMemSetAccess(m.ptr_, bytes, &a, 1) == CUDA_SUCCESS) {
      m.read_only_ = true;
      return m;
    }
  }
  CUmemAccessDesc a = access(device, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  drv(cuMemSetAccess(m.ptr_, bytes, &a, 1), "cuMemSetAccess");
  return m;
}

int SharedMapping::export_fd() const {
  int fd = -1;
  drv(cuMemExportToShareableHandle(&fd, handle_, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), "cuMemExportToShareableHandle");
  return fd;
}

void SharedMapping::release() {
  if (ptr_) {
    cuMemUnmap(ptr_, bytes_);
    cuMemAddressFree(ptr_, bytes_);
  }
  if (handle_) cuMemRelease(handle_);
  ptr_ = 0;
  handle_ = 0;
  bytes_ = 0;
}

SharedMapping::~SharedMapping() { release(); }

SharedMapping::SharedMapping(SharedMapping&& o) noexcept
    : handle_(std::exchange(o.handle_, 0)),
      ptr_(std::exchange(o.ptr_, 0)),
      bytes_(std::exchange(o.bytes_, 0)),
      read_only_(o.read_only_) {}

SharedMapping& SharedMapping::operator=(SharedMapping&& o) noexcept {
  if (this != &o) {
    release();
    handle_ = std::exchange(o.handle_, 0);
    ptr_ = std::exchange(o.ptr_, 0);
    bytes_ = std::exchange(o.bytes_, 0);
    read_only_ = o.read_only_;
  }
  return *this;
}

std::vector<pkb_tensor> views_of(const SharedMapping& m, const SetLayout& layout, const std::vector<TensorDesc>& descs) {
  std::vector<pkb_tensor> views;
  for (size_t i = 0; i < descs.size(); ++i) {
    const TensorDesc& d = descs[i];
    pkb_tensor t{};
    t.data = m.base() + layout.offsets[i];
    t.dtype = static_cast<pkb_dtype>(d.dtype);
    t.ndim = static_cast<int>(d.shape.size());
    for (size_t k = 0; k < d.shape.size(); ++k) t.shape[k] = d.shape[k];
    t.name = d.name.c_str();
    views.push_back(t);
  }
  return views;
}

}  // namespace pkb::worker
