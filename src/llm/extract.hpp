// Finding the solution in a model's reply. Models wrap code in Markdown fences; the reply may hold
// several blocks (a snippet in the strategy, a header, the file). The rule:
//   1. the largest block tagged cu, cuda, cpp, c++, cxx, cc or c;
//   2. else the largest untagged block that mentions pkb_run;
//   3. else nothing (status no_code_block).
// Everything outside the chosen block is kept as the "strategy". A fence left open at the end of
// the reply (a reply cut off by max tokens) still counts as a block, flagged as unterminated.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pkb {

struct FencedBlock {
  std::string lang;  // first word of the info string, lower case ("" when untagged)
  std::string code;  // the lines between the fences
  size_t begin = 0, end = 0;  // the whole block, fences included, as offsets into the reply
  bool terminated = true;
};

/// Every fenced block (``` or ~~~, three or more, indented at most three spaces), in order.
std::vector<FencedBlock> fenced_blocks(std::string_view text);

struct ExtractedCode {
  std::optional<std::string> code;  // nullopt: no usable block
  std::string lang;
  bool terminated = true;
  std::string strategy;  // the reply without the chosen block, trimmed
};

ExtractedCode extract_code(std::string_view reply);

}  // namespace pkb
