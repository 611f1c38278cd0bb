// The per-thread record every thread that takes a lock gets.
//
// Its address, shifted right by 6, is the thread's owner id: the value the
// merged-owner layout keeps in the count and the other layouts keep in the
// owner field. A spinner follows an owner id back to the record to see
// whether the owner is parked in one of our waits.
//
// The record is a template on the platform policy P (platform.h), like
// every lock: its flags are P's atomics, and P::current_thread() finds the
// calling thread's record. ThreadRecord (platform.h) is the native one,
// and what follows about the pool holds for it (runtime.cc); another policy
// keeps its own records and must give them the same two properties:
// type-stable, and at an address that round-trips through an owner id.
//
// Native records are type-stable: they come from a pool that is never freed,
// and a thread's record returns to the pool when the thread exits. A spinner
// that read an owner id just before that owner left (and even exited)
// therefore still reads a valid record; at worst it looks at the wrong
// thread's flags for a moment, which only affects a spin decision. (The
// kernel gets the same guarantee for task_struct from RCU.)
//
// A native record goes back to the pool from a pthread key destructor,
// which glibc runs after every C++ thread_local destructor of the thread: a
// thread_local object whose destructor takes a lock still uses the
// thread's own record, so no two live threads ever share an owner id.
//
// Publication: a thread initialises its record before it can own any lock,
// and a new owner publishes its id with a release operation (the write
// lock's cmpxchg on the merged layout and the mutex, the owner-field store
// on the generic layouts). A spinner that reads an owner id with acquire
// and then reads the record's `parked` flag therefore reads an initialised
// record.
//
// Parking (park()/unpark() below). Every sleep of a lock waiter is a futex
// wait on the waiter's own record's `sleep` word, never on memory of the
// lock or of a stack frame. A waker therefore never has to wait for, or
// keep alive, anything of the wakee's, and the wakee never waits for its
// waker: it may return as soon as it sees its grant, while the waker is
// still on its way to unpark() it (a stale wake-up is harmless, see below).
#ifndef RWSEM_LIB_INTERNAL_THREAD_RECORD_H_
#define RWSEM_LIB_INTERNAL_THREAD_RECORD_H_

#include <atomic>
#include <cerrno>
#include <cstdint>

#include "lib/rwsem/internal/osq.h"

namespace rwsem {
namespace internal {

inline constexpr int kOwnerIdShift = 6;

template <class P>
struct alignas(64) BasicThreadRecord {
  // The thread's owner id: the record's address >> kOwnerIdShift (never 0;
  // thread_from_owner_id() inverts it). Computed, not stored: a lock path
  // has the record's address in a register already (writer_word_of() in
  // rwsem.h).
  std::uint64_t owner_id() const {
    return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(this)) >> kOwnerIdShift;
  }
  std::uint32_t tid = 0;       // kernel thread id, for diagnostics
  // True while the thread sleeps in one of our futex waits. relaxed: a hint
  // for spinners, which re-check the lock word anyway.
  typename P::template Atomic<bool> parked{false};
  BasicOsqNode<P> osq;         // this thread's node in spin queues
  // The per-thread sleep word (the kernel's task state): kAwake or kAsleep.
  // See park() / unpark().
  typename P::template Atomic<std::uint32_t> sleep{0};
  static constexpr std::uint32_t kAwake = 0, kAsleep = 1;
  // The read phase this thread may rejoin (rwsem.h, "Read phases"): the
  // lock whose wake-up granted it a read lock, the phase's end on the
  // handoff clock, and the rejoins so far (the clock is read on every
  // kReadPhaseClockStride-th). Only the thread itself reads or writes them.
  const void* read_phase_lock = nullptr;
  std::int64_t read_phase_end_ns = 0;
  unsigned read_phase_rejoins = 0;
  // How many of this thread's write fast paths in a row found the count at
  // 0 (free, nobody queued), and how many of its up_write() calls in a row
  // found its own writer word alone in the count, each up to kGuessAfter;
  // from there on the next one compare-exchanges from that value without
  // loading first (rwsem.h, down_write_until_ns() and up_write()). Only the
  // thread itself reads or writes them.
  static constexpr std::uint8_t kGuessAfter = 8;
  std::uint8_t write_free_streak = kGuessAfter;
  std::uint8_t unlock_alone_streak = kGuessAfter;
  // The lock this thread is releasing a read lock of, from before its
  // releasing RMW until it is done touching the lock (rwsem.h, "Lifetime"),
  // else nullptr. Written only by the thread itself; a destructor reads it
  // to wait for the release to finish.
  typename P::template Atomic<const void*> unlocking{nullptr};
};

// The record an owner id names. Round-trips with BasicThreadRecord::owner_id().
template <class P>
inline BasicThreadRecord<P>* thread_from_owner_id(std::uint64_t id) {
  return reinterpret_cast<BasicThreadRecord<P>*>(static_cast<std::uintptr_t>(id << kOwnerIdShift));
}

// Marks the calling thread parked for the lifetime of the guard.
template <class P>
class ParkedScope {
 public:
  ParkedScope() : r_(P::current_thread()) { r_.parked.store(true, std::memory_order_relaxed); }
  ~ParkedScope() { r_.parked.store(false, std::memory_order_relaxed); }
  ParkedScope(const ParkedScope&) = delete;
  ParkedScope& operator=(const ParkedScope&) = delete;

