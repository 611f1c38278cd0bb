// rwsem: a user-space port of the Linux reader-writer semaphore as
// re-architected in 2019 (new count scheme, lock handoff, reader wake
// batching, READFAIL guard bit, owner merged into the count on x86-64).
//
//   rwsem::RwSemaphore sem;             // default layout of this ISA
//   sem.down_read();  ...  sem.up_read();
//   std::unique_lock<rwsem::RwSemaphore> w(sem);   // SharedTimedMutex
//
// Design
// ======
// The whole lock state that the fast paths need is one atomic count word,
// laid out by a layout policy (arch/count_layouts.h documents every bit):
//
//   read lock    fetch_add(READER_BIAS), acquire. Fails if the old value has
//                any of READ_FAILED_MASK = writer | waiters | handoff |
//                READFAIL; the reader then backs its bias out and takes the
//                slow path.
//   write lock   cmpxchg(0 -> writer word), acquire. The writer word is
//                WRITER_LOCKED, or on the merged layout the caller's owner
//                id, computed once per thread (seed patch 12).
//   unlocks      release; they call the slow wake path only if WAITERS is set
//                and (for readers) they were the last reader.
//
// Waiters queue on stack-allocated nodes under a small wait lock and sleep
// on their own futex word (lib/rwsem/internal/waiter.h).
//
// Wake-up (rwsem_mark_wake): if the first waiter is a writer it is woken to
// retry; it takes the lock itself in try_write_lock(), with the wait lock
// held. If the first waiter is a reader, the waker takes one reader bias to
// test that no writer stole the lock, then grants the read lock to up to
// kMaxReadersWakeup queued readers anywhere in the queue, skipping writers
// (seed patch 6), adding their biases in one atomic add. Readers are not
// woken while READFAIL is set; the last reader to leave wakes them.
//
// Handoff (seed patch 2 and commit 004)
// -------------------------------------
// Writers may steal a free lock from queued waiters, which makes the lock
// fast but unfair. A first waiter that has waited longer than the handoff
// timeout sets HANDOFF: fast paths and stealing then fail until that waiter
// has the lock. A writer sets it in try_write_lock() (at once if it is a
// real-time thread); a reader's waker sets it when it finds the lock stolen
// by a writer.
//
// Invariant H: HANDOFF is set  <=>  the queue is not empty and its first
// waiter has handoff_set. Every change of the HANDOFF bit happens with the
// wait lock held:
//   set:   try_write_lock() (cmpxchg), mark_wake()'s reader test (add);
//   clear: try_write_lock() success (cmpxchg), mark_wake() granting readers
//          (add), a first waiter with handoff_set leaving (fetch_and).
// This answers the review's double-increment objection: mark_wake() decides
// "set HANDOFF" from the value its own fetch_add returned and then adds the
// bit, which would double it if anyone could set it in between. Nobody can:
// every setter holds the wait lock, and none of the lock-free operations
// (reader fetch_add/fetch_sub of READER_BIAS, the writer's cmpxchg from 0,
// trylock cmpxchg loops that preserve the low bits, up_write subtracting the
// exact writer word) can carry into, borrow from or write the HANDOFF bit.
// In the seed's v2 the writer set HANDOFF with atomic_or outside the wait
// lock and argued it safe because a first-waiter writer excludes mark_wake's
// reader path; here the writer sets it inside the wait lock, which needs no
// such argument. Likewise no barrier is needed "to make HANDOFF visible":
// whoever next reads the count under the wait lock sees it, and lock-free
// readers of the count only use it to fail.
//
// Timed waits (the kernel's killable paths): a waiter whose deadline passes
// while still queued takes out_nolock: it leaves the queue, clears WAITERS
// if the queue is now empty, clears HANDOFF if it owned it, and if it was
// first wakes the new front of the queue so nobody is stranded behind it.
#ifndef RWSEM_LIB_RWSEM_H_
#define RWSEM_LIB_RWSEM_H_

