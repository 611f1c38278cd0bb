// The small lock that guards a rwsem's wait queue (the kernel's wait_lock).
//
// A three-state futex mutex: 0 free, 1 held, 2 held with sleepers. It spins
// briefly first, because it is held only for queue edits of a few dozen
// instructions; a holder that gets preempted makes the others sleep rather
// than burn their time slices. Futex, yield, spin hint and perturbation
// come from the platform policy P (platform.h).
#ifndef RWSEM_LIB_INTERNAL_WAIT_LOCK_H_
#define RWSEM_LIB_INTERNAL_WAIT_LOCK_H_

#include <atomic>
#include <cstdint>

#include "arch/futex.h"
#include "lib/rwsem/internal/thread_record.h"

namespace rwsem {
namespace internal {

template <class P>
class BasicWaitLock {
 public:
  void lock() {
    std::uint32_t expected = kFree;
    // acquire pairs with the release in unlock(): queue edits of the last
    // holder are visible to the next.
    if (word_.compare_exchange_strong(expected, kHeld, std::memory_order_acquire,
                                      std::memory_order_relaxed))
      return;
    lock_slow();
  }

  bool try_lock() {
    std::uint32_t expected = kFree;
    return word_.compare_exchange_strong(expected, kHeld,
                                         std::memory_order_acquire,
                                         std::memory_order_relaxed);
  }

  void unlock() {
    // release pairs with the acquire in lock()/try_lock()/lock_slow().
    if (word_.exchange(kFree, std::memory_order_release) == kContended)
      P::futex_wake(&word_, 1);
    P::perturb();  // corpus builds only: whoever waited for the queue runs now
  }

  bool is_locked() const { return word_.load(std::memory_order_relaxed) != kFree; }

  // For the destructor of the lock this wait lock belongs to. A thread that
  // released that lock may still be inside its unlock call, holding this
  // wait lock for its last few instructions (waking waiters); it touches
  // nothing of the lock after unlock() below. Waits until it is out.
  // acquire pairs with the release in unlock(): everything that thread did
  // to the lock happens before the caller frees the memory. Never blocks
  // for long: the wait lock is only ever held for queue edits.
  void wait_until_unlocked() const {
    while (word_.load(std::memory_order_acquire) != kFree) P::yield();
  }

 private:
  static constexpr std::uint32_t kFree = 0, kHeld = 1, kContended = 2;
  static constexpr int kSpins = 100;

  void lock_slow() {
    for (int i = 0; i < kSpins; ++i) {
      P::cpu_relax();
      if (word_.load(std::memory_order_relaxed) == kFree && try_lock()) return;
    }
    // Once we sleep, the word says kContended so that unlock() wakes someone;
    // we may over-wake by one, never under-wake.
    ParkedScope<P> parked;  // spinners on a lock we own stop spinning
    while (word_.exchange(kContended, std::memory_order_acquire) != kFree)
      P::futex_wait(&word_, kContended, arch::kNoDeadline);
  }

  typename P::template Atomic<std::uint32_t> word_{kFree};
};

}  // namespace internal
}  // namespace rwsem

#endif  // RWSEM_LIB_INTERNAL_WAIT_LOCK_H_
