// Deadlines of the timed lock calls: any std::chrono duration or time point,
// turned into an absolute time in ns on the clock the futex waits measure,
// P::now_ns() of the platform policy P (platform.h); for NativePlatform
// that is CLOCK_MONOTONIC (arch/futex.h). arch::kNoDeadline means "wait
// forever".
#ifndef RWSEM_LIB_INTERNAL_DEADLINE_H_
#define RWSEM_LIB_INTERNAL_DEADLINE_H_

#include <chrono>
#include <cstdint>
#include <type_traits>

#include "arch/futex.h"
#include "lib/rwsem/internal/platform.h"

namespace rwsem {
namespace internal {

template <class P, class Rep, class Period>
std::int64_t deadline_after(const std::chrono::duration<Rep, Period>& d) {
  // More than ~30 years is "forever"; checked in double so that
  // hours::max() (and hours::min()) do not overflow the conversion to
  // nanoseconds.
  const double secs = std::chrono::duration<double>(d).count();
  if (secs > 1e9) return arch::kNoDeadline - 1;
  const std::int64_t now = P::now_ns();
  if (!(secs > 0)) return now;
  // Rounded up: a wait may end late, never early (a duration finer than a
  // nanosecond must not lose its fraction).
  const auto ns = std::chrono::ceil<std::chrono::nanoseconds>(d).count();
  return ns >= arch::kNoDeadline - now ? arch::kNoDeadline - 1 : now + ns;
}

// Any clock's time point, measured as "time left" on that clock and then
// placed on P's futex clock. Compared before subtracting:
// time_point::min() - now() would overflow.
template <class P, class Clock, class Duration>
std::int64_t to_deadline(const std::chrono::time_point<Clock, Duration>& t) {
  const auto now = Clock::now();
  if (t <= now) return P::now_ns();
  return deadline_after<P>(t - now);
}

// Runs op(deadline_ns) -> bool, a "lock until this deadline on P::now_ns()'s
// clock" attempt, for a time point `t` on any clock, with the semantics
// [thread.timedmutex.requirements] gives try_lock_until and
// [thread.sharedtimedmutex.requirements] gives try_lock_shared_until: the
// call fails only once Clock::now() has reached t; "if abs_time has already
// passed, the function attempts to obtain ownership without blocking (as if
// by calling try_lock())". The timeout is measured on Clock, not on the
// clock the futex waits use ([thread.req.timing]: "the timeout expires when
// Clock::now() >= abs_time").
//
// So for any clock but our own: convert the time left on Clock into a
// futex-clock deadline, wait, then read Clock again and repeat while t is still
// ahead on it (a clock that runs slow or jumps backwards needs more than
// one wait). The first conversion of a t that already passed makes exactly
// one attempt, with a deadline of "now", which no slow path blocks on. A
// retry never happens for a t that passed: then op's false stands.
//
// std::chrono::steady_clock is CLOCK_MONOTONIC itself (libstdc++ and libc++
// on Linux both read it through clock_gettime(CLOCK_MONOTONIC)), the clock
// of NativePlatform's futex deadline: when op fails at its deadline,
// steady_clock::now() has already reached t, and a second look cannot change
// the answer. One call, no loop. For any other policy steady_clock is just
// another clock.
template <class P, class Clock, class Duration, class Op>
bool until(const std::chrono::time_point<Clock, Duration>& t, Op op) {
  if constexpr (std::is_same_v<Clock, std::chrono::steady_clock> &&
                std::is_same_v<P, NativePlatform>) {
    return op(to_deadline<P>(t));
  } else {
    bool first = true;
    for (;;) {
      const auto now = Clock::now();
      if (t <= now) return first ? op(P::now_ns()) : false;
      if (op(deadline_after<P>(t - now))) return true;
      first = false;
    }
  }
}

}  // namespace internal
}  // namespace rwsem

#endif  // RWSEM_LIB_INTERNAL_DEADLINE_H_
