// Process-wide pieces of the lock that are not templates: the handoff clock
// and default timeout, the calling thread's scheduling class, the spinner
// limit, and the debug-mode failure report. The lock code reaches the clock
// and the scheduling questions only through its platform policy
// (platform.h).
#ifndef RWSEM_LIB_INTERNAL_RUNTIME_H_
#define RWSEM_LIB_INTERNAL_RUNTIME_H_

#include <atomic>
#include <cstdint>
#include <string>

namespace rwsem {
namespace internal {

// The clock handoff decisions are made on (ns). Real time unless a test
// installed a fake one (rwsem::testing::FakeHandoffClock, //lib:testing).
// Futex deadlines of the timed lock calls always use the real monotonic
// clock.
std::int64_t handoff_clock_now();

// Makes handoff_clock_now() read *clock instead of the real clock, or the
// real clock again when `clock` is nullptr. False if another override is
// installed. For tests only; *clock must outlive every thread that locks.
bool set_handoff_clock_override(const std::atomic<std::int64_t>* clock);

// The handoff timeout and spin budget of locks that did not set their own.
std::int64_t default_handoff_timeout_ns();
std::int64_t default_spin_budget_ns();

// True when the calling thread runs under SCHED_FIFO or SCHED_RR.
bool current_thread_is_realtime();

// How many threads may spin in one lock's spin queue: the CPUs this process
// may run on, minus one for the owner (0 on one CPU: never spin). Read once.
unsigned max_spinners();

// Debug mode (DEBUG_RWSEMS): prints what went wrong, where, and who did it,
// then aborts.
[[noreturn]] void debug_fail(const char* what, const void* lock, const std::string& decoded_state);

// Appends printf-style text to *out: how the locks' describe() decode their
// words without pulling iostreams into the lock headers.
[[gnu::format(printf, 2, 3)]] void append_format(std::string* out, const char* fmt, ...);

}  // namespace internal
}  // namespace rwsem

#endif  // RWSEM_LIB_INTERNAL_RUNTIME_H_