 private:
  typename P::Record& r_;
};

// ---- parking -----------------------------------------------------------------
//
// The waiter arms its sleep word *before* it looks at its wake-up condition
// for the last time, and the waker changes the condition *before* it reads
// the sleep word:
//
//     waiter                              waker
//     [S] sleep = kAsleep      (arm)      [S] condition = "woken"
//     fence(seq_cst)                      fence(seq_cst)          (unpark)
//     [L] condition? not yet: park()      [RmW] sleep -> kAwake; was kAsleep?
//         futex_wait while kAsleep              yes: futex_wake
//
// Both fences are seq_cst, so at least one side sees the other's store:
// either the waiter's look sees the condition, or the waker sees kAsleep
// and wakes it; futex_wait sleeps only while the word still says kAsleep,
// so a wake-up that lands before the wait is not lost either.
//
// A wake-up may also be stale: a waker that set a condition the waiter has
// already seen (and acted on) may unpark it later, during some other wait.
// So park() is always called in a loop that re-arms and re-checks the
// condition; a return from park() means only "look again".

// The waiter half: arm, then the caller looks at its condition.
template <class P>
inline void arm(BasicThreadRecord<P>& me) {
  me.sleep.store(BasicThreadRecord<P>::kAsleep, std::memory_order_relaxed);
  P::fence(std::memory_order_seq_cst);
}

// Sleeps while armed, until unparked, a signal, or the deadline (ns on
// P::now_ns()'s clock). Returns false if the deadline passed while still
// armed. The caller re-arms and re-checks its condition after every return.
template <class P>
inline bool park(BasicThreadRecord<P>& me, std::int64_t deadline_ns) {
  using R = BasicThreadRecord<P>;
  // acquire pairs with the release exchange in unpark(): what the waker did
  // before it unparked us (its condition store) is visible after this.
  if (me.sleep.load(std::memory_order_acquire) != R::kAsleep) return true;
  if (P::futex_wait(&me.sleep, R::kAsleep, deadline_ns) == ETIMEDOUT)
    return me.sleep.load(std::memory_order_acquire) != R::kAsleep;
  return true;
}

// The waker half. `r` may belong to a thread that stopped waiting (records
// are type-stable): the wake-up is then stale and harmless.
template <class P>
inline void unpark(BasicThreadRecord<P>* r) {
  using R = BasicThreadRecord<P>;
  P::fence(std::memory_order_seq_cst);
  // release pairs with the acquire loads in park().
  if (r->sleep.exchange(R::kAwake, std::memory_order_release) == R::kAsleep)
    P::futex_wake(&r->sleep, 1);
}

}  // namespace internal
}  // namespace rwsem

#endif  // RWSEM_LIB_INTERNAL_THREAD_RECORD_H_
