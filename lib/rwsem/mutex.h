// rwsem::Mutex: the kernel's sleeping mutex in user space, with optimistic
// spinning, waiter spinning and handoff (the mutex waiter-spinning series
// and the handoff rework that followed it; LINEAGE.md). It is
// BasicMutex<NativePlatform>: like every lock here, the mutex takes its
// atomics, fences, futex, clock, scheduler hints and thread records from a
// platform policy (lib/rwsem/internal/platform.h).
//
// The lock word is the owner word (MutexOwnerLayout, below):
// the owning thread's record address, or 0, plus three flags (WAITERS,
// HANDOFF, PICKUP). Uncontended, lock and unlock are one cmpxchg each.
//
// Who gets the lock
// -----------------
// 1. The fast path: cmpxchg 0 -> self.
// 2. Optimistic spinners. A thread that fails the fast path first spins
//    while the owner is running (not parked in one of our futex waits) and
//    the spin budget lasts. Spinners queue in an MCS spin queue (osq.h) so
//    that only one of them polls the owner word at a time.
// 3. Waiters. A thread that could not spin queues on the wait list and
//    sleeps on its thread record's sleep word. unlock() with WAITERS set
//    wakes the first waiter.
//
// A woken first waiter competes with spinners that keep arriving, and could
// lose every time (the live-lock the waiter-spinning series fixes). So:
//  - it spins on the owner word itself, beside the head of the spin queue,
//    but never *in* the spin queue. Behind other spinners in the queue it
//    would reach the owner word only after all of them, which is the
//    starvation again. Only the first waiter does this, so it adds at most
//    one extra poller of the lock's cache line, not a stampede;
//  - if it still fails, it sets HANDOFF. The next unlock() then does not
//    release the lock: it writes the first waiter's record into the owner
//    word with PICKUP set, and the waiter takes it from there. While HANDOFF
//    or PICKUP is set the owner bits are non-zero, so neither the fast path
//    nor a spinner can take the lock.
//
// Not missing a wake-up ("locking/mutex: Avoid missed wakeup of mutex
// waiter", the waiter-spinning series)
// ----------------------------------------------------------------------
// A waiter arms its record's sleep word (internal::arm()) *before* it looks
// at the owner word, and the waker changes the owner word *before* it reads
// the sleep word (internal::unpark()); thread_record.h draws the diagram
// and says why the two seq_cst fences make one side see the other.
//
// Lifetime: an unlock with waiters takes the wait lock before it releases
// the lock, so that once the owner word says "free" the unlocker touches
// nothing of the mutex but the wait lock's own release; the wake-up after
// it touches only the waiter's thread record (rwsem.h, "Lifetime").
//
// Relaxed loads of the owner word are pre-checks and spin hints: the
// cmpxchg that follows decides, and carries the acquire or release. Reads
// made under the wait lock (give_up(), hand_over()) are ordered against
// every handoff by that lock, since hand_over() runs under it too.
#ifndef RWSEM_LIB_MUTEX_H_
#define RWSEM_LIB_MUTEX_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "arch/futex.h"
#include "lib/rwsem/config.h"
#include "lib/rwsem/internal/deadline.h"
#include "lib/rwsem/internal/osq.h"
#include "lib/rwsem/internal/platform.h"
#include "lib/rwsem/internal/runtime.h"
#include "lib/rwsem/internal/thread_annotations.h"
#include "lib/rwsem/internal/thread_record.h"
#include "lib/rwsem/internal/wait_lock.h"

namespace rwsem {

// ---------------------------------------------------------------------------
// The mutex owner word, pointer-sized (every bit of it is documented here
// and nowhere else).
//
//   bit  0      waiters: the wait list is not empty; unlock must wake
//   bit  1      handoff: the first waiter asks the owner to hand it the lock
//               on unlock instead of releasing it
//   bit  2      pickup: the lock was handed to the thread in the owner bits,
//               which has not taken it yet
//   bits 6-     owner: the owning thread's 64-byte aligned record address
//               (bits 3-5 are always 0); 0 = unlocked
//
// Invariant: handoff and pickup are only ever set while the owner bits are
// non-zero, so a word whose owner bits are 0 is a free lock anyone may take.
// ---------------------------------------------------------------------------
struct MutexOwnerLayout {
  using Word = std::uintptr_t;
  static constexpr const char* kName = "mutex";
  static constexpr Word kWaiters = 1;
  static constexpr Word kHandoff = 2;
  static constexpr Word kPickup = 4;
  static constexpr Word kFlagMask = 7;
  static constexpr Word kReservedMask = 0x38;

