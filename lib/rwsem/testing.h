// Test-only access to the locks (Bazel target //lib:testing, testonly):
// a fake handoff clock, and the peers that read and poke the words of a
// lock. Nothing here is part of the locks' API, and no lock header includes
// it; each lock befriends its peer by a forward declaration.
#ifndef RWSEM_LIB_TESTING_H_
#define RWSEM_LIB_TESTING_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "lib/rwsem/internal/count_bits.h"
#include "lib/rwsem/internal/thread_annotations.h"
#include "lib/rwsem/mutex.h"
#include "lib/rwsem/qrwlock.h"
#include "lib/rwsem/rwsem.h"

namespace rwsem {
namespace testing {

// While one of these exists, handoff decisions use its time instead of the
// monotonic clock, so a test decides when a waiter has waited "long enough".
// Destroy it only after every thread that locks has stopped.
class FakeHandoffClock {
 public:
  explicit FakeHandoffClock(std::int64_t start_ns = 1'000'000'000);
  ~FakeHandoffClock();
  FakeHandoffClock(const FakeHandoffClock&) = delete;
  FakeHandoffClock& operator=(const FakeHandoffClock&) = delete;

  // relaxed: the clock orders nothing; waiters read it under the wait lock.
  std::int64_t now_ns() const { return now_.load(std::memory_order_relaxed); }
  void advance(std::chrono::nanoseconds d) { now_.fetch_add(d.count(), std::memory_order_relaxed); }

 private:
  std::atomic<std::int64_t> now_;
};

// The value of a lock's plain shared field (P::Plain<T>) as a check sees it
// from outside every thread: the field itself natively; under a model
// checker its unchecked read, which is no thread's access.
template <class F>
auto peek(const F& f) {
  if constexpr (std::is_scalar_v<F>) {
    return f;
  } else {
    return f.peek();
  }
}

// The same for an atomic field: natively its relaxed load; under a model
// checker (whose atomics are not std::atomic) the newest value in its
// modification order, again no thread's access.
template <class T>
T peek(const std::atomic<T>& a) {
  return a.load(std::memory_order_relaxed);
}

// Raw access to a BasicRwSemaphore's count and wait queue.
struct Peer {
  template <class L, class P>
  static typename P::template Atomic<typename L::Word>& count(BasicRwSemaphore<L, P>& s) {
    return s.count_;
  }
  // Calls f(name, address, size) for each word of the lock that threads
  // share (the model checker names them in its traces).
  template <class L, class P, class F>
  static void for_each_word(BasicRwSemaphore<L, P>& s, F f) {
    f("count", &s.count_, sizeof s.count_);
    f("owner", &s.owner_, sizeof s.owner_);
    f("osq", &s.osq_, sizeof s.osq_);
    f("wait_lock", &s.wait_lock_, sizeof s.wait_lock_);
    f("queue", &s.queue_, sizeof s.queue_);
  }
  // Pretends `n` more (or, negative, fewer) readers hold the lock, as if
  // that many had taken or released it, so tests reach READFAIL without
  // 2^23 threads. Releasing does the wake-up up_read would do.
  template <class L, class P>
  static void add_phantom_readers(BasicRwSemaphore<L, P>& s, std::int64_t n) {
    using Bits = internal::CountBits<L>;
    using W = typename L::Word;
    if (n >= 0) {
      s.count_.fetch_add(static_cast<W>(static_cast<W>(n) * Bits::kReaderBias),
                         std::memory_order_acq_rel);
      return;
    }
    const W old = s.count_.fetch_sub(static_cast<W>(static_cast<W>(-n) * Bits::kReaderBias),
                                     std::memory_order_acq_rel);
    if (Bits::needs_wake_after_reader_exit(
            static_cast<W>(old - static_cast<W>(-n) * Bits::kReaderBias)))
      s.wake();
  }
  // rwsem_wake() as an unlock that saw WAITERS would call it.
  template <class L, class P>
  static void wake(BasicRwSemaphore<L, P>& s) {
    s.wake();
  }
  // The handoff timeout and spin budget the lock runs with, in ns: its
  // Options as stored, or the process-wide defaults.
  template <class L, class P>
  static std::int64_t handoff_timeout_ns(const BasicRwSemaphore<L, P>& s) {
    return s.handoff_timeout_ns();
  }
  template <class L, class P>
  static std::int64_t spin_budget_ns(const BasicRwSemaphore<L, P>& s) {
    return s.spin_budget_ns();
  }
  // Someone is in the optimistic spin queue.
  template <class L, class P>
  static bool spinning(BasicRwSemaphore<L, P>& s) {
    return s.osq_.is_locked();
  }
  template <class L, class P>
  static bool nonspinnable(BasicRwSemaphore<L, P>& s) {
    return s.is_nonspinnable();
  }
  // Runs f() with the lock's wait lock held by the calling thread.
  template <class L, class P, class F>
  static void with_wait_lock(BasicRwSemaphore<L, P>& s, F f) {
    s.wait_lock_.lock();
    f();
    s.wait_lock_.unlock();
  }
  // A helper that requires the wait lock, called whether or not the caller
  // holds it: how a test shows that debug builds check the requirement at
  // run time (the static analysis is switched off for this one call).
  template <class L, class P>
  static bool try_read_lock_unqueued(BasicRwSemaphore<L, P>& s) RWSEM_NO_THREAD_SAFETY_ANALYSIS {
    return s.try_read_lock_unqueued();
  }
  // The thread record of the first waiter (nullptr if nobody waits), and
  // whether that waiter owns HANDOFF (handoff_set). They read the queue
  // without the wait lock: only for a model checker's checks, which run
  // between its threads' steps, either at a store to the count by a thread
  // that holds the wait lock (so nobody else edits the queue) or does not
  // look at the queue at all, or right after the wait lock's release. (So
  // the static analysis is off for them: they read the guarded queue on
  // purpose.)
  template <class L, class P>
  static const typename P::Record* first_waiter_thread(BasicRwSemaphore<L, P>& s) {
    const auto* first = first_waiter(s);
    return first != nullptr ? first->thread : nullptr;
  }
  template <class L, class P>
  static bool first_waiter_owns_handoff(BasicRwSemaphore<L, P>& s) {
    const auto* first = first_waiter(s);
    return first != nullptr && peek(first->handoff_set);
  }
  // Has the first waiter been woken to retry (its state kWoken while it is
  // still queued: granted readers leave the queue before they are woken)?
  template <class L, class P>
  static bool first_waiter_woken(BasicRwSemaphore<L, P>& s) {
    const auto* first = first_waiter(s);
    return first != nullptr && peek(first->state) == internal::kWoken;
  }
  template <class L, class P>
  static std::size_t queue_length(BasicRwSemaphore<L, P>& s) {
    std::vector<typename BasicRwSemaphore<L, P>::WaiterInfo> v;
    s.waiters(&v);
    return v.size();
  }

