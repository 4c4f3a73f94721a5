// pkb-expect: compile_error
// pkb-problem: 1
// Does not compile: the record must carry nvcc's message.
#include <pkb/solution.h>

extern "C" int pkb_init(pkb_context*) { return 0 }
