// The small lock that guards a rwsem's wait queue (the kernel's wait_lock).
//
// A three-state futex mutex (free, held, held with sleepers) whose word
// also tells whether it was ever taken: it starts kUnused (0, so a
// zero-initialised lock is a valid one) and never returns to it. It spins
// briefly first, because it is held only for queue edits of a few dozen
// instructions; a holder that gets preempted makes the others sleep rather
// than burn their time slices. A holder asks the kernel not to preempt it
// while it holds the lock, where the kernel offers that (time_slice.h).
// Futex, yield, spin hint, perturbation and that request come from the
// platform policy P (platform.h).
//
// The wait lock is a Clang thread-safety capability: what it guards says
// RWSEM_GUARDED_BY(wait_lock_), the helpers that need it say
// RWSEM_REQUIRES(wait_lock_), and -Wthread-safety (the toolchains turn it
// on) rejects a path that reaches them without it. Debug builds also check
// at run time (assert_held()) that the caller is the holder, for what the
// static analysis cannot see.
#ifndef RWSEM_LIB_INTERNAL_WAIT_LOCK_H_
#define RWSEM_LIB_INTERNAL_WAIT_LOCK_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "arch/futex.h"
#include "lib/rwsem/internal/runtime.h"
#include "lib/rwsem/internal/spin_wait.h"
#include "lib/rwsem/internal/thread_annotations.h"
#include "lib/rwsem/internal/thread_record.h"
#include "lib/rwsem/lock_events.h"

namespace rwsem {
namespace internal {

// The lock and unlock operations below are where the capability begins and
// ends; the analysis cannot see that a compare-exchange takes a lock, so
// they are RWSEM_NO_THREAD_SAFETY_ANALYSIS (as every primitive lock's own
// implementation is).
template <class P>
class RWSEM_CAPABILITY("wait lock") BasicWaitLock {
 public:
  void lock() RWSEM_ACQUIRE() RWSEM_NO_THREAD_SAFETY_ANALYSIS {
    std::uint32_t expected = kFree;
    // acquire pairs with the release in unlock(): queue edits of the last
    // holder are visible to the next.
    if (!word_.compare_exchange_strong(expected, kHeld, std::memory_order_acquire,
                                       std::memory_order_relaxed))
      lock_slow(expected);
    held();
  }

  [[nodiscard]] bool try_lock() RWSEM_TRY_ACQUIRE(true) RWSEM_NO_THREAD_SAFETY_ANALYSIS {
    std::uint32_t expected = kFree;
    // acquire: as in lock(). A lock never taken is free too; taking it
    // from kUnused is relaxed (first_taking()).
    const bool taken = word_.compare_exchange_strong(expected, kHeld, std::memory_order_acquire,
                                                     std::memory_order_relaxed) ||
                       (expected == kUnused && first_taking(expected));
    if (taken) held();
    return taken;
  }

  void unlock() RWSEM_RELEASE() RWSEM_NO_THREAD_SAFETY_ANALYSIS {
    note_holder(false);
    // release pairs with the acquire in lock()/try_lock()/lock_slow().
    const bool contended = word_.exchange(kFree, std::memory_order_release) == kContended;
    P::end_short_section();  // before the futex call, which would end a grant
    if (contended) P::futex_wake(&word_, 1);
    P::perturb();  // corpus builds only: whoever waited for the queue runs now
  }

  // Debug builds: aborts unless the calling thread holds this lock. What the
  // helpers marked RWSEM_REQUIRES check at run time; nothing otherwise.
  void assert_held() const {
#if defined(RWSEM_DEBUG)
    // relaxed: only the holder writes holder_ while it holds the lock, so a
    // caller that holds it reads its own store; any other caller reads
    // something else, which is all this needs to know.
    if (holder_.load(std::memory_order_relaxed) != &P::current_thread())
      debug_fail("a helper that needs the wait lock was called without it", this,
                 "wait lock word " + std::to_string(word_.load(std::memory_order_relaxed)));
#endif
  }