#include <chrono>
#include <cstdint>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "arch/count_layouts.h"
#include "arch/default_layout.h"
#include "arch/futex.h"
#include "lib/rwsem/config.h"
#include "lib/rwsem/internal/count_bits.h"
#include "lib/rwsem/internal/faults.h"
#include "lib/rwsem/internal/runtime.h"
#include "lib/rwsem/internal/thread_record.h"
#include "lib/rwsem/internal/wait_lock.h"
#include "lib/rwsem/internal/waiter.h"
#include "lib/rwsem/lock_events.h"
#include "lib/rwsem/testing.h"

#define RWSEM_LIKELY(x) __builtin_expect(!!(x), 1)
#define RWSEM_UNLIKELY(x) __builtin_expect(!!(x), 0)

namespace rwsem {

inline constexpr bool kDebugEnabled =
#if defined(RWSEM_DEBUG)
    true;
#else
    false;
#endif

// Decodes a count word of layout L: "readers=3 writer=none waiters handoff".
template <class L>
std::string describe(typename L::Word c) {
  using B = internal::CountBits<L>;
  std::ostringstream os;
  os << L::kName << " 0x" << std::hex << std::setw(B::kWordBits / 4)
     << std::setfill('0') << static_cast<std::uint64_t>(c) << std::dec
     << " readers=" << B::reader_count(c);
  if (!B::is_write_locked(c))
    os << " writer=none";
  else if (L::kOwnerInCount)
    os << " writer=0x" << std::hex << L::owner_id(c) << std::dec;
  else
    os << " writer=locked";
  if (B::has_waiters(c)) os << " waiters";
  if (B::has_handoff(c)) os << " handoff";
  if (B::is_read_fail(c)) os << " readfail";
  if (c & L::kReservedMask)
    os << " reserved=0x" << std::hex
       << static_cast<std::uint64_t>(c & L::kReservedMask) << std::dec;
  return os.str();
}

namespace internal {

// The owner field of the layouts that keep the owner outside the count.
// Written by the writer right after it takes the lock and cleared right
// before it releases it (relaxed: it is a hint for diagnostics, debug checks
// and spinning, never a synchronisation point).
template <bool kOwnerInCount>
class OwnerField {
 protected:
  void set_owner(std::uint64_t id) { owner_.store(id, std::memory_order_relaxed); }
  void clear_owner() { owner_.store(0, std::memory_order_relaxed); }
  template <class Word, class L>
  std::uint64_t owner_of(Word) const {
    return owner_.load(std::memory_order_relaxed);
  }

 private:
  std::atomic<std::uintptr_t> owner_{0};
};

// The merged layout reads the owner from the count: no field at all.
template <>
class OwnerField<true> {
 protected:
  void set_owner(std::uint64_t) {}
  void clear_owner() {}
  template <class Word, class L>
  std::uint64_t owner_of(Word c) const {
    return L::owner_id(c);
  }
};

// The calling thread's write-lock word for layout L, computed once per
// thread (seed patch 12). A thread whose owner id L cannot encode is refused
// here, loudly, the first time it tries to write-lock.
template <class L>
typename L::Word writer_word() {
  if constexpr (!L::kOwnerInCount) {
    return L::writer_word(0);
  } else {
    static thread_local const typename L::Word word = [] {
      const std::uint64_t id = current_thread().owner_id;
      if (!L::encodable(id) || L::owner_id(L::writer_word(id)) != id) {
        debug_fail("this thread's owner id does not fit the count layout",
                   nullptr, std::string(L::kName));
      }
      return L::writer_word(id);
    }();
    return word;
  }
}

}  // namespace internal

// One read/write semaphore over count layout `Layout`.
//
// Not copyable or movable. No lock or unlock path allocates: waiters live on
// the waiting thread's stack.
template <class Layout>
class BasicRwSemaphore
    : private internal::OwnerField<Layout::kOwnerInCount> {
  using B = internal::CountBits<Layout>;
  using OwnerBase = internal::OwnerField<Layout::kOwnerInCount>;
  using Waiter = internal::Waiter;
  using WaiterType = internal::WaiterType;
  using WakeList = internal::WakeList;

 public:
  using layout_type = Layout;
  using Word = typename Layout::Word;

  constexpr BasicRwSemaphore() noexcept = default;
  explicit BasicRwSemaphore(const Options& opts) noexcept {
    if (opts.handoff_timeout.count() >= 0) {
      const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                          opts.handoff_timeout)
                          .count();
      handoff_us_ = us >= kUseDefault ? kUseDefault - 1
                                      : static_cast<std::uint32_t>(us);
    }
  }
  ~BasicRwSemaphore() {
    if (kDebugEnabled) {
      const Word c = count_.load(std::memory_order_relaxed);
      if (c != 0 || !queue_.empty())
        debug_fail("rwsem destroyed while locked or waited on", c);
    }
  }
  BasicRwSemaphore(const BasicRwSemaphore&) = delete;
  BasicRwSemaphore& operator=(const BasicRwSemaphore&) = delete;

