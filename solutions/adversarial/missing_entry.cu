// pkb-expect: load_error
// pkb-problem: 1
// Defines pkb_init and pkb_run but forgets pkb_finalize: reported by name before anything runs.
#include <pkb/solution.h>

extern "C" int pkb_init(pkb_context*) { return 0; }
extern "C" int pkb_run(pkb_context*, const pkb_tensor*, int, pkb_tensor*, int) { return 0; }
