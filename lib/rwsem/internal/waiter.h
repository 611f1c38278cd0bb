// Waiters, the wait queue, and the wake-up hand-over.
//
// A waiter lives on the stack of the thread that waits. The queue is a
// circular doubly-linked list reached through one pointer (the first
// waiter), edited only with the lock's wait lock held.
//
// Hand-over protocol
// ------------------
// A waker decides whom to wake with the wait lock held, but makes the futex
// calls after dropping it, as the kernel's wake_q does. The kernel keeps
// the woken task alive with a reference; here the waker keeps only the
// wakee's thread record, which is type-stable (thread_record.h), and never
// touches the waiter again once it has told it:
//
//   kWaiting -> kWoken   waker, wait lock held, store-release, the LAST
//                        access of the waker to the waiter: "you are
//                        woken" (for a reader: "you hold the read lock";
//                        its bias is already in the count; unless the
//                        waker set `retry`: then "retry", as for a
//                        writer). The waker has copied the waiter's record
//                        pointer before.
//   kWoken -> kWaiting   a writer, or a reader woken to retry, re-arming
//                        itself, wait lock held.
//
// After the wait lock is dropped the waker unparks the record. A wakee that
// sees kWoken returns at once: it never waits for its waker, which matters
// when the wakee is a real-time thread that would otherwise spin in front
// of a preempted, lower-priority waker. The waker's late unpark() then hits
// a record whose thread has moved on: a stale wake-up, which every park()
// loop tolerates (thread_record.h).
//
// All three are templates on the platform policy P (platform.h), like the
// lock that uses them.
#ifndef RWSEM_LIB_INTERNAL_WAITER_H_
#define RWSEM_LIB_INTERNAL_WAITER_H_

#include <atomic>
#include <cstdint>

#include "lib/rwsem/config.h"
#include "lib/rwsem/internal/spin_wait.h"
#include "lib/rwsem/internal/thread_record.h"
#include "lib/rwsem/lock_events.h"

namespace rwsem {
namespace testing {
struct Peer;  // test-only access (lib/rwsem/testing.h)
}  // namespace testing

namespace internal {

enum class WaiterType : std::uint8_t { kReader, kWriter };

enum : std::uint32_t { kWaiting = 0, kWoken = 1 };

// The orders of the grant, named once. The waiter's load of its state:
// acquire, pairing with the waker's release store of kWoken. The waker's
// store of kWoken: release, pairing with the waiter's acquire load.
inline constexpr std::memory_order kGrantOrder = std::memory_order_acquire;
inline constexpr std::memory_order kWokenStoreOrder = std::memory_order_release;

template <class P>
struct Waiter {
  using Record = typename P::Record;

  Waiter(WaiterType t, std::int64_t now_ns, std::int64_t handoff_ns)
      : type(t),
        enqueued_ns(now_ns),
        handoff_deadline_ns(now_ns + handoff_ns),
        thread(&P::current_thread()) {}
  Waiter(const Waiter&) = delete;
  Waiter& operator=(const Waiter&) = delete;

  template <class T>
  using Plain = typename P::template Plain<T>;

  Plain<Waiter*> next = nullptr;       // queue links; wait lock held
  Plain<Waiter*> prev = nullptr;
  Plain<Waiter*> wake_next = nullptr;  // mark_wake()'s list of granted readers
  typename P::template Atomic<std::uint32_t> state{kWaiting};
  const WaiterType type;
  Plain<bool> handoff_set = false;  // this waiter owns the HANDOFF bit; wait lock
  // SCHED_FIFO/RR waiter: a writer claims HANDOFF at once; a reader is
  // granted, never woken to retry.
  Plain<bool> rt = false;
  // Reader: granted by a wake-up that left waiters queued, so it opens a
  // read phase (rwsem.h). Written by the waker before its release store of
  // kWoken; read by this reader after its acquire load of it.
  Plain<bool> granted_in_phase = false;
  // Reader: woken to retry, not granted (mark_wake(), kWriterUnlock): it
  // stays queued and takes the lock itself, like a writer. Written by the
  // waker before its release store of kWoken, under the wait lock; cleared
  // by this reader under the wait lock when it retries.
  Plain<bool> retry = false;
  const std::int64_t enqueued_ns;          // handoff clock, for diagnostics
  const std::int64_t handoff_deadline_ns;  // handoff clock
  Record* const thread;

