// Deadlines of the timed lock calls: any std::chrono duration or time point,
// turned into an absolute CLOCK_MONOTONIC time in ns, the clock the futex
// waits measure (arch/futex.h). arch::kNoDeadline means "wait forever".
#ifndef RWSEM_LIB_INTERNAL_DEADLINE_H_
#define RWSEM_LIB_INTERNAL_DEADLINE_H_

#include <chrono>
#include <cstdint>

#include "arch/futex.h"

namespace rwsem {
namespace internal {

template <class Rep, class Period>
std::int64_t deadline_after(const std::chrono::duration<Rep, Period>& d) {
  // More than ~30 years is "forever"; checked in double so that
  // hours::max() does not overflow the conversion to nanoseconds.
  if (std::chrono::duration<double>(d).count() > 1e9) return arch::kNoDeadline - 1;
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  const std::int64_t now = arch::monotonic_now_ns();
  if (ns <= 0) return now;
  return ns >= arch::kNoDeadline - now ? arch::kNoDeadline - 1 : now + ns;
}

// Any clock's time point, measured as "time left" on that clock and then
// placed on the monotonic clock. Compared before subtracting:
// time_point::min() - now() would overflow.
template <class Clock, class Duration>
std::int64_t to_deadline(const std::chrono::time_point<Clock, Duration>& t) {
  const auto now = Clock::now();
  if (t <= now) return arch::monotonic_now_ns();
  return deadline_after(t - now);
}

}  // namespace internal
}  // namespace rwsem

#endif  // RWSEM_LIB_INTERNAL_DEADLINE_H_
