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
//   write lock   load, then cmpxchg(c -> c + writer word), acquire, if c
//                shows neither a holder nor HANDOFF: a steal when WAITERS
//                is set. The writer word is WRITER_LOCKED, or on the merged
//                layout the caller's owner id, computed once per thread
//                (rwsem series patch 12).
//   unlocks      cmpxchg, release; they take the slow wake path only if
//                WAITERS is set, no woken waiter is on its way (WOKEN), and
//                (for readers) they are the last reader.
//
// Waiters queue on stack-allocated nodes under a small wait lock and sleep
// on their own thread record's futex word (lib/rwsem/internal/waiter.h).
//
// Wake-up (rwsem_mark_wake): if the first waiter is a writer it is woken to
// retry; it takes the lock itself in try_write_lock(), with the wait lock
// held. (So is a lone reader that a writer's unlock finds queued: "Woken
// reader" below.) If the first waiter is a reader, the waker takes one reader
// bias to test that no writer stole the lock, then grants the read lock to up
// to kMaxReadersWakeup queued readers anywhere in the queue, skipping writers
// (rwsem series patch 6), adding their biases in one atomic add. Readers are
// not woken while READFAIL is set; the last reader to leave wakes them.
//
// Handoff (rwsem series patch 2 and the handoff commit)
// -------------------------------------
// Writers, and readers whose fast path failed only on WAITERS (reader lock
// stealing, read_slowpath()), may take a free lock past queued waiters,
// which makes the lock fast but unfair. A first waiter that has waited
// longer than the handoff timeout sets HANDOFF: fast paths and stealing then
// fail until that waiter has the lock. A writer sets it in try_write_lock() (at once if it is a
// real-time thread); a reader's waker sets it when it finds the lock stolen
// by a writer.
//
// Invariant H: HANDOFF is set  <=>  the queue is not empty and its first
// waiter has handoff_set. Every change of the HANDOFF bit happens with the
// wait lock held:
//   set:   try_write_lock() (cmpxchg), mark_wake()'s reader test (add);
//   clear: try_write_lock() success (cmpxchg), mark_wake() granting readers
//          (add), a first waiter with handoff_set leaving (fetch_and).
// So HANDOFF is never added twice, although mark_wake() decides
// "set HANDOFF" from the value its own fetch_add returned and then adds the
// bit, which would double it if anyone could set it in between. Nobody can:
// every setter holds the wait lock, and none of the lock-free operations
// (reader fetch_add/fetch_sub of READER_BIAS, the writer's cmpxchg adding
// its word to a count with no holder, trylock cmpxchg loops that preserve
// the low bits, up_write subtracting the exact writer word) can carry into,
// borrow from or write the HANDOFF bit.
// In the series' v2 the writer set HANDOFF with atomic_or outside the wait
// lock and argued it safe because a first-waiter writer excludes mark_wake's
// reader path; here the writer sets it inside the wait lock, which needs no
// such argument. Likewise no barrier is needed "to make HANDOFF visible":
// whoever next reads the count under the wait lock sees it, and lock-free
// readers of the count only use it to fail.
//
// Wait bounds (both roles)
// ------------------------
// Four rules, beside handoff, give every waiter a bound of the handoff
// timeout plus the critical sections in progress (README, "Wait bounds"):
//  1. A reader that is not queued joins a lock that readers hold only if no
//     waiter is queued (reader_may_join(); the kernel's "don't steal if the
//     lock is very likely owned by readers"). Readers that keep overlapping
//     would otherwise keep the count from ever reaching zero, and the queued
//     writer would never be woken to claim HANDOFF. (One exception, bounded
//     by HANDOFF: "Read phases" below.)
//  2. A queued writer sleeps at most until its handoff deadline, then wakes
//     and retries, which sets HANDOFF if the lock is still held (the
//     "handoff timer"; the kernel waits for an unlock to wake it).
//  3. A spinner stops as soon as it sees HANDOFF: the lock is owed to the
//     first waiter, and spinning only takes CPU from the owner and it.
//  4. A reader queued behind the first waiter, a writer, is granted ahead of
//     it (with the readers of its batch) once the reader has waited its
//     handoff timeout, unless that writer has claimed HANDOFF
//     (overdue_reader_behind(); not in the kernel). The writer arrived
//     first, so its deadline passed first: it has not claimed because it
//     has not run since (asleep on its handoff timer, or woken and waiting
//     for a CPU), and the wake-up that would wake it again grants the
//     readers instead. Writers keep their bound: the grant needs HANDOFF
//     clear, and the writer's next retry finds the lock held and claims
//     HANDOFF, which also ends the granted readers' phases. Without this
//     rule, with more threads than CPUs, a reader behind k writers waited
//     up to k writer handoffs while running writers kept stealing the lock.
// A reader behind a writer stream gets HANDOFF from the waker that finds
// the lock stolen once the reader has waited its handoff timeout.
//
// Read phases (not in the kernel)
// -------------------------------
// Rule 1 has one exception. The readers one wake-up grants hold the lock
// from the grant on, but with more threads than CPUs most of them have not
// run yet. The first of them to run finishes its section and, on its next
// down_read(), finds its batch-mates still holding the lock and waiters
// queued: rule 1 sends it back to sleep after one section, while the last
// of the batch to run finds the lock free and steals it for a whole time
// slice. The scheduler runs first whoever has had the least CPU, so the
// same threads stay unlucky: at 32 threads on 2 CPUs single readers got a
// hundredth of the others' share. So a reader granted by a wake-up that
// left waiters queued opens a read phase on that lock for itself, of the
// handoff timeout / kReadPhaseDivisor on the handoff clock; within it,
// may_rejoin_read_phase() lets it join the readers past the queue while
// more readers hold the lock than could be running beside it (some holder
// is waiting for a CPU, not working), no writer holds it and HANDOFF and
// READFAIL are clear. The reader count is a hint here: it also holds the
// biases of readers whose fast path failed and that are about to back
// out; nothing relies on it for safety or for a bound. The bounds stay: HANDOFF ends every phase, so a
// writer still waits at most its handoff timeout plus the sections in
// progress; queued readers are not affected. The phase lives in the
// thread's record, not in the lock: no word of the lock changes.
//
// Woken writer (WOKEN; not in the kernel, after absl's designated waker)
// ----------------------------------------------------------------------
// A writer at the front of the queue is woken to *retry*, not granted the
// lock. Between the wake-up and its retry every unlock would otherwise see
// WAITERS, take the wait lock and find nobody to wake: on a contended lock
// that is one wait-lock round trip per unlock, on the count's cache line.
// WOKEN says "the first waiter is a writer that has been woken and has not
// retried yet"; an unlock that sees it releases with its plain RMW and
// wakes nobody (must_wake()), because the retry will see the lock as that
// unlock left it.
//
// Invariant W: WOKEN is set  <=>  the first waiter has been woken to
// retry (a writer, or a reader woken to retry: next section) and its state
// is kWoken. Both change together, with the wait lock held:
//   set:   mark_wake() waking the first waiter to retry (wake(), set_woken());
//   clear: that waiter's retry (try_write_lock(), try_read_lock_queued()),
//          in the same compare-exchange that takes the lock, claims
//          HANDOFF, or only observes it held; or mark_wake() granting the
//          woken reader the lock after all (the grant's add).
// The retry and the unlocks are RMWs of the one count, so they are
// totally ordered: an unlock ordered before the retry released the lock
// the retry then sees free; one ordered after it sees WOKEN clear and
// wakes the waiter, which has re-armed under the wait lock before it
// looked. A waiter woken to retry leaves the queue only after a retry
// (success, or the last try of a timed-out waiter) or by that grant, so
// removing a waiter never has to clear WOKEN. Measured effect: README,
// "Where the lock departs from the kernel".
//
// Woken reader (not in the kernel)
// --------------------------------
// The kernel grants a woken reader the lock: its bias is in the count before
// it runs. When a writer's unlock finds one reader queued, that grant costs
// the writer its next lock: a woken thread takes tens of microseconds to run,
// the lock is read-owned by a sleeper all that time, and the writer's next
// down_write() queues. Two threads that alternate roles then move one write
// per wake-up, while the reader, whose steal of a free lock the waiting
// writer cannot stop, reads until the writer's handoff deadline: one reader
// and one writer without spinning did 23-25 M reads and 0.05-0.5 M writes a
// second on a 2-core VM. So up_write() (kWriterUnlock) wakes a lone queued
// reader to *retry*, as a writer is woken, unless the reader is past its
// handoff deadline or real-time: then it is granted, as in the kernel, which
// keeps its wait bound. The woken reader stays first in the queue with WOKEN
// set and takes the lock itself (try_read_lock_queued()); the lock is free
// meanwhile, for the writer too. A retry that finds a writer holding the lock
// sleeps again, and the next unlock wakes it (WOKEN is clear then), or grants
// it once it is due. `retry` tells the reader which wake-up it got; a grant
// that reaches a reader woken to retry leaves it off the queue, which the
// reader checks under the wait lock. Only a lone reader, and only at a
// writer's unlock: a batch of readers is granted together, as in the kernel
// (retrying one by one, they would let writers in between), and the other
// wakers (a reader's unlock, a waiter that leaves) do not take the lock
// again. Measured effect: README, "Where the lock departs from the kernel".
//
// Lifetime
// --------
// POSIX and C++ let any thread destroy an unlocked lock with no waiters,
// even while the thread that released it is still returning from unlock.
// (The kernel needs none of this: its locks live in objects whose lifetime
// is managed elsewhere.) The two unlocks keep the lock alive differently.
//
// up_write() touches nothing after its releasing RMW. When it sees WAITERS
// without WOKEN it takes the wait lock *first* and releases under it (it
// decides with a cmpxchg, so the decision and the release are one atomic
// step; with WOKEN it releases and touches nothing more). While the wait
// lock is held the queue cannot empty, so the lock cannot legally be
// destroyed; the last access is the wait lock's own release, and the
// wake-ups that follow touch only thread records. That release can still
// come after the destroyer's last operation on the lock (a reader granted
// under the wait lock may lock and unlock before the waker lets go of it;
// or the waiters left before the waker got the wait lock, and the lock was
// released with WAITERS clear), so the destructor waits for the wait lock
// to be free: it is held only for a few queue edits.
//
// up_read() releases with one fetch_sub, as the kernel does, and only then
// learns whether it was the last reader out with waiters queued and none
// woken, when it must wake the queue: after its release. So it announces
// the release in its own thread record first (`unlocking` = the lock) and
// withdraws the announcement when it is done with the lock. Whoever
// destroys the lock is ordered after the release, and so after the
// announcement; the destructor waits until no thread record names the
// lock. That scan is needed only if some up_read() may wake the queue,
// that is if a waiter ever set WAITERS, which it does holding the wait
// lock; so the scan is skipped for a lock whose wait lock was never taken.
// The destroyer is ordered after that waiter's taking of the wait lock:
// it must be ordered after the waiter's lock call if that call failed (a
// timed wait), and if the call got the lock the destroyer's view of the
// lock as free synchronises with the waiter's releasing unlock (every
// change of the count is an RMW, so every release of the count heads a
// release sequence that reaches the destroyer's acquire). The cost is
// two stores to the caller's own record per up_read() and, per
// destruction of a lock that ever had waiters, one load per thread record
// ever handed out (the process's peak number of threads that used a
// lock). Deciding before the release instead, as up_write() does, needs
// a cmpxchg, which readers that release together make fail and retry
// (README, "Where the lock departs from the kernel").
//
// Both waits of the destructor are for a thread that may have been
// preempted inside its unlock, possibly by the destroyer itself (a
// real-time waiter woken by a normal-priority unlocker runs at once, before
// the unlocker's next instruction). So they yield a few times and then
// sleep (UnlockerWait, spin_wait.h), never spin for good.
//
// Relaxed reads of the count. Every plain load of the count is relaxed: it
// either seeds a compare-exchange whose success order (acquire) does the
// synchronising, or it is a decision hint (spin, wake, debug, describe) that
// is re-checked by an RMW, or it is taken with the wait lock held, where the
// bits it tests (WAITERS, HANDOFF, WOKEN, READFAIL for wake-up) change only under
// that lock or are re-validated by mark_wake()'s acquire fetch_add.
//
// Timed waits (the kernel's killable paths): a waiter whose deadline passes
// while still queued takes out_nolock: it leaves the queue, clears WAITERS
// if the queue is now empty, clears HANDOFF if it owned it, and if it was
// first wakes the new front of the queue so nobody is stranded behind it.
#ifndef RWSEM_LIB_RWSEM_H_
#define RWSEM_LIB_RWSEM_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "arch/count_layouts.h"
#include "arch/default_layout.h"
#include "arch/futex.h"
#include "lib/rwsem/config.h"
#include "lib/rwsem/internal/count_bits.h"
#include "lib/rwsem/internal/deadline.h"
#include "lib/rwsem/internal/osq.h"
#include "lib/rwsem/internal/platform.h"
#include "lib/rwsem/internal/runtime.h"
#include "lib/rwsem/internal/spin_wait.h"
#include "lib/rwsem/internal/thread_annotations.h"
#include "lib/rwsem/internal/thread_record.h"
#include "lib/rwsem/internal/wait_lock.h"
#include "lib/rwsem/internal/waiter.h"
#include "lib/rwsem/lock_events.h"