  bool is_reader() const { return type == WaiterType::kReader; }

  // Sleeps while the state is kWaiting, up to the deadline (ns on
  // P::now_ns()'s clock). The caller armed its record (arm()) before the
  // waiter became visible to wakers, i.e. before it dropped the wait lock.
  // Returns false on the deadline with the state still kWaiting (the caller
  // re-checks that under the wait lock, where a grant is decided).
  //
  // With `poll` set it first looks at its state kWaiterPolls times, with
  // exponential back-off between looks, before it parks (and before it
  // counts as parked for spinners: it runs): a wake-up within those
  // microseconds costs no trip through the scheduler. The poll reads no
  // clock, so it may overrun the deadline by its length (config.h); a
  // deadline is never cut short. The record stays armed while it polls, so
  // the waker's unpark() still makes its futex_wake: the protocol is the
  // one above, with more looks at the state.
  bool sleep_while_waiting(std::int64_t deadline_ns, bool poll = false) {
    if (poll) {
      Backoff<P> backoff;
      for (int i = 0; i < kWaiterPolls; ++i) {
        RWSEM_EVENT_INC(wlock_poll);
        // acquire, as in the loop below: a granted reader needs it. (Only
        // writers poll today, and a writer re-reads its state under the
        // wait lock, but the order belongs to the state, not the caller.)
        if (state.load(kGrantOrder) != kWaiting) return true;
        backoff.pause();
      }
    }
    ParkedScope<P> parked;  // spinners stop spinning on a parked owner
    for (;;) {
      // acquire pairs with the waker's release store of kWoken in
      // WakeList::wake(): a granted reader sees what the waker saw.
      if (state.load(kGrantOrder) != kWaiting) return true;
      if (!park(*thread, deadline_ns)) return state.load(kGrantOrder) != kWaiting;
      // Woken, by a signal, or by a stale unpark: look again.
      arm(*thread);
    }
  }
};

// The wait queue. Wait lock held for every call.
template <class P>
class WaitQueue {
  using Waiter = internal::Waiter<P>;

 public:
  bool empty() const { return first_ == nullptr; }
  Waiter* first() const { return first_; }
  bool is_singular() const { return first_ != nullptr && first_->next == first_; }
  // The waiter after w, or nullptr at the end of the queue.
  Waiter* after(const Waiter* w) const { return w->next == first_ ? nullptr : w->next; }

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
  friend struct testing::Peer;
  typename P::template Plain<Waiter*> first_ = nullptr;
};

// Waiters chosen for wake-up with the wait lock held, unparked after it is
// dropped. Holds the wakees' records, never the waiters themselves.
template <class P>
class WakeList {
  using Waiter = internal::Waiter<P>;
  using Record = typename P::Record;

 public:
  WakeList() = default;
  WakeList(const WakeList&) = delete;
  WakeList& operator=(const WakeList&) = delete;
  ~WakeList() { run(); }

  // Wait lock held. Tells w it is woken (see the protocol at the top); after
  // this call w may be gone. Returns false if w was already woken and has
  // not re-armed yet.
  bool wake(Waiter* w) {
    if (w->state.load(std::memory_order_relaxed) != kWaiting) return false;
    Record* const r = w->thread;  // read before the store below
    // release pairs with the acquire loads in Waiter::sleep_while_waiting().
    w->state.store(kWoken, kWokenStoreOrder);
    if (n_ == kCapacity) {
      unpark(r);  // defensive: mark_wake() grants at most kMaxReadersWakeup
    } else {
      records_[n_++] = r;
    }
    return true;
  }

  // Wait lock dropped. Touches only thread records.
  void run() {
    for (int i = 0; i < n_; ++i) unpark(records_[i]);
    n_ = 0;
  }

 private:
  // One wake-up wakes one writer or at most kMaxReadersWakeup readers.
  static constexpr int kCapacity = kMaxReadersWakeup + 1;
  Record* records_[kCapacity];
  int n_ = 0;
};

}  // namespace internal
}  // namespace rwsem

#endif  // RWSEM_LIB_INTERNAL_WAITER_H_
