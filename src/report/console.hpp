// The one-screen terminal summary of a record.
#pragma once
#include <cstdio>
#include <string>

#include "report/record.hpp"

namespace pkb {

std::string format_summary(const EvalRecord& r, bool color);
void print_summary(const EvalRecord& r, std::FILE* out);

}  // namespace pkb