  // ---- kernel-style API ----------------------------------------------------

  void down_read() {
    // acquire pairs with the release of the unlock that freed the lock.
    const Word c = count_.fetch_add(B::kReaderBias, std::memory_order_acquire);
    if (RWSEM_UNLIKELY(B::read_fails(c))) read_slowpath(arch::kNoDeadline);
  }

  bool down_read_trylock() {
    Word c = count_.load(std::memory_order_relaxed);
    while (!B::read_fails(c)) {
      // acquire pairs with the release of the last unlock.
      if (count_.compare_exchange_weak(c, c + B::kReaderBias,
                                       std::memory_order_acquire,
                                       std::memory_order_relaxed))
        return true;
    }
    return false;
  }

  bool down_read_timeout(std::chrono::nanoseconds timeout) {
    return down_read_until_ns(deadline_after(timeout));
  }

  void up_read() {
    // release pairs with the acquire of the next writer (or of mark_wake()).
    const Word old = count_.fetch_sub(B::kReaderBias, std::memory_order_release);
    if (kDebugEnabled &&
        (B::is_write_locked(old) || !B::has_readers(old) || !B::is_consistent(old)))
      debug_fail(!B::is_consistent(old)    ? "inconsistent count"
                 : B::is_write_locked(old) ? "up_read on a write-locked rwsem"
                                           : "up_read on a rwsem with no "
                                             "readers (double unlock?)",
                 old);
    if (RWSEM_UNLIKELY(B::needs_wake_after_reader_exit(old - B::kReaderBias)))
      wake();
  }

  void down_write() {
    const Word w = internal::writer_word<Layout>();
    Word expected = 0;
    // acquire pairs with the release of the unlock that freed the lock.
    if (RWSEM_UNLIKELY(!count_.compare_exchange_strong(
            expected, w, std::memory_order_acquire, std::memory_order_relaxed)))
      write_slowpath(w, arch::kNoDeadline);
    this->set_owner(internal::current_thread().owner_id);
  }

  bool down_write_trylock() {
    const Word w = internal::writer_word<Layout>();
    if (!try_write_lock_unqueued(w)) return false;
    this->set_owner(internal::current_thread().owner_id);
    return true;
  }

  bool down_write_timeout(std::chrono::nanoseconds timeout) {
    return down_write_until_ns(deadline_after(timeout));
  }

  void up_write() {
    const Word w = internal::writer_word<Layout>();
    if (kDebugEnabled) check_write_owner("up_write");
    this->clear_owner();
    // release pairs with the acquire of the next locker (or of mark_wake()).
    const Word old = count_.fetch_sub(w, std::memory_order_release);
    if constexpr (internal::fault::kMissedWakeup) return;
    if (RWSEM_UNLIKELY(B::has_waiters(old))) wake();
  }

