// Tunables of the lock, with the values the upstream series use (LINEAGE.md).
#ifndef RWSEM_LIB_CONFIG_H_
#define RWSEM_LIB_CONFIG_H_

// The library needs C++17. Every public header includes this one first
// among the library's own, and runtime.cc and lock_events.cc, which every
// build of //lib:rwsem compiles, include it: a build below C++17 stops
// here. (Bazel 4's auto-configured toolchain uses -std=c++0x,
// and a cc_library cannot raise its dependents' -std.)
#if !defined(__cplusplus) || __cplusplus < 201703L
#error "rwsem needs C++17 or later: build with --cxxopt=-std=c++17 (Bazel) or -std=c++17"
#endif

#include <chrono>
#include <cstdint>

namespace rwsem {

// Debug mode (--define=rwsem_debug=1, which defines RWSEM_DEBUG for the
// library and everything that includes it): the DEBUG_RWSEMS-style checks
// that abort with the decoded state. A whole-build switch: debug builds add
// a field to the wait lock.
inline constexpr bool kDebugEnabled =
#if defined(RWSEM_DEBUG)
    true;
#else
    false;
#endif

// A first waiter that has waited this long sets HANDOFF and stops lock
// stealing until it owns the lock (the handoff commit: 4 ms). Real-time writers do not
// wait for it.
inline constexpr std::chrono::nanoseconds kDefaultHandoffTimeout = std::chrono::milliseconds(4);

// A read phase (rwsem.h, "Read phases") lasts the handoff timeout divided
// by this: 500 us with the default 4 ms. Measured against 250 us, 333 us,
// 400 us and 1 ms (README, "Where the lock departs from the kernel"): the
// longer the phase, the higher the mixed benchmark's balanced rate from 16
// threads up and the fewer the runs in which the mostly-readers benchmark
// starves a thread at 64 threads, but the more the runs in which single
// writers of the mixed one starve there.
inline constexpr int kReadPhaseDivisor = 8;

// A reader within its read phase looks at the clock for the phase's end on
// its first rejoin and every this-many-th after (rwsem.h,
// may_rejoin_read_phase()).
inline constexpr unsigned kReadPhaseClockStride = 16;

// Readers woken by one wake-up when the first waiter is a reader (rwsem series patch
// 6): bounds the waker's work and the growth of the reader count.
inline constexpr int kMaxReadersWakeup = 256;

// Optimistic spinning budget: the longest one lock attempt spins (on the
// owner, or in the spin queue) before it queues and sleeps. User space cannot
// see whether an owner thread is on a CPU; the lock knows only whether the
// owner is parked in one of its own waits. The budget bounds the cost of
// guessing wrong: a spinner stops when the owner parks, when the owner
// changes to something it may not spin on, or when the budget is spent.
// Spinning on a reader-owned lock has the series' tighter limit on top
// (10 us + 0.5 us per reader up to 30 readers with waiters, else 25 us).
// At most one thread per available CPU but one spins on a lock at a time
// (osq.h says why); on a single CPU nothing spins.
inline constexpr std::chrono::nanoseconds kDefaultSpinBudget = std::chrono::microseconds(50);

// A queued writer that is about to sleep first polls its wait state this
// many times, with exponential back-off between polls (Backoff from one
// pause hint: 1, 2, 4, ... then 256 per poll, 2,303 in all; about 22 us
// where a pause takes 9.4 ns, 45 us at 19.7 ns; spin_wait.h), if it may spin (spin budget above 0,
// more than one CPU) and is not a real-time thread. With more threads than
// CPUs, a writer woken by an unlock usually finds the lock taken again by
// a running thread when it retries, and sleeps again; each round trip
// through the scheduler costs more than the wait it stands for, and the
// writers that sleep most fall behind the ones that do not (writers-only
// at 64 threads: single writers starved). Measured against no poll and
// against a poll by the first waiter only (README, "Where the lock departs
// from the kernel"); readers do not poll.
inline constexpr int kWaiterPolls = 16;

// Spinning can be compiled out with --define=rwsem_spin=off.
inline constexpr bool kSpinCompiledIn =
#if defined(RWSEM_NO_SPIN)
    false;
#else
    true;
#endif

// The largest process-wide default the setters below store: 2^62 ns, about
// 146 years, i.e. "never" for a spin budget or a handoff timeout. The lock
// computes deadlines as now + value on the monotonic clock; this bound keeps
// that sum below INT64_MAX as long as the clock reads less than 2^62 ns.
inline constexpr std::chrono::nanoseconds kMaxDefaultTunable =
    std::chrono::nanoseconds(std::int64_t{1} << 62);

// Process-wide spin budget, used by every lock that does not set its own.
// Any value is accepted: one above kMaxDefaultTunable (nanoseconds::max()
// included) is stored as kMaxDefaultTunable, and a negative one as 0 (no
// spinning). default_spin_budget() returns the value stored.
void set_default_spin_budget(std::chrono::nanoseconds budget);
std::chrono::nanoseconds default_spin_budget();

// Process-wide handoff timeout, used by every lock that does not set its own.
// Clamped like the spin budget: above kMaxDefaultTunable (nanoseconds::max()
// included) means kMaxDefaultTunable, in effect no handoff; negative means 0
// (the first waiter asks for handoff as soon as it looks).
// default_handoff_timeout() returns the value stored.
void set_default_handoff_timeout(std::chrono::nanoseconds timeout);
std::chrono::nanoseconds default_handoff_timeout();

struct Options {
  // Per-lock handoff timeout; negative means "use the process-wide default".
  // Stored in whole microseconds (rounded down); larger values are stored
  // as 2^24 - 2 us (16.8 s). The mutex has no handoff timeout.
  std::chrono::nanoseconds handoff_timeout{-1};
  // Per-lock spin budget; negative means "use the process-wide default",
  // zero turns spinning off for this lock. The rwsem stores whole
  // microseconds (rounded down), at most 254; the mutex nanoseconds, at
  // most 2^31 - 1 (2.1 s).
  std::chrono::nanoseconds spin_budget{-1};
};

}  // namespace rwsem

#endif  // RWSEM_LIB_CONFIG_H_
