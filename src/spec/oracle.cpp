#include "spec/oracle.hpp"

#include <cmath>

#include "core/error.hpp"

namespace pkb {

long long OracleIO::param(const std::string& name) const {
  auto it = vars.find(name);
  if (it == vars.end()) fail(Errc::internal, "oracle asked for unknown parameter '" + name + "'");
  return std::llround(it->second);
}

double OracleIO::fparam(const std::string& name) const {
  auto it = vars.find(name);
  if (it == vars.end()) fail(Errc::internal, "oracle asked for unknown parameter '" + name + "'");
  return it->second;
}

}  // namespace pkb
