// Typed errors for host code. Library code throws pkb::Error; each process converts errors to a
// status record at exactly one boundary (the CLI command handler, the worker's job loop).
#pragma once
#include <stdexcept>
#include <string>
#include <string_view>

namespace pkb {

enum class Errc {
  invalid_argument,  // bad user input (CLI flag, unknown problem, size that does not divide)
  not_found,  // a file or entry that should exist does not
  parse_error,  // malformed spec, JSON, TOML or expression
  io_error,  // read/write/socket failures
  cuda_error,
  nccl_error,
  cublas_error,
  protocol_error,  // a peer sent something the control protocol does not allow
  timeout,
  internal,  // a bug in pkb
};

std::string_view to_string(Errc code);

class Error : public std::runtime_error {
 public:
  Error(Errc code, std::string message) : std::runtime_error(std::move(message)), code_(code) {}
  Errc code() const { return code_; }

 private:
  Errc code_;
};

[[noreturn]] void fail(Errc code, std::string message);

}  // namespace pkb