#define RWSEM_LIKELY(x) __builtin_expect(!!(x), 1)
#define RWSEM_UNLIKELY(x) __builtin_expect(!!(x), 0)

namespace rwsem {

namespace testing {
struct Peer;  // test-only access (lib/rwsem/testing.h)
}  // namespace testing

// Decodes a count word of layout L: "readers=3 writer=none waiters handoff".
template <class L>
std::string describe(typename L::Word c) {
  using B = internal::CountBits<L>;
  std::string s;
  internal::append_format(&s, "%s 0x%0*llx readers=%llu", L::kName, B::kWordBits / 4,
                          static_cast<unsigned long long>(c),
                          static_cast<unsigned long long>(B::reader_count(c)));
  if (!B::is_write_locked(c)) s += " writer=none";
  else if (L::kOwnerInCount)
    internal::append_format(&s, " writer=0x%llx", static_cast<unsigned long long>(L::owner_id(c)));
  else s += " writer=locked";
  if (B::has_waiters(c)) s += " waiters";
  if (B::has_handoff(c)) s += " handoff";
  if (B::has_woken_waiter(c)) s += " woken";
  if (B::is_read_fail(c)) s += " readfail";
  if (c & L::kReservedMask)
    internal::append_format(&s, " reserved=0x%llx",
                            static_cast<unsigned long long>(c & L::kReservedMask));
  return s;
}

namespace internal {

[[noreturn, gnu::cold, gnu::noinline]] inline void refuse_owner_id(const char* layout) {
  debug_fail("this thread's owner id does not fit the count layout", nullptr, std::string(layout));
}

// The write-lock word for layout L of the thread whose record is `me` (the
// caller's, which it has loaded already: one thread-local load per lock
// path). The kernel compresses the task pointer into it with a shift
// (rwsem_owner_count(current), "Merge owner into count on x86-64") and
// computes it once per acquisition ("Remove redundant computation of writer
// lock word"); here it is likewise derived from the record's address, on
// every call (shifts, no load, so nothing sits between the thread-local
// load and the compare-exchange), and it can never outlive the record: a
// thread_local destructor that locks after the record was recycled would
// otherwise lock with another thread's id. A thread whose owner id L
// cannot encode is refused loudly, never truncated.
template <class L, class R>
typename L::Word writer_word_of(const R& me) {
  if constexpr (!L::kOwnerInCount) {
    return L::writer_word(0);
  } else {
    const std::uint64_t id = me.owner_id();
    if (RWSEM_UNLIKELY(!L::encodable(id))) refuse_owner_id(L::kName);
    return L::writer_word(id);
  }
}

}  // namespace internal

// One read/write semaphore over count layout `Layout`, on the platform
// policy `Platform` (lib/rwsem/internal/platform.h): its atomics, fences,
// futex, clocks, scheduler hints and thread records.
//
// Not copyable or movable. No lock or unlock path allocates: waiters live on
// the waiting thread's stack.
template <class Layout, class Platform = internal::NativePlatform>
class BasicRwSemaphore {
  using B = internal::CountBits<Layout>;
  using Waiter = internal::Waiter<Platform>;
  using WaiterType = internal::WaiterType;
  using WakeList = internal::WakeList<Platform>;
  using Record = typename Platform::Record;
  template <class T>
  using Atomic = typename Platform::template Atomic<T>;

 public:
  using layout_type = Layout;
  using Word = typename Layout::Word;
  static constexpr const char* kName = Layout::kName;

  // A layout's count must be a lock-free atomic on the target. Through
  // libatomic every access to the count would take one of its hashed
  // spinlocks, shared with unrelated atomics: a thread preempted inside one
  // stalls every lock and atomic hashed to it, and the lock would no longer
  // be what the layout claims to be. Targets without lock-free 64-bit
  // atomics (32-bit PowerPC) build only the 32-bit layout, their default.
  static_assert(sizeof(Word) != 8 || std::atomic<Word>::is_always_lock_free,
                "rwsem: this count layout needs lock-free 64-bit atomics "
                "(std::atomic<uint64_t>), which " RWSEM_ARCH_NAME " lacks: use Generic32Layout");
  static_assert(sizeof(Word) == 8 || std::atomic<Word>::is_always_lock_free,
                "rwsem: this count layout needs lock-free atomics of its word width, "
                "which " RWSEM_ARCH_NAME " lacks");

