// The report's three plots, drawn as SVG from a Leaderboard (one colour per run, same order as the
// tables):
//   fast_p_chart     fast_p against p from 0 to 3, a step line per run    (svg id "fast-p")
//   speedup_chart    best correct speedup per problem, bars on a log2 axis  (svg id "speedup")
//   roofline_chart   achieved % of roofline per problem, one dot per run    (svg id "roofline")
#pragma once
#include <cstddef>
#include <string>

#include "report/leaderboard.hpp"

namespace pkb {

/// The colour of run i (a colour-blind-safe categorical palette, repeating after 8).
const char* run_color(size_t i);

std::string fast_p_chart(const Leaderboard& board);
std::string speedup_chart(const Leaderboard& board);
std::string roofline_chart(const Leaderboard& board);

}  // namespace pkb
