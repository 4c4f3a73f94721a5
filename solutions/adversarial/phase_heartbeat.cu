// pkb-expect: protocol_error
// pkb-problem: 1
// pkb-args: --timeout 10
// Hangs in pkb_run while a thread re-announces the current phase ("trial 0") on its process's
// channel (fd 3) every 2 s, hoping each announcement restarts the phase's deadline. Phases are the
// checker's to announce, and that channel leads to the checker, which takes only replies: the first
// announcement breaks the protocol and ends the job at once.
#include <pkb/solution.h>
#include <unistd.h>

#include <cstring>
#include <thread>

namespace {
void announce(const char* phase) {
  char body[96];
  int blen = snprintf(body, sizeof body, "{\"phase\":\"%s\",\"step\":0}", phase);
  unsigned char frame[24 + sizeof body];
  unsigned magic = 0x31424B50, kind = 3;  // "PKB1", phase
  unsigned long long bl = static_cast<unsigned long long>(blen), xl = 0;
  std::memcpy(frame, &magic, 4);
  std::memcpy(frame + 4, &kind, 4);
  std::memcpy(frame + 8, &bl, 8);
  std::memcpy(frame + 16, &xl, 8);
  std::memcpy(frame + 24, body, bl);
  (void)!write(3, frame, 24 + bl);
}
}  // namespace

extern "C" int pkb_init(pkb_context*) { return 0; }
extern "C" int pkb_run(pkb_context*, const pkb_tensor*, int, pkb_tensor*, int) {
  std::thread([] {
    for (;;) {
      sleep(2);
      announce("trial 0");
    }
  }).detach();
  for (;;) pause();
}
extern "C" int pkb_finalize(pkb_context*) { return 0; }