  // Turns the caller's write lock into a read lock and wakes queued readers.
  void downgrade_write() {
    const Word w = internal::writer_word<Layout>();
    if (kDebugEnabled) check_write_owner("downgrade_write");
    this->clear_owner();
    // release: readers that enter after this see the writer's data; pairs
    // with their acquire fetch_add (or mark_wake()'s).
    const Word old =
        count_.fetch_add(B::kReaderBias - w, std::memory_order_release);
    if (RWSEM_UNLIKELY(B::has_waiters(old))) {
      WakeList wakes;
      wait_lock_.lock();
      if (!queue_.empty()) mark_wake(WakeType::kReadOwned, wakes);
      wait_lock_.unlock();
    }
  }

  // ---- SharedTimedMutex API ---------------------------------------------

  void lock() { down_write(); }
  bool try_lock() { return down_write_trylock(); }
  void unlock() { up_write(); }
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return down_write_until_ns(deadline_after(d));
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& t) {
    return down_write_until_ns(to_deadline(t));
  }

  void lock_shared() { down_read(); }
  bool try_lock_shared() { return down_read_trylock(); }
  void unlock_shared() { up_read(); }
  template <class Rep, class Period>
  bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& d) {
    return down_read_until_ns(deadline_after(d));
  }
  template <class Clock, class Duration>
  bool try_lock_shared_until(const std::chrono::time_point<Clock, Duration>& t) {
    return down_read_until_ns(to_deadline(t));
  }

  // ---- observation ---------------------------------------------------------

  // A racy read of the count, for diagnostics and tests.
  Word count() const { return count_.load(std::memory_order_relaxed); }
  std::string describe() const { return rwsem::describe<Layout>(count()); }
  // Owner id of the writer, or 0 (a racy hint).
  std::uint64_t owner_id() const {
    return this->template owner_of<Word, Layout>(count());
  }

  struct WaiterInfo {
    bool reader;
    std::uint32_t tid;
    std::int64_t waited_ns;  // on the handoff clock
    bool handoff_set;
    bool sleeping;           // queued and not woken (state kQueued)
  };
  // The queue, front first. Takes the wait lock; gives up and returns false
  // after `patience` if someone holds it (a watchdog must not hang).
  bool waiters(std::vector<WaiterInfo>* out,
               std::chrono::nanoseconds patience = std::chrono::seconds(1)) {
    const std::int64_t give_up = arch::monotonic_now_ns() + patience.count();
    while (!wait_lock_.try_lock()) {
      if (arch::monotonic_now_ns() > give_up) return false;
      sched_yield();
    }
    const std::int64_t now = internal::handoff_clock_now();
    for (Waiter* w = queue_.first(); w != nullptr; w = queue_.after(w))
      out->push_back({w->is_reader(), w->thread->tid, now - w->enqueued_ns,
                      w->handoff_set,
                      w->state.load(std::memory_order_relaxed) == internal::kQueued});
    wait_lock_.unlock();
    return true;
  }

 private:
  friend struct testing::Peer;
  enum class WakeType { kAny, kReaders, kReadOwned };
  static constexpr std::uint32_t kUseDefault = UINT32_MAX;

  // ---- deadlines -----------------------------------------------------------

  template <class Rep, class Period>
  static std::int64_t deadline_after(const std::chrono::duration<Rep, Period>& d) {
    // More than ~30 years is "forever"; checked in double so that
    // hours::max() does not overflow the conversion to nanoseconds.
    if (std::chrono::duration<double>(d).count() > 1e9) return arch::kNoDeadline - 1;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
    const std::int64_t now = arch::monotonic_now_ns();
    if (ns <= 0) return now;
    return ns >= arch::kNoDeadline - now ? arch::kNoDeadline - 1 : now + ns;
  }
  // Any clock's time point, measured as "time left" on that clock and then
  // placed on the monotonic clock the futex waits use. Compared before
  // subtracting: time_point::min() - now() would overflow.
  template <class Clock, class Duration>
  static std::int64_t to_deadline(const std::chrono::time_point<Clock, Duration>& t) {
    const auto now = Clock::now();
    if (t <= now) return arch::monotonic_now_ns();
    return deadline_after(t - now);
  }

  std::int64_t handoff_timeout_ns() const {
    return handoff_us_ == kUseDefault ? internal::default_handoff_timeout_ns()
                                      : std::int64_t{handoff_us_} * 1000;
  }

  bool down_read_until_ns(std::int64_t deadline) {
    // acquire pairs with the release of the unlock that freed the lock.
    const Word c = count_.fetch_add(B::kReaderBias, std::memory_order_acquire);
    if (RWSEM_LIKELY(!B::read_fails(c))) return true;
    return read_slowpath(deadline);
  }

  bool down_write_until_ns(std::int64_t deadline) {
    const Word w = internal::writer_word<Layout>();
    Word expected = 0;
    // acquire pairs with the release of the unlock that freed the lock.
    if (!count_.compare_exchange_strong(expected, w, std::memory_order_acquire,
                                        std::memory_order_relaxed) &&
        !write_slowpath(w, deadline))
      return false;
    this->set_owner(internal::current_thread().owner_id);
    return true;
  }

  // ---- helpers over the count ----------------------------------------------

  // A writer takes a free lock that nobody is owed (no HANDOFF), even with
  // waiters queued: lock stealing. Handoff bounds how long it can go on.
  bool try_write_lock_unqueued(Word w) {
    Word c = count_.load(std::memory_order_relaxed);
    while (!B::is_locked(c) && !B::has_handoff(c)) {
      // acquire pairs with the release of the last unlock.
      if (count_.compare_exchange_weak(c, c + w, std::memory_order_acquire,
                                       std::memory_order_relaxed))
        return true;
    }
    return false;
  }

  // A reader with an empty queue takes the lock unless a writer holds it,
  // HANDOFF is set, or the reader count is full. Wait lock held.
  bool try_read_lock_unqueued() {
    Word c = count_.load(std::memory_order_relaxed);
    while (!B::is_write_locked(c) && !B::has_handoff(c) && !B::is_read_fail(c)) {
      // acquire pairs with the release of the last unlock.
      if (count_.compare_exchange_weak(c, c + B::kReaderBias,
                                       std::memory_order_acquire,
                                       std::memory_order_relaxed))
        return true;
    }
    return false;
  }

  // Takes back a reader bias added by a failed fast path. If that transient
  // bias hid the lock going free from the last unlocker, do its wake-up.
  void backout_reader_bias() {
    // relaxed: this reader touched no protected data; the release sequence
    // of earlier unlocks continues through this RMW.
    const Word old = count_.fetch_sub(B::kReaderBias, std::memory_order_relaxed);
    if (B::needs_wake_after_reader_exit(old - B::kReaderBias)) wake();
  }

  // rwsem_wake(): an unlock saw WAITERS.
  void wake() {
    WakeList wakes;
    wait_lock_.lock();
    if (!queue_.empty()) mark_wake(WakeType::kAny, wakes);
    wait_lock_.unlock();
  }  // ~WakeList runs the wake-ups

  // rwsem_mark_wake(): choose whom to wake. Wait lock held; queue not empty.
  //   kAny        the lock may be free: wake the first writer, or grant
  //               readers if no writer holds the lock;
  //   kReaders    a writer is queueing behind a reader-owned lock: grant
  //               queued readers, but wake no writer;
  //   kReadOwned  the caller holds a read lock (downgrade): grant readers
  //               without testing for a writer.
  void mark_wake(WakeType type, WakeList& wakes) {
    Waiter* first = queue_.first();
    if (!first->is_reader()) {
      if (type == WakeType::kAny && wakes.add(first)) RWSEM_EVENT_INC(wake_writer);
      return;
    }
    // Too many readers: wake none until the last of them leaves (patch 10).
    if (B::is_read_fail(count_.load(std::memory_order_relaxed))) return;

    Word adjustment = 0;
    if (type != WakeType::kReadOwned) {
      // Take one reader bias first, so that no writer can steal the lock
      // while we grant it. acquire pairs with the release of the unlock that
      // freed the lock; the granted readers inherit it via the hand-over.
      adjustment = B::kReaderBias;
      const Word old = count_.fetch_add(adjustment, std::memory_order_acquire);
      if (RWSEM_UNLIKELY(B::is_write_locked(old))) {
        // A writer stole the lock. If the first waiter has waited long
        // enough, start a reader handoff (invariant H: we hold the wait lock,
        // and HANDOFF is clear in `old`, so adding it cannot double it).
        if (!B::has_handoff(old) &&
            internal::handoff_clock_now() > first->handoff_deadline_ns) {
          adjustment -= Layout::kHandoff;
          first->handoff_set = true;
          RWSEM_EVENT_INC(rlock_handoff);
        }
        // relaxed: undoes our own test bias (and maybe sets HANDOFF).
        count_.fetch_sub(adjustment, std::memory_order_relaxed);
        return;
      }
    }

    // Grant the read lock to up to kMaxReadersWakeup readers, skipping
    // writers (patch 6).
    int woken = 0;
    for (Waiter* w = first; w != nullptr && woken < kMaxReadersWakeup;) {
      Waiter* next = queue_.after(w);
      if (w->is_reader()) {
        queue_.remove(w);
        wakes.add(w);
        ++woken;
      }
      w = next;
    }
    RWSEM_EVENT_ADD(wake_reader, static_cast<std::uint64_t>(woken));

    adjustment = static_cast<Word>(Word(woken) * B::kReaderBias - adjustment);
    if (queue_.empty()) adjustment -= Layout::kWaiters;
    // The first waiter was granted; if it owned HANDOFF, clear it (H).
    if (B::has_handoff(count_.load(std::memory_order_relaxed)))
      adjustment -= Layout::kHandoff;
    // relaxed: the granted readers synchronise through the hand-over.
    if (adjustment != 0) count_.fetch_add(adjustment, std::memory_order_relaxed);
  }

  // rwsem_try_write_lock(): a queued writer takes the lock, or sets HANDOFF
  // when it is owed the lock. Wait lock held.
  bool try_write_lock(Waiter& self, Word w) {
    Waiter* first = queue_.first();
    Word c = count_.load(std::memory_order_relaxed);
    Word next;
    do {
      const bool has_handoff = B::has_handoff(c);
      // H: HANDOFF belongs to the first waiter; nobody else may take the lock.
      if (has_handoff && &self != first) return false;
      next = c;
      if (B::is_locked(c)) {
        if (has_handoff ||
            (!self.rt &&
             internal::handoff_clock_now() <= self.handoff_deadline_ns))
          return false;
        // Waited long enough (or real-time): claim the lock for the first
        // waiter. Our deadline has passed, so the first waiter's has too.
        next |= Layout::kHandoff;
      } else {
        next = (next | w) & ~Layout::kHandoff;
        if (queue_.is_singular()) next &= ~Layout::kWaiters;
      }
      // acquire pairs with the release of the unlock that freed the lock.
    } while (!count_.compare_exchange_weak(c, next, std::memory_order_acquire,
                                           std::memory_order_relaxed));
    if (B::has_handoff(next)) {
      first->handoff_set = true;
      RWSEM_EVENT_INC(wlock_handoff);
      return false;
    }
    queue_.remove(&self);
    return true;
  }

  // out_nolock: a timed-out waiter leaves the queue. Wait lock held.
  void remove_waiter(Waiter& self, WakeList& wakes) {
    const bool was_first = queue_.first() == &self;
    queue_.remove(&self);
    if (queue_.empty()) {
      // relaxed: flag bookkeeping; nothing is published.
      count_.fetch_and(static_cast<Word>(~(Layout::kWaiters | Layout::kHandoff)),
                       std::memory_order_relaxed);
      return;
    }
    if (!was_first) return;
    if (self.handoff_set)
      count_.fetch_and(static_cast<Word>(~Layout::kHandoff),
                       std::memory_order_relaxed);
    // The new front of the queue may be able to run now (a reader behind a
    // writer that gave up on a reader-owned lock, or anyone on a free lock).
    mark_wake(WakeType::kAny, wakes);
  }

  // ---- slow paths ------------------------------------------------------------

  // down_read() failed; its bias is still in the count.
  bool read_slowpath(std::int64_t deadline) {
    // Back the bias out before queueing, so that it blocks no writer while
    // we wait for the wait lock (seed 001; patch 10 for READFAIL).
    backout_reader_bias();
    if (deadline <= arch::monotonic_now_ns()) {
      RWSEM_EVENT_INC(rlock_fail);
      return false;
    }

    const std::int64_t now = internal::handoff_clock_now();
    Waiter self(WaiterType::kReader, now, handoff_timeout_ns());
    WakeList wakes;
    wait_lock_.lock();
    Word c;
    if (queue_.empty()) {
      if (try_read_lock_unqueued()) {
        wait_lock_.unlock();
        RWSEM_EVENT_INC(rlock_fast);
        return true;
      }
      // relaxed: either an unlock's RMW comes after this in the count's
      // order and sees WAITERS (and then waits for our wait lock), or it
      // comes before and we see the lock free below.
      c = count_.fetch_or(Layout::kWaiters, std::memory_order_relaxed) |
          Layout::kWaiters;
    } else {
      c = count_.load(std::memory_order_relaxed);
    }
    queue_.push_back(&self);
    // The lock went free before anyone saw WAITERS: nobody else will wake
    // the queue, so we do (this may grant ourselves).
    if (!B::is_locked(c)) mark_wake(WakeType::kAny, wakes);
    wait_lock_.unlock();
    wakes.run();

    if (!self.sleep_while_queued(deadline)) {
      wait_lock_.lock();
      if (self.state.load(std::memory_order_relaxed) == internal::kQueued) {
        remove_waiter(self, wakes);
        wait_lock_.unlock();
        RWSEM_EVENT_INC(rlock_fail);
        return false;
      }
      wait_lock_.unlock();  // granted just as we timed out
    } else {
      RWSEM_EVENT_INC(sleep_reader);
    }
    self.wait_until_released();
    RWSEM_EVENT_INC(rlock);
    return true;
  }

  // down_write() failed.
  bool write_slowpath(Word w, std::int64_t deadline) {
    if (try_write_lock_unqueued(w)) {
      RWSEM_EVENT_INC(wlock_steal);
      return true;
    }
    if (deadline <= arch::monotonic_now_ns()) {
      RWSEM_EVENT_INC(wlock_fail);
      return false;
    }

    Waiter self(WaiterType::kWriter, internal::handoff_clock_now(),
                handoff_timeout_ns());
    self.rt = internal::current_thread_is_realtime();
    WakeList wakes;
    wait_lock_.lock();
    if (queue_.empty()) {
      // relaxed: see read_slowpath(); try_write_lock() below re-reads.
      count_.fetch_or(Layout::kWaiters, std::memory_order_relaxed);
      queue_.push_back(&self);
    } else {
      queue_.push_back(&self);
      const Word c = count_.load(std::memory_order_relaxed);
      // Waiters ahead of us may be able to run: readers can join a
      // reader-owned lock; on a free lock the front waiter must be woken.
      if (!B::is_write_locked(c))
        mark_wake(B::has_readers(c) ? WakeType::kReaders : WakeType::kAny, wakes);
    }

    for (;;) {
      // Re-arm: a wake-up that has been fully delivered is consumed.
      if (self.state.load(std::memory_order_relaxed) == internal::kReleased)
        self.state.store(internal::kQueued, std::memory_order_relaxed);
      if (try_write_lock(self, w)) break;
      wait_lock_.unlock();
      wakes.run();
      const bool woken = self.sleep_while_queued(deadline);
      if (woken) {
        RWSEM_EVENT_INC(sleep_writer);
        self.wait_until_released();
      }
      wait_lock_.lock();
      if (!woken && self.state.load(std::memory_order_relaxed) == internal::kQueued) {
        // Timed out. One last try, then out_nolock.
        if (try_write_lock(self, w)) break;
        remove_waiter(self, wakes);
        wait_lock_.unlock();
        wakes.run();
        RWSEM_EVENT_INC(wlock_fail);
        return false;
      }
    }
    wait_lock_.unlock();
    wakes.run();
    self.wait_until_released();
    RWSEM_EVENT_INC(wlock);
    return true;
  }

  // ---- debug -----------------------------------------------------------------

  [[noreturn]] void debug_fail(const char* what, Word c) const {
    internal::debug_fail(what, this, rwsem::describe<Layout>(c));
  }

  void check_write_owner(const char* op) const {
    const Word c = count_.load(std::memory_order_relaxed);
    if (!B::is_consistent(c)) debug_fail("inconsistent count", c);
    if (!B::is_write_locked(c))
      debug_fail(op[0] == 'u' ? "up_write on a rwsem that is not write-locked "
                                "(double unlock?)"
                              : "downgrade_write on a rwsem that is not "
                                "write-locked",
                 c);
    if (this->template owner_of<Word, Layout>(c) !=
        internal::current_thread().owner_id)
      debug_fail(op[0] == 'u' ? "up_write by a thread that is not the owner"
                              : "downgrade_write by a thread that is not the "
                                "owner",
                 c);
  }

  // ---- state -----------------------------------------------------------------

  std::atomic<Word> count_{0};
  internal::WaitQueue queue_;  // guarded by wait_lock_
  internal::WaitLock wait_lock_;
  std::uint32_t handoff_us_ = kUseDefault;
};

