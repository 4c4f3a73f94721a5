// Ctrl-C and SIGTERM: the driver notices, kills whatever job is running (destructors do that) and
// exits with 130, keeping every record already written.
#pragma once
#include "core/error.hpp"

namespace pkb {

void install_interrupt_handlers();
bool interrupted();
/// Throws Interrupted if a signal has arrived.
void check_interrupted();

struct Interrupted : Error {
  Interrupted() : Error(Errc::internal, "interrupted") {}
};

}  // namespace pkb