  static constexpr Word owner_bits(Word w) { return w & ~(kFlagMask | kReservedMask); }
  static constexpr Word flags(Word w) { return w & kFlagMask; }
  static constexpr bool has_waiters(Word w) { return (w & kWaiters) != 0; }
  static constexpr bool has_handoff(Word w) { return (w & kHandoff) != 0; }
  static constexpr bool has_pickup(Word w) { return (w & kPickup) != 0; }
};

namespace testing {
struct MutexPeer;
}  // namespace testing

template <class P>
class BasicMutex {
  using L = MutexOwnerLayout;
  using Record = typename P::Record;

 public:
  using Word = L::Word;
  static constexpr const char* kName = L::kName;

  constexpr BasicMutex() noexcept = default;
  // Only Options::spin_budget applies (handoff needs no timeout here: the
  // first waiter asks for it as soon as a wake-up did not get it the lock).
  explicit BasicMutex(const Options& opts) noexcept {
    if (opts.spin_budget.count() >= 0)
      spin_budget_ns_ = opts.spin_budget.count() > INT32_MAX
                            ? INT32_MAX
                            : static_cast<std::int32_t>(opts.spin_budget.count());
  }
  BasicMutex(const BasicMutex&) = delete;
  BasicMutex& operator=(const BasicMutex&) = delete;
  // Waits until a thread that released the mutex is out of unlock()'s wait
  // lock (see "Lifetime" at the top and rwsem.h).
  ~BasicMutex() {
    wait_lock_.wait_until_unlocked();
    if (kDebugEnabled && owner_.load(std::memory_order_relaxed) != 0)
      debug_fail("mutex destroyed while locked or waited on");
  }

  void lock() {
    if (!try_lock_fast()) lock_slow(arch::kNoDeadline);
  }

  [[nodiscard]] bool try_lock() { return try_acquire(self_word(), false); }

  template <class Rep, class Period>
  [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return try_lock_fast() || lock_slow(internal::deadline_after<P>(d));
  }
  template <class Clock, class Duration>
  [[nodiscard]] bool try_lock_until(const std::chrono::time_point<Clock, Duration>& t) {
    return try_lock_fast() ||
           internal::until<P>(t, [this](std::int64_t d) { return lock_slow(d); });
  }

  void unlock() {
    const Word self = self_word();
    if (kDebugEnabled) check_owner(self);
    Word expected = self;
    // release pairs with the acquire of whoever takes the lock next (fast
    // path, try_acquire, or the pickup of a handed-over lock).
    if (owner_.compare_exchange_strong(expected, 0, kReleaseOrder, std::memory_order_relaxed))
      return;
    unlock_slow(expected);
  }

  // ---- inspection ------------------------------------------------------
  Word count() const { return owner_.load(std::memory_order_relaxed); }
  std::string describe() const { return describe_word(count()); }

  static std::string describe_word(Word w) {
    std::string s;
    internal::append_format(&s, "%s 0x%llx owner=", kName, static_cast<unsigned long long>(w));
    if (L::owner_bits(w) == 0) s += "none";
    else
      internal::append_format(
          &s, "tid %u",
          static_cast<unsigned>(reinterpret_cast<const Record*>(L::owner_bits(w))->tid));
    if (L::has_waiters(w)) s += " waiters";
    if (L::has_handoff(w)) s += " handoff";
    if (L::has_pickup(w)) s += " pickup";
    if (w & L::kReservedMask) s += " reserved-bits-set";
    return s;
  }

  // Waiters on the list, for tests and diagnostics; kQueueUnreadable if the
  // wait lock stayed held for a second (a diagnostic must not hang).
  static constexpr std::size_t kQueueUnreadable = SIZE_MAX;
  std::size_t queue_length() {
    const std::int64_t give_up = P::now_ns() + 1000000000;
    while (!wait_lock_.try_lock())
      if (P::now_ns() > give_up) return kQueueUnreadable;
    std::size_t n = 0;
    for (Waiter* w = head_; w != nullptr; w = w->next) ++n;
    wait_lock_.unlock();
    return n;
  }

