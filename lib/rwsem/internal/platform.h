// The platform policy: the one place the lock code reaches the machine.
//
// Every lock (BasicRwSemaphore, BasicMutex, BasicQRwLock) and every helper
// it is built from (BasicThreadRecord, SpinQueue, BasicWaitLock, Waiter,
// WaitQueue, WakeList, SpinWait, the deadline helpers) is a template on a
// platform policy P, and takes from P, and from nowhere else, everything
// that touches memory shared between threads or asks the OS or the clock:
//
//   template <class T> using Atomic    the atomic type of every shared word
//   template <class T> using Plain     shared data that is not atomic (the
//                                      wait queue, a waiter's fields): T
//                                      itself here; a model checker's
//                                      policy checks each access for races
//   using Record                       the per-thread record,
//                                      BasicThreadRecord<P>
//   fence(mo)                          a thread fence
//   futex_wait(w, expected, deadline)  sleep while *w == expected, until a
//                                      wake, a signal or the deadline (ns on
//                                      now_ns()'s clock); arch/futex.h
//   futex_wake(w, n)                   wake up to n sleepers on w
//   now_ns()                           the clock of futex deadlines
//   handoff_now_ns()                   the clock of handoff decisions
//   cpu_relax()                        spin-wait hint
//   pause(n)                           n spin-wait hints: one back-off step
//                                      (a model runs it as one hint)
//   yield()                            give up the time slice
//   sleep_for_ns(ns)                   sleep about ns (or less, on a
//                                      signal): the CPU goes to any thread,
//                                      whatever its priority
//   perturb()                          schedule noise at protocol boundaries
//                                      (corpus builds only)
//   current_thread()                   the calling thread's Record
//   for_each_record(f)                 f(Record&) for every record in use
//                                      or used before (a lock's destructor
//                                      waits on them; rwsem.h "Lifetime")
//   current_thread_is_realtime()       SCHED_FIFO/SCHED_RR caller?
//   max_spinners()                     spinners one spin queue allows
//   wait_lock_spins()                  spin-wait hints a wait-lock contender
//                                      gives before it sleeps (wait_lock.h)
//   begin_short_section()              the caller starts a section it wants
//   end_short_section()                to run without preemption: the wait
//                                      lock's (time_slice.h; Linux's rseq
//                                      time-slice extension where offered)
//   store_byte(word, offset, v, mo)    an atomic store to one byte of an
//                                      Atomic<W> (the queued rwlock's
//                                      writer byte)
//
// The memory orders stay in the lock code: the policy carries out each
// operation with the order the lock asks for. NativePlatform below is the
// real machine; its members only forward, so a lock on it compiles to the
// same code as one written against std::atomic and arch/ directly. Another
// policy (a model checker's) can substitute its own atomics, clock, futex
// and threads without a second copy of any algorithm.
#ifndef RWSEM_LIB_INTERNAL_PLATFORM_H_
#define RWSEM_LIB_INTERNAL_PLATFORM_H_

#include <sched.h>
#include <time.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "arch/cpu.h"
#include "arch/futex.h"
#include "lib/rwsem/internal/perturb.h"
#include "lib/rwsem/internal/runtime.h"
#include "lib/rwsem/internal/thread_record.h"
#include "lib/rwsem/internal/time_slice.h"

namespace rwsem {
namespace internal {

struct NativePlatform;

// The native thread's record: the thread-local fast path of
// NativePlatform::current_thread(), and the slow path that takes a record
// from the pool on a thread's first use (runtime.cc).
inline thread_local BasicThreadRecord<NativePlatform>* t_current_record = nullptr;
BasicThreadRecord<NativePlatform>& current_thread_slow();
// Calls f(record, ctx) for every record the pool has handed out. Sees at
// least every record whose first use happens before the call; may also see
// records handed out during it (runtime.cc).
void for_each_thread_record(void (*f)(BasicThreadRecord<NativePlatform>&, void*), void* ctx);

struct NativePlatform {
  template <class T>
  using Atomic = std::atomic<T>;
  template <class T>
  using Plain = T;
  using Record = BasicThreadRecord<NativePlatform>;

