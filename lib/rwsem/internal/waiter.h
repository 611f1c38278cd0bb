// Waiters, the wait queue, and the wake-up hand-over.
//
// A waiter lives on the stack of the thread that waits. The queue is a
// circular doubly-linked list reached through one pointer (the first
// waiter), edited only with the lock's wait lock held.
//
// Hand-over protocol (why a waiter's state has three values)
// -----------------------------------------------------------
// A waker decides whom to wake with the wait lock held, but makes the futex
// calls after dropping it, as the kernel's wake_q does. Between those two
// moments a woken reader may already see that it owns the lock and want to
// return, which would free the very word the waker is about to pass to
// futex_wake. So:
//
//   kQueued   -> kGranted   waker, wait lock held: "you are woken" (for a
//                           reader: "you hold the read lock").
//   kGranted  -> kReleased  waker, after its futex_wake: "I no longer touch
//                           your waiter"; store-release.
//   kReleased -> kQueued    a writer waiter re-arming itself, wait lock held.
//
// A waiter never leaves while its state is kGranted. It waits for kReleased,
// which costs at most the waker's futex_wake system call.
#ifndef RWSEM_LIB_INTERNAL_WAITER_H_
#define RWSEM_LIB_INTERNAL_WAITER_H_

#include <sched.h>

#include <atomic>
#include <cstdint>

#include "arch/cpu.h"
#include "arch/futex.h"
#include "lib/rwsem/internal/faults.h"
#include "lib/rwsem/internal/thread_record.h"

namespace rwsem {
namespace internal {

enum class WaiterType : std::uint8_t { kReader, kWriter };

enum : std::uint32_t { kQueued = 0, kGranted = 1, kReleased = 2 };

struct Waiter {
  Waiter(WaiterType t, std::int64_t now_ns, std::int64_t handoff_ns)
      : type(t),
        enqueued_ns(now_ns),
        handoff_deadline_ns(now_ns + handoff_ns),
        thread(&current_thread()) {}
  Waiter(const Waiter&) = delete;
  Waiter& operator=(const Waiter&) = delete;

  Waiter* next = nullptr;       // queue links; wait lock held
  Waiter* prev = nullptr;
  Waiter* wake_next = nullptr;  // link in a WakeList
  std::atomic<std::uint32_t> state{kQueued};
  const WaiterType type;
  bool handoff_set = false;     // this waiter owns the HANDOFF bit; wait lock
  bool rt = false;              // SCHED_FIFO/RR writer: hands off at once
  const std::int64_t enqueued_ns;          // handoff clock, for diagnostics
  const std::int64_t handoff_deadline_ns;  // handoff clock
  ThreadRecord* const thread;

  bool is_reader() const { return type == WaiterType::kReader; }

  // Sleeps while the state is kQueued, up to the deadline (monotonic ns).
  // Returns false on timeout with the state still kQueued.
  bool sleep_while_queued(std::int64_t deadline_ns) {
    ParkedScope parked;  // spinners stop spinning on a parked owner
    // acquire pairs with the waker's release store of kReleased.
    while (state.load(std::memory_order_acquire) == kQueued) {
      if (arch::futex_wait(&state, kQueued, deadline_ns) == ETIMEDOUT &&
          state.load(std::memory_order_acquire) == kQueued)
        return false;
    }
    return true;
  }

  // Waits until no waker touches this waiter any more (see the hand-over
  // protocol above). Returns at once unless the state is kGranted.
  void wait_until_released() {
    int spins = 0;
    // acquire pairs with the release store in WakeList::run(): a granted
    // reader thereby sees everything the waker saw when it granted the lock.
    while (state.load(fault::order(fault::kHandoverRelaxed, std::memory_order_acquire)) ==
           kGranted) {
      if (++spins < 64)
        arch::cpu_relax();
      else
        sched_yield();  // the waker may have been preempted
    }
  }
};

// The wait queue. Wait lock held for every call.
class WaitQueue {
 public:
  bool empty() const { return first_ == nullptr; }
  Waiter* first() const { return first_; }
  bool is_singular() const { return first_ != nullptr && first_->next == first_; }
  // The waiter after w, or nullptr at the end of the queue.
  Waiter* after(const Waiter* w) const {
    return w->next == first_ ? nullptr : w->next;
  }

  void push_back(Waiter* w) {
    if (first_ == nullptr) {
      w->next = w->prev = w;
      first_ = w;
      return;
    }
    Waiter* last = first_->prev;
    w->prev = last;
    w->next = first_;
    last->next = w;
    first_->prev = w;
  }

  void remove(Waiter* w) {
    if (w->next == w) {
      first_ = nullptr;
    } else {
      w->prev->next = w->next;
      w->next->prev = w->prev;
      if (first_ == w) first_ = w->next;
    }
    w->next = w->prev = nullptr;
  }

 private:
  Waiter* first_ = nullptr;
};

// Waiters chosen for wake-up with the wait lock held, woken after it is
// dropped.
class WakeList {
 public:
  WakeList() = default;
  WakeList(const WakeList&) = delete;
  WakeList& operator=(const WakeList&) = delete;
  ~WakeList() { run(); }

  // Wait lock held. Returns false if w is already woken and not yet back.
  bool add(Waiter* w) {
    if (w->state.load(std::memory_order_relaxed) != kQueued) return false;
    // relaxed: the waiter reads it again with acquire after kReleased.
    w->state.store(kGranted, std::memory_order_relaxed);
    w->wake_next = head_;
    head_ = w;
    return true;
  }

  // Wait lock dropped.
  void run() {
    while (head_ != nullptr) {
      Waiter* w = head_;
      head_ = w->wake_next;  // read before kReleased: w may vanish after it
      arch::futex_wake(&w->state, 1);
      // release pairs with the acquire in Waiter::wait_until_released().
      w->state.store(kReleased,
                     fault::order(fault::kHandoverRelaxed, std::memory_order_release));
    }
  }

 private:
  Waiter* head_ = nullptr;
};

}  // namespace internal
}  // namespace rwsem

#endif  // RWSEM_LIB_INTERNAL_WAITER_H_