 private:
  friend struct testing::MutexPeer;

  struct Waiter {
    Record* thread;
    typename P::template Plain<Waiter*> next = nullptr;  // wait lock held
    typename P::template Plain<Waiter*> prev = nullptr;
  };

  // The releasing cmpxchg of unlock(), unlock_slow() and hand_over():
  // pairs with the acquire of the next owner's cmpxchg (kAcquireOrder).
  static constexpr std::memory_order kReleaseOrder = std::memory_order_release;
  // Taking the lock writes our record's address into the owner word, which
  // spinners dereference: acquire for the lock (pairs with kReleaseOrder),
  // release to publish the initialised record (thread_record.h,
  // "Publication"; pairs with kOwnerLoadOrder).
  static constexpr std::memory_order kAcquireOrder = std::memory_order_acq_rel;
  // Loads of the owner word whose owner record is dereferenced: pairs with
  // the release half of kAcquireOrder.
  static constexpr std::memory_order kOwnerLoadOrder = std::memory_order_acquire;

  static Word self_word() { return reinterpret_cast<Word>(&P::current_thread()); }

  // ---- debug (--define=rwsem_debug=1) ----------------------------------------
  [[noreturn]] void debug_fail(const char* what) const {
    internal::debug_fail(what, this, describe());
  }
  // The caller of unlock() must own the lock. The owner bits name the owner
  // from the moment it takes the lock (fast path, spin or pickup) until its
  // unlock releases or hands over the lock; a handed-over lock names the
  // waiter it was handed to. relaxed: only the owner itself writes owner
  // bits equal to `self`, so an owner reads its own value.
  void check_owner(Word self) const {
    const Word w = owner_.load(std::memory_order_relaxed);
    if (L::owner_bits(w) == 0) debug_fail("unlock of a mutex that is not locked (double unlock?)");
    if (L::owner_bits(w) != self) debug_fail("unlock by a thread that is not the mutex's owner");
  }

  bool try_lock_fast() {
    Word expected = 0;
    // acquire pairs with the releasing cmpxchg of the previous unlock();
    // release: kAcquireOrder.
    return owner_.compare_exchange_strong(expected, self_word(), kAcquireOrder,
                                          std::memory_order_relaxed);
  }

  // The kernel's __mutex_trylock_common(). Takes a free lock, or a lock
  // handed to `self`. With `handoff` (the caller is the first waiter), it
  // sets HANDOFF on a lock someone else owns. Keeps WAITERS as it is.
  bool try_acquire(Word self, bool handoff) {
    Word w = owner_.load(std::memory_order_relaxed);
    for (;;) {
      Word flags = L::flags(w);
      const Word owner = L::owner_bits(w);
      Word next;
      if (owner == 0) {
        next = self | flags;
      } else if (L::has_pickup(w) && owner == self) {
        next = self | (flags & ~L::kPickup);
      } else if (handoff && !L::has_handoff(w)) {
        // Ask the owner to hand the lock over; it stays owned.
        next = w | L::kHandoff;
      } else {
        return false;
      }
      // acquire pairs with the releasing cmpxchg in unlock()/unlock_slow()
      // or the release of the handoff (hand_over()); release: kAcquireOrder.
      if (owner_.compare_exchange_weak(w, next, kAcquireOrder, std::memory_order_relaxed))
        return L::owner_bits(next) == self;
    }
  }

  // ---- optimistic spinning ---------------------------------------------
  std::int64_t spin_budget_ns() const {
    if (!kSpinCompiledIn) return 0;
    return spin_budget_ns_ >= 0 ? spin_budget_ns_ : internal::default_spin_budget_ns();
  }

  static bool parked(Word owner) {
    // Type-stable records (thread_record.h): safe even if the owner left.
    return reinterpret_cast<const Record*>(owner)->parked.load(std::memory_order_relaxed);
  }