  constexpr BasicRwSemaphore() noexcept = default;
  explicit BasicRwSemaphore(const Options& opts) noexcept {
    const auto us = [](std::chrono::nanoseconds d, std::uint32_t max) {
      const auto v = std::chrono::duration_cast<std::chrono::microseconds>(d).count();
      return static_cast<std::uint32_t>(v > max ? max : v);
    };
    if (opts.handoff_timeout.count() >= 0)
      config_ = (config_ & ~kHandoffField) | us(opts.handoff_timeout, kHandoffField - 1);
    if (opts.spin_budget.count() >= 0)
      config_ = (config_ & kHandoffField) | us(opts.spin_budget, kSpinDefault - 1) << kSpinShift;
  }
  // Destroying an unlocked lock with no waiters is allowed even while the
  // thread that released it is still returning from up_read()/up_write()
  // (see "Lifetime"): wait until no up_read() announces it and nobody holds
  // the wait lock.
  ~BasicRwSemaphore() {
    // An up_read() touches the lock after its release only to wake the
    // queue, so a lock whose wait lock was never taken (nobody ever queued)
    // has no such up_read() in flight, and the scan is skipped.
    if (wait_lock_.ever_locked()) {
      internal::UnlockerWait<Platform> wait;
      Platform::for_each_record([this, &wait](Record& r) {
        // acquire pairs with the release stores of up_read(): what the
        // unlocker did to the lock happens before we go on.
        while (r.unlocking.load(std::memory_order_acquire) == this) {
          RWSEM_EVENT_INC(destroy_wait_unlocker);
          wait.once();
        }
      });
    }
    wait_lock_.wait_until_unlocked();
    if (kDebugEnabled) {
      const Word c = count_.load(std::memory_order_relaxed);
      if (c != 0 || !queue_.empty()) debug_fail("rwsem destroyed while locked or waited on", c);
    }
  }
  BasicRwSemaphore(const BasicRwSemaphore&) = delete;
  BasicRwSemaphore& operator=(const BasicRwSemaphore&) = delete;

  // ---- kernel-style API ----------------------------------------------------

  void down_read() { down_read_until_ns(arch::kNoDeadline); }

  [[nodiscard]] bool down_read_trylock() {
    Word c = count_.load(std::memory_order_relaxed);
    while (!B::read_fails(c)) {
      // acquire pairs with the release of the last unlock.
      if (count_.compare_exchange_weak(c, c + B::kReaderBias, std::memory_order_acquire,
                                       std::memory_order_relaxed))
        return true;
    }
    return false;
  }

  [[nodiscard]] bool down_read_timeout(std::chrono::nanoseconds timeout) {
    return down_read_until_ns(internal::deadline_after<Platform>(timeout));
  }

  // Any thread may release a read lock (the kernel's up_read_non_owner()
  // is the same operation here).
  void up_read() {
    // relaxed: a caller that holds a read lock sees its own bias whatever
    // else changed, so this check cannot fire on correct use.
    if (kDebugEnabled) check_reader_exit(count_.load(std::memory_order_relaxed));
    // Announce the release before making it, so that a destructor ordered
    // after the release waits for us to finish (see "Lifetime" at the top).
    // release: a destructor that reads a later announcement of ours (of
    // another lock) must still be ordered after our withdrawal of this one.
    Record& me = Platform::current_thread();
    me.unlocking.store(this, std::memory_order_release);
    // release (kUpReadOrder) pairs with the acquire of the next writer (or
    // of mark_wake()).
    drop_reader_bias<kUpReadOrder>();
    // release pairs with the acquire load in ~BasicRwSemaphore(): our wake-up
    // happens before the lock is destroyed.
    me.unlocking.store(nullptr, std::memory_order_release);
  }

  void down_write() { down_write_until_ns(arch::kNoDeadline); }

  [[nodiscard]] bool down_write_trylock() {
    const Record& me = Platform::current_thread();
    if (!try_write_lock_unqueued(internal::writer_word_of<Layout>(me))) return false;
    set_owner(me);
    return true;
  }

  [[nodiscard]] bool down_write_timeout(std::chrono::nanoseconds timeout) {
    return down_write_until_ns(internal::deadline_after<Platform>(timeout));
  }

  // Releases the write lock. As in the kernel, the caller need not be the
  // thread that took it (debug builds still report that as misuse): the
  // owner's word is read from the count, never assumed to be the caller's.
  void up_write() {
    if (kDebugEnabled) check_write_owner("up_write");
    clear_owner();
    // A thread whose recent unlocks all found the count holding its own
    // writer word and nothing else guesses so again, and releases with one
    // compare-exchange that depends on no load (as down_write() guesses a
    // free count; write_free_streak). A failed guess read the count, and
    // the loop below goes on from what it read.
    Record& me = Platform::current_thread();
    const Word w = internal::writer_word_of<Layout>(me);
    Word c = w;
    // release pairs with the acquire of the next locker. Nothing else is
    // in the count, so there is nobody to wake.
    if (RWSEM_LIKELY(me.unlock_alone_streak >= Record::kGuessAfter) &&
        RWSEM_LIKELY(
            count_.compare_exchange_strong(c, 0, kUpWriteOrder, std::memory_order_relaxed)))
      return;
    c = up_write_look(me, w, c);
    for (;;) {
      // With waiters queued and none on its way (must_wake()), wake them
      // holding the wait lock from before the release on (see "Lifetime"
      // at the top).
      if (RWSEM_UNLIKELY(B::must_wake(c))) return up_write_slow();
      // release pairs with the acquire of the next locker (or of mark_wake()).
      if (RWSEM_LIKELY(count_.compare_exchange_weak(c, c - released_writer_word(c), kUpWriteOrder,
                                                    std::memory_order_relaxed)))
        break;
    }
  }

  // Turns the write lock into a read lock held by the caller and wakes
  // queued readers. Like up_write(), any thread may call it.
  void downgrade_write() {
    if (kDebugEnabled) check_write_owner("downgrade_write");
    clear_owner();
    // relaxed: the writer bits cannot change while the write lock is held.
    const Word w = released_writer_word(count_.load(std::memory_order_relaxed));
    // release (kDowngradeOrder): readers that enter after this see the
    // writer's data; pairs with their acquire fetch_add (or mark_wake()'s).
    // The caller keeps a read lock, so touching the lock after this is safe.
    const Word old = count_.fetch_add(B::kReaderBias - w, kDowngradeOrder);
    if (RWSEM_UNLIKELY(B::has_waiters(old))) {
      WakeList wakes;
      wait_lock_.lock();
      if (!queue_.empty()) mark_wake(WakeType::kReadOwned, wakes);
      wait_lock_.unlock();
    }
  }

  // ---- SharedTimedMutex API ---------------------------------------------

  void lock() { down_write(); }
  [[nodiscard]] bool try_lock() { return down_write_trylock(); }
  void unlock() { up_write(); }
  template <class Rep, class Period>
  [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return down_write_until_ns(internal::deadline_after<Platform>(d));
  }
  template <class Clock, class Duration>
  [[nodiscard]] bool try_lock_until(const std::chrono::time_point<Clock, Duration>& t) {
    return internal::until<Platform>(t, [this](std::int64_t d) { return down_write_until_ns(d); });
  }

  void lock_shared() { down_read(); }
  [[nodiscard]] bool try_lock_shared() { return down_read_trylock(); }
  void unlock_shared() { up_read(); }
  template <class Rep, class Period>
  [[nodiscard]] bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& d) {
    return down_read_until_ns(internal::deadline_after<Platform>(d));
  }
  template <class Clock, class Duration>
  [[nodiscard]] bool try_lock_shared_until(const std::chrono::time_point<Clock, Duration>& t) {
    return internal::until<Platform>(t, [this](std::int64_t d) { return down_read_until_ns(d); });
  }

  // ---- observation ---------------------------------------------------------

  // A racy read of the count, for diagnostics and tests.
  Word count() const { return count_.load(std::memory_order_relaxed); }
  std::string describe() const { return rwsem::describe<Layout>(count()); }
  // Owner id of the writer, or 0 (a racy hint).
  std::uint64_t owner_id() const { return owner_of(count()); }

  struct WaiterInfo {
    bool reader;
    std::uint32_t tid;
    std::int64_t waited_ns;  // on the handoff clock
    bool handoff_set;
    bool sleeping;  // queued and not woken (state kWaiting)
  };
  // Replaces *out with the queue, front first. Takes the wait lock; gives
  // up and returns false (*out empty) after `patience` if someone holds it
  // (a watchdog must not hang).
  bool waiters(std::vector<WaiterInfo>* out,
               std::chrono::nanoseconds patience = std::chrono::seconds(1)) {
    out->clear();
    const std::int64_t give_up = Platform::now_ns() + patience.count();
    while (!wait_lock_.try_lock()) {
      if (Platform::now_ns() > give_up) return false;
      Platform::yield();
    }
    const std::int64_t now = Platform::handoff_now_ns();
    for (Waiter* w = queue_.first(); w != nullptr; w = queue_.after(w))
      out->push_back({w->is_reader(), w->thread->tid, now - w->enqueued_ns, w->handoff_set,
                      w->state.load(std::memory_order_relaxed) == internal::kWaiting});
    wait_lock_.unlock();
    return true;
  }

