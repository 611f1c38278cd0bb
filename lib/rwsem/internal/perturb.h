// Schedule perturbation for the corpus: widens the windows between the
// steps of a protocol so that stress tests reach interleavings that a
// machine with few cores almost never shows.
//
// A lost wake-up such as the one the mutex waiter-spinning series fixed needs the waker to run in the few
// nanoseconds between a waiter's look at the lock word and its going to
// sleep. Without help that happens only when the waiter is preempted at
// exactly that instruction, and in a stress run a lost wake-up is usually
// healed by the next unlock; the corpus would almost never see it.
// perturb() is called at protocol boundaries (after the wait lock is
// released, between a waiter's preparations and its sleep); in builds with
// RWSEM_PERTURB=1 it yields or sleeps a few microseconds at random there,
// so such windows open wide in a few thousand rounds.
//
// Normal builds compile it to nothing (`if constexpr`); only the corpus's
// perturbed test binary defines RWSEM_PERTURB.
#ifndef RWSEM_LIB_INTERNAL_PERTURB_H_
#define RWSEM_LIB_INTERNAL_PERTURB_H_

#include <sched.h>
#include <time.h>

#include <cstdint>

namespace rwsem {
namespace internal {

inline constexpr bool kPerturb =
#if defined(RWSEM_PERTURB) && RWSEM_PERTURB
    true;
#else
    false;
#endif

inline void perturb_slow() {
  // Per-thread xorshift: no shared state, so perturbation adds no ordering.
  thread_local std::uint64_t x = reinterpret_cast<std::uintptr_t>(&x) | 1;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  switch (x & 7) {
    case 0: sched_yield(); break;
    case 1: {
      const struct timespec ts = {0, static_cast<long>(1000 + (x >> 8) % 20000)};
      nanosleep(&ts, nullptr);
      break;
    }
    default: break;
  }
}

inline void perturb() {
  if constexpr (kPerturb) perturb_slow();
}

}  // namespace internal
}  // namespace rwsem

#endif  // RWSEM_LIB_INTERNAL_PERTURB_H_