  static void fence(std::memory_order mo) { std::atomic_thread_fence(mo); }

  static int futex_wait(Atomic<std::uint32_t>* w, std::uint32_t expected,
                        std::int64_t deadline_ns) {
    return arch::futex_wait(w, expected, deadline_ns);
  }
  static void futex_wake(Atomic<std::uint32_t>* w, int n) { arch::futex_wake(w, n); }

  // CLOCK_MONOTONIC: the clock futex deadlines are measured on.
  static std::int64_t now_ns() { return arch::monotonic_now_ns(); }
  // Real time, or a test's FakeHandoffClock (runtime.h).
  static std::int64_t handoff_now_ns() { return handoff_clock_now(); }

  static void cpu_relax() { arch::cpu_relax(); }
  static void pause(unsigned n) {
    for (unsigned i = 0; i < n; ++i) arch::cpu_relax();
  }
  static void yield() { sched_yield(); }
  static void sleep_for_ns(std::int64_t ns) {
    const timespec t{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    nanosleep(&t, nullptr);  // interrupted: the caller's loop looks again
  }
  static void perturb() { internal::perturb(); }

  // The calling thread's record, taken from the pool on first use.
  static Record& current_thread() {
    Record* r = t_current_record;
    return r != nullptr ? *r : current_thread_slow();
  }
  // f(record) for every thread record handed out so far: at least every
  // record whose first use happens before the call.
  template <class F>
  static void for_each_record(F&& f) {
    using Fn = std::remove_reference_t<F>;
    for_each_thread_record([](Record& r, void* fn) { (*static_cast<Fn*>(fn))(r); }, &f);
  }
  static bool current_thread_is_realtime() { return internal::current_thread_is_realtime(); }
  static unsigned max_spinners() { return internal::max_spinners(); }
  // The wait lock is held for a few dozen instructions of queue edits: 100
  // hints (a few microseconds) outlast a holder that is running.
  static int wait_lock_spins() { return 100; }
  static void begin_short_section() { begin_time_slice_section(); }
  static void end_short_section() { end_time_slice_section(); }

  // A mixed-size atomic store: one byte, `offset` bytes into *word. C++ has
  // no such operation on std::atomic; the compiler builtin does it (the
  // kernel's queued_write_unlock() stores its writer byte the same way).
  // The stores the standard allows are relaxed, release and seq_cst; any
  // other order gets seq_cst. `mo` is a constant at every call, so the
  // switch folds to the one store.
  template <class W>
  static void store_byte(Atomic<W>* word, std::size_t offset, std::uint8_t v,
                         std::memory_order mo) {
    static_assert(sizeof(Atomic<W>) == sizeof(W), "the byte is addressed inside the word");
    std::uint8_t* const byte = reinterpret_cast<std::uint8_t*>(word) + offset;
    switch (mo) {
      case std::memory_order_relaxed: __atomic_store_n(byte, v, __ATOMIC_RELAXED); break;
      case std::memory_order_release: __atomic_store_n(byte, v, __ATOMIC_RELEASE); break;
      default: __atomic_store_n(byte, v, __ATOMIC_SEQ_CST); break;
    }
  }
};

// The native record, for the pool (runtime.cc) and existing callers.
using ThreadRecord = BasicThreadRecord<NativePlatform>;
static_assert(alignof(ThreadRecord) == (1 << kOwnerIdShift),
              "owner ids are record addresses >> kOwnerIdShift");

// The calling native thread's record, taken from the pool on first use. For
// tests and diagnostics; the lock code asks its policy (P::current_thread()).
inline ThreadRecord& current_thread() { return NativePlatform::current_thread(); }

}  // namespace internal
}  // namespace rwsem

#endif  // RWSEM_LIB_INTERNAL_PLATFORM_H_