  // mutex_optimistic_spin(). A spinner (`waiter` false) first takes its
  // turn in the spin queue; the first waiter (`waiter` true) does not (see
  // the top of the file). Both stop when the owner parks or the budget is
  // spent. relaxed loads: the acquire is in try_acquire().
  // Spins until `deadline` (the caller's, on P::now_ns()'s clock) at the
  // latest.
  bool optimistic_spin(bool waiter, std::int64_t deadline) {
    const std::int64_t budget = spin_budget_ns();
    if (budget <= 0) return false;
    const Word self = self_word();
    std::int64_t budget_end = P::now_ns() + budget;
    if (budget_end > deadline) budget_end = deadline;
    if (!waiter) {
      const Word owner = L::owner_bits(owner_.load(kOwnerLoadOrder));
      if (owner != 0 && parked(owner)) return false;  // mutex_can_spin_on_owner()
      if (!osq_.lock(P::current_thread().osq, budget_end, P::max_spinners())) return false;
    }
    bool taken = false;
    for (unsigned i = 1;; ++i) {
      const Word owner = L::owner_bits(owner_.load(kOwnerLoadOrder));
      if (owner != 0 && owner != self && parked(owner)) break;
      if ((owner == 0 || owner == self || waiter) && try_acquire(self, waiter)) {
        taken = true;
        break;
      }
      if ((i & 15) == 0 && P::now_ns() > budget_end) break;
      P::cpu_relax();
    }
    if (!waiter) osq_.unlock(P::current_thread().osq);
    return taken;
  }

  // ---- sleeping ----------------------------------------------------------
  // internal::arm(), park() and unpark() (thread_record.h): the diagram at
  // the top. Sleeps until woken or the deadline passes; false on the
  // deadline. A return says only "look again" (a signal, a stale wake-up).
  static bool sleep(Record& me, std::int64_t deadline) {
    internal::ParkedScope<P> parked;  // spinners stop spinning on us
    return internal::park(me, deadline);
  }

  // ---- the slow paths ----------------------------------------------------

  // __mutex_lock_common(). Returns false only when the deadline passed.
  bool lock_slow(std::int64_t deadline) {
    // A try with no time left (try_lock_for(0), a past time point): one
    // look at the lock, no spinning, no queueing.
    if (deadline <= P::now_ns()) return try_acquire(self_word(), false);
    if (optimistic_spin(false, deadline)) return true;
    Record& me = P::current_thread();
    const Word self = self_word();

    wait_lock_.lock();
    if (try_acquire(self, false)) {
      wait_lock_.unlock();
      return true;
    }
    if (deadline <= P::now_ns()) {
      wait_lock_.unlock();
      return false;
    }
    Waiter node{&me};
    enqueue(node);
    // Publish WAITERS after arming (the diagram's [S] before [RmW]); the
    // look at the owner word follows in the loop.
    internal::arm(me);
    // relaxed: WAITERS is a request to unlock(); this RMW is ordered after
    // the arm by the fence in arm(), and the unlocker that sees the flag
    // reads the list under the wait lock, which we hold.
    owner_.fetch_or(L::kWaiters, std::memory_order_relaxed);
    bool taken = try_acquire(self, false);
    wait_lock_.unlock();

    bool first = false;
    while (!taken) {
      P::perturb();  // corpus builds only: between the look and the sleep
      if (!sleep(me, deadline)) {
        if (give_up(node, self)) return false;
        taken = true;  // the lock was handed to us as we gave up
        break;
      }
      first = is_first(node);
      internal::arm(me);
      taken = try_acquire(self, first) || (first && optimistic_spin(true, deadline));
    }
    wait_lock_.lock();
    dequeue(node);
    wait_lock_.unlock();
    return true;
  }

  // A timed waiter's deadline passed. Takes the wait lock: if the lock was
  // handed to us meanwhile, keep it (return false); else leave the list.
  // An unlock() may have woken us just before we gave up; that wake-up was
  // meant for whoever is first, so if the lock is free we pass it on to the
  // new first waiter instead of leaving it asleep beside a free lock.
  bool give_up(Waiter& node, Word self) {
    wait_lock_.lock();
    if (L::owner_bits(owner_.load(std::memory_order_relaxed)) == self && try_acquire(self, false)) {
      wait_lock_.unlock();
      return false;
    }
    dequeue(node);
    Record* next = nullptr;
    if (head_ != nullptr && L::owner_bits(owner_.load(std::memory_order_relaxed)) == 0)
      next = head_->thread;
    wait_lock_.unlock();
    if (next != nullptr) internal::unpark(next);
    return true;
  }