 private:
  friend struct testing::Peer;
  enum class WakeType { kAny, kWriterUnlock, kReaders, kReadOwned };
  // config_: bits 0-23 handoff timeout in us, bits 24-31 spin budget in us;
  // all-ones in a field means "the process-wide default".
  static constexpr std::uint32_t kHandoffField = (1u << 24) - 1;
  static constexpr int kSpinShift = 24;
  static constexpr std::uint32_t kSpinDefault = 0xFF;

  // Memory orders of the operations that take or release the lock, named
  // once; each use says what it pairs with.
  //
  // down_read's fast-path fetch_add: acquire, pairing with the release of
  // the unlock that freed the lock (kUpReadOrder, kUpWriteOrder,
  // kDowngradeOrder).
  static constexpr std::memory_order kReadLockOrder = std::memory_order_acquire;
  // Taking the write lock installs the writer word. On the merged layout
  // that word is the owner's id, which spinners follow to the owner's
  // thread record: the cmpxchg is also a release, so the record's
  // initialisation happens before any spinner's acquire load of the count
  // that finds the id. The generic layouts publish the id in owner_ instead
  // (set_owner()), and their cmpxchg only acquires.
  static constexpr std::memory_order kWriteLockOrder =
      Layout::kOwnerInCount ? std::memory_order_acq_rel : std::memory_order_acquire;
  // up_read's and up_write's releasing RMWs: release, pairing with the
  // acquire of the next locker (kReadLockOrder, kWriteLockOrder) or of
  // mark_wake()'s grant.
  static constexpr std::memory_order kUpReadOrder = std::memory_order_release;
  static constexpr std::memory_order kUpWriteOrder = std::memory_order_release;
  // downgrade_write's fetch_add: release, pairing with the acquire
  // fetch_add of the readers that join the downgraded lock.
  static constexpr std::memory_order kDowngradeOrder = std::memory_order_release;
  // Loads of the count or owner_ whose owner id a spinner dereferences:
  // acquire, pairing with the release that published the id
  // (kWriteLockOrder on the merged layout, kOwnerStoreOrder otherwise).
  static constexpr std::memory_order kOwnerLoadOrder = std::memory_order_acquire;
  // set_owner()'s store of owner_ (generic layouts): release, publishing
  // our initialised thread record to spinners that load owner_ with
  // kOwnerLoadOrder (thread_record.h, "Publication").
  static constexpr std::memory_order kOwnerStoreOrder = std::memory_order_release;

  std::int64_t handoff_timeout_ns() const {
    const std::uint32_t us = config_ & kHandoffField;
    return us == kHandoffField ? internal::default_handoff_timeout_ns() : std::int64_t{us} * 1000;
  }
  std::int64_t spin_budget_ns() const {
    const std::uint32_t us = config_ >> kSpinShift;
    return us == kSpinDefault ? internal::default_spin_budget_ns() : std::int64_t{us} * 1000;
  }

  // The fast paths. Without a deadline (kNoDeadline) the slow paths cannot
  // fail, and the compiler drops the failure branches.
  bool down_read_until_ns(std::int64_t deadline) {
    // acquire pairs with the release of the unlock that freed the lock.
    const Word c = count_.fetch_add(B::kReaderBias, kReadLockOrder);
    if (RWSEM_LIKELY(!B::read_fails(c))) return true;
    return read_slowpath(c, deadline);
  }

  bool down_write_until_ns(std::int64_t deadline) {
    Record& me = Platform::current_thread();
    const Word w = internal::writer_word_of<Layout>(me);
    // The fast path is the steal (take the lock if nobody holds it and
    // HANDOFF is clear, waiters queued or not), not a compare-exchange that
    // only succeeds from 0: with waiters queued WAITERS is set, that
    // compare-exchange always fails, and every write lock paid the failed
    // RMW and a call into the slow path before the steal that took the
    // lock. But a thread whose recent write locks all found the count at 0
    // (write_free_streak in its record) tries the compare-exchange from 0
    // first: uncontended, that saves the load the compare-exchange would
    // depend on. Both measured in the README, "Where the lock departs from
    // the kernel".
    Word c = 0;
    // acquire pairs with the release of the last unlock (kWriteLockOrder).
    if (RWSEM_UNLIKELY(
            me.write_free_streak < Record::kGuessAfter ||
            !count_.compare_exchange_strong(c, w, kWriteLockOrder, std::memory_order_relaxed)) &&
        !write_steal_or_queue(me, w, c, deadline))
      return false;
    set_owner(me);
    return true;
  }

  // The write fast path's guess of 0 failed (it read `c`), or was not made
  // (then c == 0): load if needed, steal, else queue. A failed guess is an
  // RMW that took the count's line exclusive for nothing, which under
  // contention costs more than the load it saves; hence the streak.
  [[gnu::noinline]] bool write_steal_or_queue(Record& me, Word w, Word c, std::int64_t deadline) {
    c = look_after_guess(me.write_free_streak, 0, c, LockEvent::wlock_guess_miss,
                         LockEvent::wlock_look);
    return try_write_lock_from(w, c) || write_slowpath(w, deadline);
  }

  // up_write()'s guess of the caller's writer word `w` alone failed (`c`
  // is what it read), or was not made (c == w).
  [[gnu::noinline]] Word up_write_look(Record& me, Word w, Word c) {
    return look_after_guess(me.unlock_alone_streak, w, c, LockEvent::wunlock_guess_miss,
                            LockEvent::wunlock_look);
  }

  // A fast path that compare-exchanges from a guessed count `expected`
  // without loading first guessed and failed (then `c` is what its
  // compare-exchange read), or did not guess (then c == expected). Returns
  // the count to go on from, and keeps the thread's `streak` of looks that
  // found the count at `expected` (thread_record.h): a failed guess ends
  // it, and only kGuessAfter such looks in a row start guessing again.
  // Counts the failed guess as `missed`, the look as `looked`: the lock
  // events are how the corpus sees the rule, which no outcome shows.
  Word look_after_guess(std::uint8_t& streak, Word expected, Word c,
                        [[maybe_unused]] LockEvent missed, [[maybe_unused]] LockEvent looked) {
    if (streak >= Record::kGuessAfter) {
      RWSEM_EVENT_INC_VALUE(missed);
      streak = 0;
      return c;
    }
    RWSEM_EVENT_INC_VALUE(looked);
    // relaxed: only a value to go on from; the caller's compare-exchange,
    // which takes the lock (kWriteLockOrder) or releases it (kUpWriteOrder),
    // orders, and re-reads the count if this one is stale.
    c = count_.load(std::memory_order_relaxed);
    if (c == expected) ++streak;
    else if (streak != 0) streak = 0;
    return c;
  }

  // ---- helpers over the count ----------------------------------------------

  // A writer takes a free lock that nobody is owed (no HANDOFF), even with
  // waiters queued: lock stealing. Handoff bounds how long it can go on.
  bool try_write_lock_unqueued(Word w) {
    return try_write_lock_from(w, count_.load(std::memory_order_relaxed));
  }
  // try_write_lock_unqueued() with `c` as the first guess of the count.
  bool try_write_lock_from(Word w, Word c) {
    while (!B::is_locked(c) && !B::has_handoff(c)) {
      // acquire pairs with the release of the last unlock (kWriteLockOrder).
      if (count_.compare_exchange_weak(c, c + w, kWriteLockOrder, std::memory_order_relaxed))
        return true;
    }
    return false;
  }

  // A reader with an empty queue takes the lock unless a writer holds it,
  // HANDOFF is set, or the reader count is full. Wait lock held.
  bool try_read_lock_unqueued() RWSEM_REQUIRES(wait_lock_) {
    wait_lock_.assert_held();
    Word c = count_.load(std::memory_order_relaxed);
    while (!B::is_write_locked(c) && !B::has_handoff(c) && !B::is_read_fail(c)) {
      // acquire pairs with the release of the last unlock.
      if (count_.compare_exchange_weak(c, c + B::kReaderBias, std::memory_order_acquire,
                                       std::memory_order_relaxed))
        return true;
    }
    return false;
  }

  // Takes one reader bias out of the count with order kOrder; if that left
  // the lock free with waiters queued and none woken, wakes the queue.
  // up_read() drops its own bias (release); a reader backs out the
  // transient bias of a failed fast path (relaxed: it touched no protected
  // data, and the release sequence of earlier unlocks continues through
  // this RMW), doing the wake-up that bias hid from the last unlocker.
  template <std::memory_order kOrder>
  void drop_reader_bias() {
    const Word old = count_.fetch_sub(B::kReaderBias, kOrder);
    if (RWSEM_UNLIKELY(B::needs_wake_after_reader_exit(old - B::kReaderBias))) wake();
  }

