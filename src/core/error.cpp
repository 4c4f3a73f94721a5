#include "core/error.hpp"

namespace pkb {

std::string_view to_string(Errc code) {
  switch (code) {
    case Errc::invalid_argument: return "invalid_argument";
    case Errc::not_found: return "not_found";
    case Errc::parse_error: return "parse_error";
    case Errc::io_error: return "io_error";
    case Errc::cuda_error: return "cuda_error";
    case Errc::nccl_error: return "nccl_error";
    case Errc::cublas_error: return "cublas_error";
    case Errc::protocol_error: return "protocol_error";
    case Errc::timeout: return "timeout";
    case Errc::internal: return "internal";
  }
  return "unknown";
}

void fail(Errc code, std::string message) { throw Error(code, std::move(message)); }

}  // namespace pkb
