// pkb-expect: mismatch
// pkb-problem: 1
// Returns without writing its output (the equivalent of returning torch.empty): the poison stays.
#include <pkb/solution.h>

extern "C" int pkb_init(pkb_context*) { return 0; }
extern "C" int pkb_run(pkb_context*, const pkb_tensor*, int, pkb_tensor*, int) { return 0; }
extern "C" int pkb_finalize(pkb_context*) { return 0; }
