// pkb-expect: compile_error
// pkb-problem: 1
// pkb-args: --compile-timeout 15
// A template whose instantiation doubles a type at every level: the compiler would run for hours.
// The compile deadline stops it and the whole nvcc process group is killed.
#include <pkb/solution.h>

template <class A, class B>
struct Pair {};
template <class T, int N>
struct Grow {
  using type = typename Grow<Pair<T, T>, N - 1>::type;
  static constexpr int size = sizeof(typename Grow<Pair<T, T>, N - 1>::type) + Grow<Pair<T, Pair<T, T>>, N - 1>::size;
};
template <class T>
struct Grow<T, 0> {
  using type = T;
  static constexpr int size = 1;
};
constexpr int kBoom = Grow<int, 40>::size;

extern "C" int pkb_init(pkb_context*) { return kBoom; }
extern "C" int pkb_run(pkb_context*, const pkb_tensor*, int, pkb_tensor*, int) { return 0; }
extern "C" int pkb_finalize(pkb_context*) { return 0; }