using RwSemaphore = BasicRwSemaphore<DefaultLayout>;

template <class L>
std::ostream& operator<<(std::ostream& os, const BasicRwSemaphore<L>& sem) {
  return os << sem.describe();
}

// Raw access for tests (lib/rwsem/testing.h).
namespace testing {
struct Peer {
  template <class L>
  static std::atomic<typename L::Word>& count(BasicRwSemaphore<L>& s) {
    return s.count_;
  }
  // Pretends `n` more (or, negative, fewer) readers hold the lock, as if
  // that many had taken or released it, so tests reach READFAIL without
  // 2^23 threads. Releasing does the wake-up up_read would do.
  template <class L>
  static void add_phantom_readers(BasicRwSemaphore<L>& s, std::int64_t n) {
    using Bits = internal::CountBits<L>;
    using W = typename L::Word;
    if (n >= 0) {
      s.count_.fetch_add(static_cast<W>(static_cast<W>(n) * Bits::kReaderBias),
                         std::memory_order_acq_rel);
      return;
    }
    const W old = s.count_.fetch_sub(
        static_cast<W>(static_cast<W>(-n) * Bits::kReaderBias),
        std::memory_order_acq_rel);
    if (Bits::needs_wake_after_reader_exit(
            static_cast<W>(old - static_cast<W>(-n) * Bits::kReaderBias)))
      s.wake();
  }
  // rwsem_wake() as an unlock that saw WAITERS would call it.
  template <class L>
  static void wake(BasicRwSemaphore<L>& s) {
    s.wake();
  }
  template <class L>
  static std::size_t queue_length(BasicRwSemaphore<L>& s) {
    std::vector<typename BasicRwSemaphore<L>::WaiterInfo> v;
    s.waiters(&v);
    return v.size();
  }
};
}  // namespace testing

}  // namespace rwsem

#endif  // RWSEM_LIB_RWSEM_H_