  // The writer word the owner added: read from the count, so that a release
  // by another thread subtracts the owner's id, not the caller's. Exact:
  // nothing changes the writer bits while the write lock is held.
  static Word released_writer_word(Word c) { return c & Layout::kWriterMask; }

  // up_write() with waiters queued.
  [[gnu::noinline, gnu::cold]] void up_write_slow() {
    WakeList wakes;
    wait_lock_.lock();
    // relaxed: the writer bits cannot change while the write lock is held.
    const Word c = count_.load(std::memory_order_relaxed);
    // release: as in up_write(). The waiters we saw may have timed out
    // and left before we got the wait lock.
    count_.fetch_sub(released_writer_word(c), kUpWriteOrder);
    if (!queue_.empty()) mark_wake(WakeType::kWriterUnlock, wakes);
    wait_lock_.unlock();
  }

  // rwsem_wake(): the lock may have gone free with waiters queued. Called
  // by a thread still inside a lock call (a reader backing out a failed
  // fast path), or by up_read() after its release, under its announcement
  // (see "Lifetime").
  [[gnu::noinline]] void wake() {
    // Corpus builds only: the lock may have gone free, and whoever takes it
    // (or destroys it) runs before we reach the queue.
    Platform::perturb();
    WakeList wakes;
    wait_lock_.lock();
    if (!queue_.empty()) mark_wake(WakeType::kAny, wakes);
    wait_lock_.unlock();
  }  // ~WakeList runs the wake-ups

  // rwsem_mark_wake(): choose whom to wake. Wait lock held; queue not empty.
  //   kAny        the lock may be free: wake the first writer, or grant
  //               readers if no writer holds the lock;
  //   kWriterUnlock  up_write(): as kAny, but a lone reader that is not
  //               yet owed the lock is woken to retry ("Woken reader");
  //   kReaders    a writer is queueing behind a reader-owned lock: grant
  //               queued readers, but wake no writer;
  //   kReadOwned  the caller holds a read lock (downgrade): grant readers
  //               without testing for a writer.
  void mark_wake(WakeType type, WakeList& wakes) RWSEM_REQUIRES(wait_lock_) {
    wait_lock_.assert_held();
    Waiter* first = queue_.first();
    const bool any = type == WakeType::kAny || type == WakeType::kWriterUnlock;
    if (!first->is_reader() && !(any && overdue_reader_behind(first))) {
      if (any && wakes.wake(first)) {
        set_woken();
        RWSEM_EVENT_INC(wake_writer);
      }
      return;
    }
    if (type == WakeType::kWriterUnlock && queue_.is_singular() && !first->rt &&
        !handoff_due(*first)) {
      // "Woken reader": wake it to retry; the lock stays free meanwhile.
      // Only a sleeping reader's `retry` is written: a woken one reads it.
      // relaxed: the state changes only under the wait lock, which we hold.
      if (first->state.load(std::memory_order_relaxed) == internal::kWaiting) {
        first->retry = true;  // before wake()'s release store of kWoken
        wakes.wake(first);
        set_woken();
        RWSEM_EVENT_INC(wake_reader_retry);
      }
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
        if (first->is_reader() && !B::has_handoff(old) && handoff_due(*first)) {
          adjustment -= Layout::kHandoff;
          first->handoff_set = true;
          RWSEM_EVENT_INC(rlock_handoff);
        }
        // relaxed: undoes our own test bias (and maybe sets HANDOFF).
        count_.fetch_sub(adjustment, std::memory_order_relaxed);
        return;
      }
    }

    // Take up to kMaxReadersWakeup readers off the queue, skipping writers
    // (patch 6), in queue order: they are woken in that order, longest
    // waiting first, as the kernel's wake_q does. They are told only after
    // their biases are in the count.
    int woken = 0;
    Waiter* granted = nullptr;
    Waiter* last_granted = nullptr;
    for (Waiter* w = first; w != nullptr && woken < kMaxReadersWakeup;) {
      Waiter* next = queue_.after(w);
      if (w->is_reader()) {
        queue_.remove(w);
        w->wake_next = nullptr;
        if (last_granted != nullptr) {
          last_granted->wake_next = w;
        } else {
          granted = w;
        }
        last_granted = w;
        ++woken;
      }
      w = next;
    }
    RWSEM_EVENT_ADD(wake_reader, static_cast<std::uint64_t>(woken));
    if (!first->is_reader()) RWSEM_EVENT_INC(rlock_overdue);
    // Waiters stay queued (writers we skipped, or readers past the batch
    // limit): the granted readers open read phases ("Read phases").
    const bool phase = !queue_.empty();

