// An MCS-style optimistic spin queue (the kernel's OSQ): at most one thread
// at a time spins on a lock word; the others spin, each on its own node,
// behind it. Reusable by any lock that spins (the rwsem, the mutex).
//
// A queued spinner may give up (its spin budget ran out): it unlinks itself
// in three steps, as the kernel's osq_lock() does:
//   A. detach from the predecessor (cmpxchg prev->next: self -> null), unless
//      the predecessor hands us the lock first;
//   B. find our successor, or, if we are the tail, move the tail back to the
//      predecessor;
//   C. link predecessor and successor.
// Orders in the give-up steps. A node reaches another thread only through
// a release of a pointer to it and an acquire that reads the pointer, so
// the receiver sees the node as the sender saw it. Here that matters
// beyond the pointer. A spinner S joining behind a spinner L that is
// leaving resets its node and links it to L (release, in lock()); L finds
// S (acquire, wait_next()) and links it to L's predecessor Q (step C,
// release); Q hands S the lock (kHandoverOrder). Only that chain orders S's
// reset of `locked` before Q's store of true: with a link relaxed, C++
// lets Q's store come first in the modification order of `locked`, and S
// spins on its reset value until its deadline and then cannot detach (the
// kernel uses plain accesses there because its xchg and cmpxchg are fully
// ordered and cumulative; C++'s are not). Likewise a joiner that links to
// the predecessor to which step B moved the tail back must be ordered
// after our link to that node and our detach from it: otherwise the
// modification order of its `next` may put the joiner's link first, and
// ours and our detach then erase it.
// The model checker does not produce such executions (it never puts a
// store ahead of one already in a modification order), so weakening these
// orders survives ci/mutations; the argument above is why they stay.
//
// A spinner passes its own node to lock() and unlock(): the node in its
// per-thread record (thread_record.h). Native records are type-stable, so a
// node another spinner still points at is never freed memory.
//
// Templated on the platform policy P (internal/platform.h): atomics, clock
// and spin hint come from it.
//
// Spinners per queue are limited to the CPUs that can run them (one fewer
// than this process may use: the owner needs one). The kernel does not need
// this: its spinners stop when they or the owner must be rescheduled. In
// user space a spinner cannot see that its predecessor was preempted, so
// with more spinners than CPUs the queue's waits chain through preempted
// threads; measured on 2 cores, 32 threads: 74% of CPU time in this queue
// and the lock's throughput 200x below its no-spinning rate. A joining
// thread learns its place from its predecessor's node and leaves at once
// (the give-up steps below) when it is past the limit.
#ifndef RWSEM_LIB_INTERNAL_OSQ_H_
#define RWSEM_LIB_INTERNAL_OSQ_H_

#include <atomic>
#include <cstdint>

namespace rwsem {
namespace internal {

template <class P>
struct BasicOsqNode {
  typename P::template Atomic<BasicOsqNode*> next{nullptr};
  typename P::template Atomic<BasicOsqNode*> prev{nullptr};
  typename P::template Atomic<bool> locked{false};  // set by the predecessor: "your turn"
  // Place in the queue when this node joined: 0 for the head. relaxed: a
  // hint; a stale value only changes one spin decision.
  typename P::template Atomic<unsigned> place{0};
};

template <class P>
class SpinQueue {
  using OsqNode = BasicOsqNode<P>;