  // True once the lock has been taken. relaxed: the caller must be ordered
  // after the taking it needs to see (the rwsem destructor, see "Lifetime"
  // in rwsem.h); any later value says the same, since the word never goes
  // back to kUnused.
  bool ever_locked() const { return word_.load(std::memory_order_relaxed) != kUnused; }

  // For the destructor of the lock this wait lock belongs to. A thread that
  // released that lock may still be inside its unlock call, holding this
  // wait lock for its last few instructions (waking waiters); it touches
  // nothing of the lock after unlock() below. Waits until it is out.
  // acquire pairs with the release in unlock(): everything that thread did
  // to the lock happens before the caller frees the memory. The holder is
  // only ever a few instructions from the end, unless it was preempted: the
  // wait yields, then sleeps (UnlockerWait, spin_wait.h).
  void wait_until_unlocked() const {
    UnlockerWait<P> wait;
    while (word_.load(std::memory_order_acquire) >= kHeld) {
      RWSEM_EVENT_INC(destroy_wait_queue);
      wait.once();
    }
  }

  // The word's states. kUnused: never taken (the only state a lock starts
  // in); kFree: free; kHeld: held; kContended: held, and someone may sleep
  // on the word. Public for the model checker, which recognises a release
  // by the store of kFree.
  static constexpr std::uint32_t kUnused = 0, kFree = 1, kHeld = 2, kContended = 3;

 private:
  // `seen`: the word lock()'s compare-exchange found. The first taking of
  // a lock finds kUnused and takes it at once, not after a spin hint of the
  // loop below: natively that would be a wasted pause, and the model checker
  // runs a hint as a step that drains the thread's buffered stores and
  // advances the clock, with which the destroy-after-unlock scenarios
  // explored about a tenth of the executions (generic64, no spin: 9,980
  // against 118,526).
  void lock_slow(std::uint32_t seen) RWSEM_NO_THREAD_SAFETY_ANALYSIS {
    if (seen == kUnused && first_taking(seen)) return;
    for (int i = 0, spins = P::wait_lock_spins(); i < spins; ++i) {
      P::cpu_relax();
      if (word_.load(std::memory_order_relaxed) < kHeld && try_lock()) return;
    }
    // Once we sleep, the word says kContended so that unlock() wakes someone;
    // we may over-wake by one, never under-wake.
    ParkedScope<P> parked;  // spinners on a lock we own stop spinning
    while (word_.exchange(kContended, std::memory_order_acquire) >= kHeld)
      P::futex_wait(&word_, kContended, arch::kNoDeadline);
  }

  // Takes a lock never taken before (`seen` is kUnused), unless another
  // thread got there first (`seen` then holds what it found). relaxed:
  // kUnused is the word's initial value, which no release wrote, so there
  // is no earlier holder whose queue edits the taker must see (the lock's
  // construction is ordered before every use by whoever published the
  // lock); an acquire here would pair with nothing.
  bool first_taking(std::uint32_t& seen) RWSEM_NO_THREAD_SAFETY_ANALYSIS {
    return word_.compare_exchange_strong(seen, kHeld, std::memory_order_relaxed,
                                         std::memory_order_relaxed);
  }

  // Every taking of the lock ends here. The holder asks not to be preempted
  // until unlock() (P::begin_short_section(); time_slice.h): a holder
  // preempted here stalls every thread that queues on, or wakes from, the
  // lock this wait lock guards.
  void held() {
    P::begin_short_section();
    note_holder(true);
  }

  // Debug builds: records (held) or forgets (!held) the calling thread as
  // the holder. Nothing otherwise: not even the thread-record lookup.
  void note_holder([[maybe_unused]] bool held) {
#if defined(RWSEM_DEBUG)
    // relaxed: see assert_held().
    holder_.store(held ? &P::current_thread() : nullptr, std::memory_order_relaxed);
#endif
  }

  typename P::template Atomic<std::uint32_t> word_{kUnused};
#if defined(RWSEM_DEBUG)
  // The holder's thread record (debug builds only: assert_held()).
  typename P::template Atomic<const void*> holder_{nullptr};
#endif
};

}  // namespace internal
}  // namespace rwsem

#endif  // RWSEM_LIB_INTERNAL_WAIT_LOCK_H_
