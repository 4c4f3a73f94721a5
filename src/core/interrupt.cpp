#include "core/interrupt.hpp"

#include <signal.h>

#include <atomic>

namespace pkb {

namespace {
std::atomic<bool> g_interrupted{false};
void on_signal(int) { g_interrupted.store(true); }
}  // namespace

void install_interrupt_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

bool interrupted() { return g_interrupted.load(); }

void check_interrupted() {
  if (interrupted()) throw Interrupted();
}

}  // namespace pkb