 public:
  // Joins the queue with the calling thread's `node` and spins until this
  // thread is the one spinner, or until the deadline (ns on P::now_ns()'s
  // clock) passes. Returns false if it gave up; the queue is then as if we
  // had never joined.
  //
  // At most `max_spinners` threads are in the queue; past that, lock()
  // returns false at once (0: never spin).
  bool lock(OsqNode& node, std::int64_t deadline_ns, unsigned max_spinners) {
    if (max_spinners == 0) return false;
    // The common small-machine case without touching the queue.
    if (max_spinners == 1 && is_locked()) return false;
    node.locked.store(false, std::memory_order_relaxed);
    node.next.store(nullptr, std::memory_order_relaxed);
    // acq_rel: acquire pairs with the releasing unlock() of the previous
    // spinner (tail -> null); release publishes our node's reset fields to
    // the next spinner that reads the tail.
    OsqNode* prev = tail_.exchange(&node, std::memory_order_acq_rel);
    if (prev == nullptr) {
      node.place.store(0, std::memory_order_relaxed);
      return true;
    }
    const unsigned place = prev->place.load(std::memory_order_relaxed) + 1;
    node.place.store(place, std::memory_order_relaxed);
    node.prev.store(prev, std::memory_order_relaxed);
    // release: our node is initialised before the predecessor can see it.
    prev->next.store(&node, std::memory_order_release);

    const bool too_many = place >= max_spinners;
    for (int i = 0;; ++i) {
      // acquire pairs with the predecessor's release store of `locked`.
      if (node.locked.load(std::memory_order_acquire)) return true;
      if (too_many || ((i & 15) == 15 && P::now_ns() > deadline_ns)) break;
      P::cpu_relax();
    }

    // Step A: detach from our predecessor.
    for (;;) {
      OsqNode* expect = &node;
      // acq_rel, as the kernel's fully ordered cmpxchg: acquire pairs with
      // the release that linked us to `prev` (ours above, or a splicer's
      // step C); release orders our detach before whatever the predecessor
      // does once it reads the null (its unlock() or wait_next() exchange).
      if (prev->next.load(std::memory_order_relaxed) == &node &&
          prev->next.compare_exchange_strong(expect, nullptr, std::memory_order_acq_rel,
                                             std::memory_order_relaxed))
        break;
      // The predecessor is handing us the lock (or has changed): re-check.
      if (node.locked.load(std::memory_order_acquire)) return true;
      P::cpu_relax();
      // acquire pairs with a leaving predecessor's release store of our
      // `prev` in its step C: we then use that node as it saw it.
      prev = node.prev.load(std::memory_order_acquire);
    }
    // Step B: our successor, or we were the tail.
    OsqNode* next = wait_next(node, prev);
    if (next == nullptr) return false;
    // Step C: splice. Both release: the first pairs with our successor's
    // acquire load of its `prev` in step A; the second with our
    // predecessor's acquire exchange of its `next` (unlock(), wait_next()),
    // and carries the successor's reset node on to it (the chain above).
    next->prev.store(prev, std::memory_order_release);
    prev->next.store(next, std::memory_order_release);
    return false;
  }

  // `node` is the one the caller's successful lock() joined with.
  void unlock(OsqNode& node) {
    OsqNode* expect = &node;
    // release: our spinning is over before the next spinner starts; pairs
    // with the acq_rel exchange of tail_ in lock() by the next spinner that
    // finds the queue empty.
    if (tail_.compare_exchange_strong(expect, nullptr, kUnlockOrder, std::memory_order_relaxed))
      return;
    OsqNode* next = node.next.exchange(nullptr, std::memory_order_acquire);
    if (next == nullptr) next = wait_next(node, nullptr);
    // release pairs with the acquire load of `locked` in lock().
    if (next != nullptr) next->locked.store(true, kHandoverOrder);
  }

  bool is_locked() const { return tail_.load(std::memory_order_relaxed) != nullptr; }

 private:
  // The orders of unlock()'s two releases, named once. Emptying the tail:
  // pairs with the acq_rel exchange of tail_ in lock() by the next spinner
  // that finds the queue empty. Handing over: pairs with the successor's
  // acquire load of its `locked` in lock().
  static constexpr std::memory_order kUnlockOrder = std::memory_order_release;
  static constexpr std::memory_order kHandoverOrder = std::memory_order_release;

  // Returns our successor once it has linked itself, or nullptr after
  // making `prev` the tail again because we were the tail.
  OsqNode* wait_next(OsqNode& node, OsqNode* prev) {
    for (;;) {
      OsqNode* expect = &node;
      // acq_rel: release pairs with the acq_rel exchange of tail_ in lock()
      // by the next joiner, which then links itself to `prev`: our detach
      // from `prev` (step A) comes before that link (the chain above);
      // acquire pairs with the release of whoever made us the tail.
      if (tail_.load(std::memory_order_relaxed) == &node &&
          tail_.compare_exchange_strong(expect, prev, std::memory_order_acq_rel,
                                        std::memory_order_relaxed))
        return nullptr;
      if (node.next.load(std::memory_order_relaxed) != nullptr) {
        OsqNode* next = node.next.exchange(nullptr, std::memory_order_acquire);
        if (next != nullptr) return next;
      }
      P::cpu_relax();
    }
  }

  typename P::template Atomic<OsqNode*> tail_{nullptr};
};

}  // namespace internal
}  // namespace rwsem

#endif  // RWSEM_LIB_INTERNAL_OSQ_H_