    adjustment = static_cast<Word>(Word(woken) * B::kReaderBias - adjustment);
    if (queue_.empty()) adjustment -= Layout::kWaiters;
    // The first waiter was granted; if it owned HANDOFF, clear it (H). (A
    // writer first is not granted, and then HANDOFF is clear:
    // overdue_reader_behind().)
    // Likewise WOKEN, if the first waiter was a reader woken to retry (W).
    const Word now_c = count_.load(std::memory_order_relaxed);
    if (B::has_handoff(now_c)) adjustment -= Layout::kHandoff;
    if (first->is_reader() && B::has_woken_waiter(now_c)) adjustment -= Layout::kWoken;
    // relaxed: the granted readers synchronise through the hand-over.
    if (adjustment != 0) count_.fetch_add(adjustment, std::memory_order_relaxed);
    // Now grant: a granted reader may return and up_read() at once, so its
    // bias had to be in the count first (the kernel's order, too).
    while (granted != nullptr) {
      Waiter* const next = granted->wake_next;  // granted may vanish below
      granted->granted_in_phase = phase;  // before wake()'s release store of kWoken
      wakes.wake(granted);
      granted = next;
    }
  }

  // W: mark_wake() has just woken the first waiter to retry; until it
  // retries, unlocks need not wake anyone (must_wake()). relaxed: the
  // retry reads the count under the wait lock; an unlock uses the bit only
  // to skip a wake-up that the retry makes unnecessary (it sees the lock as
  // the unlock left it: both are RMWs of the count).
  void set_woken() RWSEM_REQUIRES(wait_lock_) {
    count_.fetch_or(Layout::kWoken, std::memory_order_relaxed);
  }

  // Has `w` waited its handoff timeout at `now` (on the handoff clock)?
  static bool handoff_due(const Waiter& w, std::int64_t now = Platform::handoff_now_ns()) {
    return now > w.handoff_deadline_ns;
  }

  // Wait-bound rule 4 ("Wait bounds" at the top): has a reader queued
  // behind the first waiter, a writer, waited its handoff timeout while
  // HANDOFF is still clear? Wait lock held.
  //
  // The queue is in arrival order, so the deadlines grow along it (give or
  // take the moment between a waiter's clock read and its push_back): the
  // walk stops at the first waiter not yet due, which is usually the first
  // writer itself. A walk to the first reader instead took up to a queue's
  // length of cache misses under the wait lock on every wake-up of a
  // writer-only queue (writers only at 64 threads lost about 6%).
  bool overdue_reader_behind(const Waiter* first) const RWSEM_REQUIRES(wait_lock_) {
    if (queue_.is_singular()) return false;  // nobody behind the first waiter: no clock read
    // relaxed: HANDOFF changes only under the wait lock, which we hold (H).
    if (B::has_handoff(count_.load(std::memory_order_relaxed))) return false;
    const std::int64_t now = Platform::handoff_now_ns();
    for (const Waiter* w = first; w != nullptr && handoff_due(*w, now); w = queue_.after(w)) {
      if (w->is_reader()) return true;
    }
    return false;
  }

  // rwsem_try_write_lock(): a queued writer takes the lock, or sets HANDOFF
  // when it is owed the lock. Wait lock held.
  bool try_write_lock(Waiter& self, Word w) RWSEM_REQUIRES(wait_lock_) {
    wait_lock_.assert_held();
    Waiter* first = queue_.first();
    Word c = count_.load(std::memory_order_relaxed);
    Word next;
    bool locked, claim;
    do {
      const bool has_handoff = B::has_handoff(c);
      // H: HANDOFF belongs to the first waiter; nobody else may take the lock.
      if (has_handoff && &self != first) return false;
      // W: only the first waiter can be the one woken to retry. It is retrying
      // now, so from this update of the count on an unlock must wake it.
      next = &self == first ? c & ~Layout::kWoken : c;
      locked = B::is_locked(c);
      // Waited long enough (or real-time): claim the lock for the first
      // waiter. Our deadline has passed, so the first waiter's has too.
      claim = locked && !has_handoff && (self.rt || handoff_due(self));
      if (claim) {
        next |= Layout::kHandoff;
      } else if (!locked) {
        next = (next | w) & ~Layout::kHandoff;
        if (queue_.is_singular()) next &= ~Layout::kWaiters;
      }
      if (next == c) return false;  // held, nothing to claim or to clear
      // acquire pairs with the release of the unlock that freed the lock
      // (kWriteLockOrder).
    } while (!count_.compare_exchange_weak(c, next, kWriteLockOrder, std::memory_order_relaxed));
    if (locked) {
      if (claim) {
        first->handoff_set = true;
        RWSEM_EVENT_INC(wlock_handoff);
      }
      return false;
    }
    queue_.remove(&self);
    return true;
  }

  // out_nolock: a timed-out waiter leaves the queue. Wait lock held.
  void remove_waiter(Waiter& self, WakeList& wakes) RWSEM_REQUIRES(wait_lock_) {
    wait_lock_.assert_held();
    const bool was_first = queue_.first() == &self;
    queue_.remove(&self);
    // W needs nothing here: a waiter woken to retry leaves only after its
    // retry, which cleared WOKEN.
    if (queue_.empty()) {
      // relaxed: flag bookkeeping; nothing is published.
      count_.fetch_and(static_cast<Word>(~(Layout::kWaiters | Layout::kHandoff)),
                       std::memory_order_relaxed);
      return;
    }
    if (!was_first) return;
    if (self.handoff_set)  // relaxed: flag bookkeeping under the wait lock (H)
      count_.fetch_and(static_cast<Word>(~Layout::kHandoff), std::memory_order_relaxed);
    // The new front of the queue may be able to run now (a reader behind a
    // writer that gave up on a reader-owned lock, or anyone on a free lock).
    mark_wake(WakeType::kAny, wakes);
  }

  // ---- optimistic spinning (rwsem series patches 4, 5, 7, 8) ----------------------------
  //
  // A slow-path locker first spins, if the lock lets it, trying the lock
  // whenever the owner changes, instead of sleeping at once. Only the head
  // of the spin queue (osq_) spins on the count; the others spin on their
  // own queue nodes. Every spin is bounded by the spin budget
  // (config.h); a writer spinning on a reader-owned lock also by the series'
  // reader-owned limit.

  enum OwnerState : int {
    kOwnerNull = 1,  // nobody holds the lock
    kOwnerWriter = 2,  // a writer holds it (or the owner changed)
    kOwnerReader = 4,  // readers (may) hold it
    kOwnerNonSpinnable = 8,  // stop: owner parked, budget spent, handoff...
  };
  static constexpr int kOwnerSpinnable = kOwnerNull | kOwnerWriter | kOwnerReader;

  bool spinning_enabled() const { return kSpinCompiledIn && spin_budget_ns() > 0; }

  // rwsem_can_spin_on_owner(): is spinning worth starting at all?
  //
  // Not while anyone sleeps in the queue (WAITERS; not a kernel rule). The
  // kernel spins while the owner is on a CPU, which it can see; here a
  // sleeping waiter is the best sign user space has that the lock has more
  // takers than CPUs to run them (at most CPUs - 1 may spin, and a spin
  // gives up only when the owner parks, HANDOFF is set or the budget is
  // spent). A spinner then competes for a CPU with the owner it waits for
  // and with the waiter an unlock just woke, and the lock it takes on
  // release is one the woken waiter retries for in vain. Lockers that find
  // WAITERS set still take a free lock (the fast paths, reader stealing,
  // try_write_lock_unqueued()) and otherwise queue. A spin already under
  // way when WAITERS is set goes on under the other rules. Measured effect:
  // README, "Where the lock departs from the kernel".
  bool can_spin_on_owner() const {
    // acquire (kOwnerLoadOrder): the owner's record is initialised before we
    // read its parked flag (thread_record.h, "Publication").
    const Word c = count_.load(kOwnerLoadOrder);
    if (B::has_waiters(c)) return false;
    if (B::is_write_locked(c)) {
      const std::uint64_t id = owner_of(c);
      return id == 0 ||
             !internal::thread_from_owner_id<Platform>(id)->parked.load(std::memory_order_relaxed);
    }
    return !(B::has_readers(c) && is_nonspinnable());
  }

  // A waiter is owed the lock: no spinner can win it (patch 4), and a
  // spinner that keeps polling only takes CPU time from the owner and the
  // waiter. The kernel stops at the owner change; this port stops as soon
  // as it sees the bit.
  bool stop_spinning_for_handoff(Word c) const {
    if (RWSEM_LIKELY(!B::has_handoff(c))) return false;
    RWSEM_EVENT_INC(opt_handoff_stop);
    return true;
  }

  // rwsem_spin_on_owner(): spins while the same writer holds the lock and
  // runs; then says what the lock looks like now.
  OwnerState spin_on_owner(std::int64_t budget_end, bool rt,
                           internal::Backoff<Platform>& backoff) const {
    Word c = count_.load(kOwnerLoadOrder);
    if (B::is_write_locked(c)) {
      const std::uint64_t id = owner_of(c);
      // An RT thread never spins on an owner it cannot see (patch 5).
      if (id == 0 && rt) return kOwnerNonSpinnable;
      // Type-stable records: safe to read even if the owner just left.
      const typename Platform::Record* owner =
          id != 0 ? internal::thread_from_owner_id<Platform>(id) : nullptr;
      for (unsigned i = 1;; ++i) {
        if (stop_spinning_for_handoff(c)) return kOwnerNonSpinnable;
        if (owner != nullptr && owner->parked.load(std::memory_order_relaxed))
          return kOwnerNonSpinnable;
        if ((i & 15) == 0 && Platform::now_ns() > budget_end) return kOwnerNonSpinnable;
        backoff.pause();
        c = count_.load(kOwnerLoadOrder);
        if (!B::is_write_locked(c) || owner_of(c) != id) break;
      }
    }
    if (B::is_write_locked(c)) return kOwnerWriter;
    if (stop_spinning_for_handoff(c)) return kOwnerNonSpinnable;
    if (B::has_readers(c)) return is_nonspinnable() ? kOwnerNonSpinnable : kOwnerReader;
    return kOwnerNull;
  }

  // rwsem_rspin_threshold(): how long a writer may spin on readers (patch 8).
  // With WAITERS set no new reader can join, so the wait is the time the
  // present readers need to leave: 10 us + 0.5 us per reader (counting up to
  // 30). Without WAITERS readers can keep joining: 25 us.
  std::int64_t reader_spin_deadline() const {
    const Word c = count_.load(std::memory_order_relaxed);
    std::int64_t readers = static_cast<std::int64_t>(B::reader_count(c));
    if (readers > 30) readers = 30;
    return Platform::now_ns() + (B::has_waiters(c) ? 10000 + readers * 500 : 25000);
  }

  // May a reader that is not queued join the readers in `c`?
  //
  // Rule (the kernel's "don't steal if the lock is very likely owned by
  // readers", rwsem_down_read_slowpath() since 5.11): while waiters are
  // queued, a reader takes a lock only if nobody holds it. Joining a
  // reader-owned lock past a queued writer is what lets overlapping readers
  // keep the count above zero for ever: the writer is never woken and never
  // gets to set HANDOFF. Taking a *free* lock is a steal that the queued
  // writer's handoff bounds. Without waiters readers join freely, as the
  // fast path does.
  static bool reader_may_join(Word c) {
    if (B::is_write_locked(c) || B::has_handoff(c) || B::is_read_fail(c)) return false;
    return !(B::has_waiters(c) && B::has_readers(c));
  }

  // May a reader within its read phase on this lock rejoin the readers in
  // `c` past queued waiters ("Read phases" at the top)? Only while more
  // readers hold the lock than could be running beside this one: then some
  // holder waits for a CPU, which is the case the phase is for.
  //
  // The phase's end is looked at on its first rejoin and on every
  // kReadPhaseClockStride-th one after: a clock read costs more than the
  // lock and unlock it would allow (33 ns for clock_gettime on a 2-core
  // VM, against about 10 for an uncontended read lock and unlock), and in
  // scenario 1 from 16 threads up most read locks are rejoins. A phase may
  // so run a few rejoins past its end; HANDOFF, which bounds the writers'
  // wait, is still looked at on every one. A phase found over is dropped,
  // so its clock is not read again.
  bool may_rejoin_read_phase(Word c) const {
    auto& me = Platform::current_thread();
    if (me.read_phase_lock != this) return false;  // most failed readers: no phase here
    if (B::is_write_locked(c) || B::has_handoff(c) || B::is_read_fail(c)) return false;
    if (B::reader_count(c) <= Platform::max_spinners()) return false;
    if (me.read_phase_rejoins++ % kReadPhaseClockStride != 0) return true;
    if (Platform::handoff_now_ns() < me.read_phase_end_ns) return true;
    me.read_phase_lock = nullptr;
    return false;
  }

  // A reader granted by a wake-up that left waiters queued opens its read
  // phase on this lock.
  void open_read_phase(const Waiter& self) {
    if (!self.granted_in_phase) return;
    auto& me = Platform::current_thread();
    me.read_phase_lock = this;
    me.read_phase_end_ns = Platform::handoff_now_ns() + handoff_timeout_ns() / kReadPhaseDivisor;
    me.read_phase_rejoins = 0;
  }

  // A spinning reader takes the lock if reader_may_join() allows it.
  bool try_read_lock_spinning() {
    Word c = count_.load(std::memory_order_relaxed);
    if (!reader_may_join(c)) return false;
    // acquire pairs with the release of the unlock that freed the lock.
    c = count_.fetch_add(B::kReaderBias, std::memory_order_acquire);
    if (reader_may_join(c)) return true;
    drop_reader_bias<std::memory_order_relaxed>();
    return false;
  }

  // rwsem_optimistic_spin(). `w` is the writer word, or 0 for a reader.
  // Spins until `deadline` (the caller's, on Platform::now_ns()'s clock) at
  // the latest.
  bool optimistic_spin(Word w, std::int64_t deadline) {
    const bool wlock = w != 0;
    std::int64_t budget_end = Platform::now_ns() + spin_budget_ns();
    if (budget_end > deadline) budget_end = deadline;
    if (!osq_.lock(Platform::current_thread().osq, budget_end, Platform::max_spinners())) {
      RWSEM_EVENT_INC(opt_fail);
      return false;
    }
    const bool rt = Platform::current_thread_is_realtime();
    int prev = kOwnerNull;
    unsigned loop = 0;  // iterations on a reader-owned lock
    unsigned spins = 0;  // all iterations; the clock is read every 16th
    std::int64_t reader_deadline = 0;
    bool taken = false;
    internal::Backoff<Platform> backoff(internal::kSpinFirstPauses);
    for (;;) {
      const OwnerState state = spin_on_owner(budget_end, rt, backoff);
      if (!(state & kOwnerSpinnable)) break;
      taken = wlock ? try_write_lock_unqueued(w) : try_read_lock_spinning();
      if (taken) break;
      // A reader never waits on a reader-owned lock with waiters queued
      // (reader_may_join()): it queues behind them instead.
      if (!wlock && state == kOwnerReader && B::has_waiters(count_.load(std::memory_order_relaxed)))
        break;
      if (wlock && state == kOwnerReader) {
        if (prev != kOwnerReader) {
          if (is_nonspinnable()) break;
          reader_deadline = reader_spin_deadline();
          loop = 0;
        } else if ((++loop & 15) == 0 && Platform::now_ns() > reader_deadline) {
          set_nonspinnable();
          RWSEM_EVENT_INC(opt_nospin);
          break;
        }
      }
      if (state != kOwnerWriter) {
        if ((++spins & 15) == 0 && Platform::now_ns() > budget_end) break;
        // An RT thread does not spin on readers or on a vanished owner; it
        // retries once after a writer left, in case a writer stole the lock.
        if (rt && prev != kOwnerWriter) break;
      }
      prev = state;
      backoff.pause();
    }
    osq_.unlock(Platform::current_thread().osq);
    if (taken) {
      if (wlock) RWSEM_EVENT_INC(opt_wlock);
      else RWSEM_EVENT_INC(opt_rlock);
    } else {
      RWSEM_EVENT_INC(opt_fail);
    }
    return taken;
  }

  // ---- slow paths ------------------------------------------------------------

  // A reader that got the lock outside the queue (by spinning or stealing)
  // opportunistically lets queued readers join it; an unlock would
  // otherwise wake them later. Caller holds a read lock.
  //
  // Not while WOKEN is set: then the first waiter will retry by itself
  // (invariant W); if it is a writer, a reader wake-up (kReadOwned) wakes
  // nobody behind it; if it is a reader woken to retry, its retry lets
  // those behind it in. That is the usual case: a reader steals a free lock with
  // waiters queued mostly between the last unlock waking the front writer
  // and that writer's retry. Trying the wait lock there is an RMW on the
  // count's cache line that grants nothing.
  void wake_readers_behind_us() {
    // relaxed: a hint; mark_wake() decides under the wait lock. A stale
    // WOKEN only delays the grant to the last reader's unlock, which wakes
    // the queue whenever WOKEN is clear (must_wake()).
    const Word c = count_.load(std::memory_order_relaxed);
    if (B::has_waiters(c) && !B::has_woken_waiter(c) && wait_lock_.try_lock()) {
      WakeList wakes;
      if (!queue_.empty()) mark_wake(WakeType::kReadOwned, wakes);
      wait_lock_.unlock();
    }
  }

  // down_read() failed: `c` is what its fetch_add returned; its bias is
  // still in the count.
  [[gnu::noinline]] bool read_slowpath(Word c, std::int64_t deadline) {
    // Reader lock stealing (LINEAGE.md): the fast path failed only because
    // waiters are queued, and nobody holds the lock. Our bias is already in
    // the count, added by the fast path's acquire fetch_add (which pairs with
    // the release of the unlock that freed the lock), so we hold the read
    // lock now; reader_may_join() is the rule for when keeping it is a
    // bounded steal (HANDOFF ends it). Without this, a reader that finds
    // WAITERS set may only enter through the queue while writers steal
    // freely, and readers starve under a writer stream.
    if (reader_may_join(c) && !B::is_locked(c)) {
      RWSEM_EVENT_INC(rlock_steal);
      wake_readers_behind_us();
      return true;
    }
    // Within its read phase a granted reader rejoins the readers of its
    // batch; the same acquire fetch_add holds the lock. Unlike a steal it
    // wakes nobody: as in the kernel, only the first reader in lets the
    // queued readers follow it (rwsem_down_read_slowpath(), rcnt == 1), and
    // a rejoin always finds other holders. Trying the wait lock here would
    // cost an RMW on the count's cache line per rejoin, for a queue whose
    // front is almost always the writer that the phase overtakes, which a
    // reader wake-up never wakes.
    if (RWSEM_UNLIKELY(may_rejoin_read_phase(c))) {
      RWSEM_EVENT_INC(rlock_phase);
      return true;
    }
    // Back the bias out before queueing, so that it blocks no writer while
    // we wait for the wait lock ("Stop active read lock ASAP"; patch 10 for READFAIL).
    drop_reader_bias<std::memory_order_relaxed>();
    if (deadline <= Platform::now_ns()) {
      RWSEM_EVENT_INC(rlock_fail);
      return false;
    }
    // Spin on a writer owner (patch 7), unless there are too many readers.
    if (!B::is_read_fail(c) && spinning_enabled() && can_spin_on_owner() &&
        optimistic_spin(0, deadline)) {
      wake_readers_behind_us();
      return true;
    }

    const std::int64_t now = Platform::handoff_now_ns();
    Waiter self(WaiterType::kReader, now, handoff_timeout_ns());
    self.rt = Platform::current_thread_is_realtime();  // granted, never woken to retry
    WakeList wakes;
    wait_lock_.lock();
    const bool first = queue_.empty();
    if (first) {
      if (try_read_lock_unqueued()) {
        wait_lock_.unlock();
        RWSEM_EVENT_INC(rlock_fast);
        return true;
      }
      // relaxed: either an unlock's RMW comes after this in the count's
      // order and sees WAITERS (and then wakes us under the wait lock), or
      // it comes before and we see its result below.
      c = count_.fetch_or(Layout::kWaiters, std::memory_order_relaxed) | Layout::kWaiters;
    } else {
      c = count_.load(std::memory_order_relaxed);
    }
    // Armed before any waker can see us (thread_record.h, parking).
    internal::arm(*self.thread);
    queue_.push_back(&self);
    // Nobody else will wake us soon, so we do (this grants ourselves):
    //  - the lock went free before anyone saw WAITERS;
    //  - we are the first waiter and only readers hold the lock. The try
    //    above saw a writer, which has since released or downgraded (or
    //    the try read a value older than the fetch_or's), and the readers
    //    now holding the lock would wake us only when the last one leaves.
    //    We may join them: nobody is queued ahead (the kernel's
    //    rwsem_down_read_slowpath(): "wake our own waiter to join the
    //    existing active readers").
    if (first ? !B::is_write_locked(c) : !B::is_locked(c)) mark_wake(WakeType::kAny, wakes);
    wait_lock_.unlock();
    wakes.run();

    for (;;) {
      const bool woken = self.sleep_while_waiting(deadline);
      if (woken) RWSEM_EVENT_INC(sleep_reader);
      // A grant: our bias is in the count and we are off the queue (the
      // acquire load of kWoken pairs with the waker's release store, which
      // came after it wrote `retry`).
      if (woken && !self.retry) break;
      wait_lock_.lock();
      if (self.next == nullptr) {  // granted after all (off the queue)
        wait_lock_.unlock();
        break;
      }
      // relaxed, load and store: the state changes only under the wait lock,
      // which we hold (a retry wake-up publishes nothing; the count's
      // compare-exchange below does the synchronising).
      if (self.state.load(std::memory_order_relaxed) == internal::kWoken) {
        // Woken to retry ("Woken reader"). Re-arm first: from our retry's
        // update of the count on, an unlock must wake us again (W).
        self.state.store(internal::kWaiting, std::memory_order_relaxed);
        self.retry = false;
        if (try_read_lock_queued(self)) {
          // Readers queued behind us may follow (the kernel's first reader in).
          if (!queue_.empty()) mark_wake(WakeType::kReadOwned, wakes);
          wait_lock_.unlock();
          wakes.run();
          RWSEM_EVENT_INC(rlock_retry);
          break;
        }
        internal::arm(*self.thread);
        if (Platform::now_ns() < deadline) {
          wait_lock_.unlock();
          continue;
        }
      }
      // Timed out, still queued and not woken (or our last retry failed).
      remove_waiter(self, wakes);
      wait_lock_.unlock();
      wakes.run();
      RWSEM_EVENT_INC(rlock_fail);
      return false;
    }
    open_read_phase(self);
    RWSEM_EVENT_INC(rlock);
    return true;
  }

  // A reader woken to retry ("Woken reader") takes the lock itself, as a woken
  // writer does in try_write_lock(): it joins unless a writer holds the lock or
  // READFAIL is set. HANDOFF, if set, is its own (it is the first waiter, H: a
  // waker found a writer had stolen the lock once this reader was due), and
  // taking the lock clears it, as a grant does. The same RMW clears WOKEN (W).
  // Failing, it sleeps again, and the next unlock wakes it (WOKEN is clear), or
  // grants it the lock once its handoff deadline has passed: the wait bound
  // stays the grant's. Wait lock held.
  bool try_read_lock_queued(Waiter& self) RWSEM_REQUIRES(wait_lock_) {
    wait_lock_.assert_held();
    Word c = count_.load(std::memory_order_relaxed);
    bool take;
    Word next;
    do {
      take = !B::is_write_locked(c) && !B::is_read_fail(c);
      next = c & ~Layout::kWoken;
      if (take) {
        next = (next & ~Layout::kHandoff) + B::kReaderBias;
        if (queue_.is_singular()) next &= ~Layout::kWaiters;
      }
      if (next == c) return false;
      // acquire pairs with the release of the unlock that freed the lock.
    } while (!count_.compare_exchange_weak(c, next, std::memory_order_acquire,
                                           std::memory_order_relaxed));
    if (!take) return false;
    queue_.remove(&self);
    return true;
  }

  // down_write()'s steal failed: the lock is held, or HANDOFF is set.
  // The fast path tried the steal before this reads the clock: a clock read
  // costs as much as a lock and unlock (33 ns for clock_gettime on a 2-core
  // VM). A try with no time left (try_lock_for(0), a past time point) makes
  // that one look only: no spinning, no queueing.
  [[gnu::noinline]] bool write_slowpath(Word w, std::int64_t deadline) {
    if (deadline <= Platform::now_ns()) {
      RWSEM_EVENT_INC(wlock_fail);
      return false;
    }
    if (spinning_enabled() && can_spin_on_owner() && optimistic_spin(w, deadline)) return true;
    if (try_write_lock_unqueued(w)) {
      RWSEM_EVENT_INC(wlock_steal);
      return true;
    }
    if (deadline <= Platform::now_ns()) {
      RWSEM_EVENT_INC(wlock_fail);
      return false;
    }

    Waiter self(WaiterType::kWriter, Platform::handoff_now_ns(), handoff_timeout_ns());
    self.rt = Platform::current_thread_is_realtime();
    // Poll before parking (kWaiterPolls): not for a real-time writer, which
    // must not hold a CPU its waker may need, nor where nothing may spin.
    const bool poll = !self.rt && spinning_enabled() && Platform::max_spinners() > 0;
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
      // Re-arm: a wake-up that has been delivered is consumed. relaxed: the
      // waker stored kWoken under the wait lock, which we hold.
      if (self.state.load(std::memory_order_relaxed) == internal::kWoken)
        self.state.store(internal::kWaiting, std::memory_order_relaxed);
      if (try_write_lock(self, w)) break;
      // Armed before the wait lock is dropped, so a waker sees it.
      internal::arm(*self.thread);
      // The handoff timer. Rule: a queued writer whose handoff deadline is
      // still ahead sleeps at most until then, wakes and retries, and
      // try_write_lock() then sets HANDOFF for the first waiter if the lock
      // is still held. The kernel relies on being woken by an unlock
      // instead; here readers that keep overlapping (or a preempted last
      // reader) could delay that unlock without bound, so the bound on a
      // writer's wait must not depend on it.
      std::int64_t sleep_until = deadline;
      bool timer = false;
      if (!self.handoff_set) {
        const std::int64_t left = self.handoff_deadline_ns - Platform::handoff_now_ns();
        if (left > 0) {
          const std::int64_t t = Platform::now_ns() + left;
          if (t < sleep_until) {
            sleep_until = t;
            timer = true;
          }
        }
      }
      wait_lock_.unlock();
      wakes.run();
      const bool woken = self.sleep_while_waiting(sleep_until, poll);
      if (woken) RWSEM_EVENT_INC(sleep_writer);
      wait_lock_.lock();
      if (!woken && self.state.load(std::memory_order_relaxed) == internal::kWaiting) {
        if (timer && Platform::now_ns() < deadline) {
          RWSEM_EVENT_INC(wlock_handoff_timer);
          continue;  // retry: try_write_lock() may now set HANDOFF
        }
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
    RWSEM_EVENT_INC(wlock);
    return true;
  }

  // ---- debug -----------------------------------------------------------------

  [[noreturn]] void debug_fail(const char* what, Word c) const {
    internal::debug_fail(what, this, rwsem::describe<Layout>(c));
  }

  // Debug checks of the count a reader is about to leave (or just left).
  void check_reader_exit(Word c) const {
    if (B::is_write_locked(c) || !B::has_readers(c) || !B::is_consistent(c))
      debug_fail(!B::is_consistent(c)    ? "inconsistent count"
                 : B::is_write_locked(c) ? "up_read on a write-locked rwsem"
                                         : "up_read on a rwsem with no "
                                           "readers (double unlock?)",
                 c);
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
    if (owner_of(c) != Platform::current_thread().owner_id())
      debug_fail(op[0] == 'u' ? "up_write by a thread that is not the owner"
                              : "downgrade_write by a thread that is not the "
                                "owner",
                 c);
  }

  // ---- owner word -------------------------------------------------------------
  //
  // owner_ = (owner id << 1) | kNonSpinnable. The generic layouts keep the
  // writer's id here (written right after the write lock is taken, cleared
  // right before it is released); the merged layout reads the id from the
  // count and uses owner_ only for kNonSpinnable. kNonSpinnable is set by a
  // writer that spun on a reader-owned lock past its limit (patch 8) and
  // stops all spinning on a reader-owned lock until a writer owns it again.
  // The owner word is a hint for spinning, debug checks and diagnostics,
  // never what orders one critical section before the next. Only the
  // publication of the owner id is ordered (set_owner(), owner_of()), so
  // that a spinner dereferences an initialised record; the rest is relaxed.
  static constexpr std::uintptr_t kNonSpinnable = 1;

  // `me` is the caller's record (the new owner's).
  void set_owner(const Record& me) {
    if constexpr (Layout::kOwnerInCount) {
      if (owner_.load(std::memory_order_relaxed) != 0) owner_.store(0, std::memory_order_relaxed);
    } else {
      // release (kOwnerStoreOrder): publishes our initialised thread record
      // to spinners, which load owner_ with kOwnerLoadOrder (thread_record.h,
      // "Publication").
      owner_.store(static_cast<std::uintptr_t>(me.owner_id() << 1), kOwnerStoreOrder);
    }
  }
  void clear_owner() {
    if constexpr (!Layout::kOwnerInCount) owner_.store(0, std::memory_order_relaxed);
  }
  std::uint64_t owner_of(Word c) const {
    if constexpr (Layout::kOwnerInCount) return Layout::owner_id(c);
    return owner_.load(kOwnerLoadOrder) >> 1;
  }
  bool is_nonspinnable() const {
    return (owner_.load(std::memory_order_relaxed) & kNonSpinnable) != 0;
  }
  void set_nonspinnable() { owner_.fetch_or(kNonSpinnable, std::memory_order_relaxed); }

  // ---- state -------------------------------------------------------------------

  Atomic<Word> count_{0};
  Atomic<std::uintptr_t> owner_{0};
  internal::WaitQueue<Platform> queue_ RWSEM_GUARDED_BY(wait_lock_);
  internal::SpinQueue<Platform> osq_;  // optimistic spinners
  internal::BasicWaitLock<Platform> wait_lock_;
  std::uint32_t config_ = ~0u;
};

using RwSemaphore = BasicRwSemaphore<DefaultLayout>;

}  // namespace rwsem

#endif  // RWSEM_LIB_RWSEM_H_
