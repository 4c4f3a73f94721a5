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

/// fast_p(p) for p in [0, 3] as an exact step line per run (drops just after each best speedup),
/// with a dashed line at p = 1 and a legend.
std::string fast_p_chart(const Leaderboard& board);
/// One bar per run and problem from 1x to its best correct speedup on a log2 axis; an "×" where
/// the run attempted the problem without a correct timed sample; nothing where it has no record.
std::string speedup_chart(const Leaderboard& board);
/// One dot per run and problem at its roofline %; "n/m" under a problem nobody measured, and
/// "roofline not measured" across the plot when no record has a roofline.
std::string roofline_chart(const Leaderboard& board);

}  // namespace pkb