 private:
  template <class L, class P>
  static const auto* first_waiter(BasicRwSemaphore<L, P>& s) RWSEM_NO_THREAD_SAFETY_ANALYSIS {
    return peek(s.queue_.first_);
  }
};

// Test access to what the mutex's protocol does between threads.
struct MutexPeer {
  // Calls f(name, address, size) for each word of the lock that threads
  // share (the model checker names them in its traces).
  template <class P, class F>
  static void for_each_word(BasicMutex<P>& m, F f) {
    f("owner", &m.owner_, sizeof m.owner_);
    f("wait_lock", &m.wait_lock_, sizeof m.wait_lock_);
    f("osq", &m.osq_, sizeof m.osq_);
    f("first", &m.first_, sizeof m.first_);
    f("head", &m.head_, sizeof m.head_);
    f("tail", &m.tail_, sizeof m.tail_);
  }
  // The spin budget the mutex runs with, in ns (Options or the default).
  template <class P>
  static std::int64_t spin_budget_ns(const BasicMutex<P>& m) {
    return m.spin_budget_ns();
  }
  // What a woken first waiter that failed to get the lock does: ask the
  // owner for a handoff. Only meaningful while the lock is owned.
  template <class P>
  static void request_handoff(BasicMutex<P>& m) {
    m.owner_.fetch_or(MutexOwnerLayout::kHandoff, std::memory_order_relaxed);
  }
  // The wait list's head, read without the wait lock and, under the model
  // checker, without a checked access (for invariant checks made between
  // steps).
  template <class P>
  static const void* head(BasicMutex<P>& m) RWSEM_NO_THREAD_SAFETY_ANALYSIS {
    return peek(m.head_);
  }
  // The first waiter is asleep in its futex wait (not just queued).
  template <class P>
  static bool first_waiter_parked(BasicMutex<P>& m) {
    m.wait_lock_.lock();
    const bool parked =
        m.head_ != nullptr && m.head_->thread->parked.load(std::memory_order_relaxed);
    m.wait_lock_.unlock();
    return parked;
  }
};

struct QRwLockPeer {
  // Calls f(name, address, size) for each word of the lock that threads
  // share (the model checker names them in its traces).
  template <class P, class F>
  static void for_each_word(BasicQRwLock<P>& l, F f) {
    f("cnts", &l.cnts_, sizeof l.cnts_);
    f("queue", &l.queue_, sizeof l.queue_);
  }
};

}  // namespace testing
}  // namespace rwsem

#endif  // RWSEM_LIB_TESTING_H_