  // __mutex_unlock_slowpath(). `w` is the owner word that made the fast
  // path fail (it has flags).
  [[gnu::noinline]] void unlock_slow(Word w) {
    // No waiters: release and return; nothing is touched after the release.
    while (!L::has_waiters(w) && !L::has_handoff(w)) {
      // release: as in unlock().
      if (owner_.compare_exchange_weak(w, L::flags(w), kReleaseOrder, std::memory_order_relaxed))
        return;
    }
    // Waiters: take the wait lock first (see "Lifetime" at the top). The
    // list cannot empty while we hold it, and WAITERS changes only under it.
    wait_lock_.lock();
    Record* next = head_ != nullptr ? head_->thread : nullptr;
    w = owner_.load(std::memory_order_relaxed);
    for (;;) {
      // The first waiter may ask for HANDOFF until our cmpxchg succeeds.
      if (L::has_handoff(w)) {
        hand_over(next);
        break;
      }
      // Release the lock, keep the flags (WAITERS). release: as in unlock().
      if (owner_.compare_exchange_weak(w, L::flags(w), kReleaseOrder, std::memory_order_relaxed))
        break;
    }
    wait_lock_.unlock();
    if (next != nullptr) internal::unpark(next);
  }

  // __mutex_handoff(): the owner word becomes the first waiter with PICKUP,
  // or free if the list emptied. Called by the owner under the wait lock.
  void hand_over(Record* next) RWSEM_REQUIRES(wait_lock_) {
    wait_lock_.assert_held();
    Word w = owner_.load(std::memory_order_relaxed);
    for (;;) {
      Word n = w & L::kWaiters;
      if (next != nullptr) n |= reinterpret_cast<Word>(next) | L::kPickup;
      // release: the new owner's acquire in try_acquire() pairs with it.
      if (owner_.compare_exchange_weak(w, n, kReleaseOrder, std::memory_order_relaxed)) return;
    }
  }

  // ---- the wait list (all under wait_lock_) -------------------------------
  void enqueue(Waiter& n) RWSEM_REQUIRES(wait_lock_) {
    wait_lock_.assert_held();
    n.prev = tail_;
    if (tail_ != nullptr) tail_->next = &n;
    else head_ = &n;
    tail_ = &n;
    first_.store(head_, std::memory_order_relaxed);
  }
  void dequeue(Waiter& n) RWSEM_REQUIRES(wait_lock_) {
    wait_lock_.assert_held();
    (n.prev != nullptr ? n.prev->next : head_) = n.next;
    (n.next != nullptr ? n.next->prev : tail_) = n.prev;
    first_.store(head_, std::memory_order_relaxed);
    // The last waiter left: nobody to wake or hand to. relaxed: flags only.
    if (head_ == nullptr) owner_.fetch_and(~(L::kWaiters | L::kHandoff), std::memory_order_relaxed);
  }
  // __mutex_waiter_is_first(), without the wait lock: a hint. A stale answer
  // costs one spin or one HANDOFF request on behalf of a waiter that is
  // first by the time the owner reads the list.
  bool is_first(const Waiter& n) const { return first_.load(std::memory_order_relaxed) == &n; }

  typename P::template Atomic<Word> owner_{0};
  internal::BasicWaitLock<P> wait_lock_;
  std::int32_t spin_budget_ns_ = -1;  // < 0: the process-wide default
  internal::SpinQueue<P> osq_;
  // The wait list, oldest first.
  typename P::template Plain<Waiter*> head_ RWSEM_GUARDED_BY(wait_lock_) = nullptr;
  typename P::template Plain<Waiter*> tail_ RWSEM_GUARDED_BY(wait_lock_) = nullptr;
  // Copy of head_ for is_first(), stored under wait_lock_; relaxed loads
  // and stores: a hint, never dereferenced, only compared.
  typename P::template Atomic<Waiter*> first_{nullptr};
};

using Mutex = BasicMutex<internal::NativePlatform>;

}  // namespace rwsem

#endif  // RWSEM_LIB_MUTEX_H_
