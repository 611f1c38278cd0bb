// The per-thread record every thread that takes a lock gets.
//
// Its address, shifted right by 6, is the thread's owner id: the value the
// merged-owner layout keeps in the count and the other layouts keep in the
// owner field. A spinner follows an owner id back to the record to see
// whether the owner is parked in one of our waits.
//
// Records are type-stable: they come from a pool that is never freed, and a
// thread's record returns to the pool when the thread exits. A spinner that
// read an owner id just before that owner left (and even exited) therefore
// still reads a valid record; at worst it looks at the wrong thread's flags
// for a moment, which only affects a spin decision. (The kernel gets the
// same guarantee for task_struct from RCU.)
#ifndef RWSEM_LIB_INTERNAL_THREAD_RECORD_H_
#define RWSEM_LIB_INTERNAL_THREAD_RECORD_H_

#include <atomic>
#include <cstdint>

#include "lib/rwsem/osq.h"

namespace rwsem {
namespace internal {

struct alignas(64) ThreadRecord {
  std::uint64_t owner_id = 0;  // address >> kOwnerIdShift; never 0
  std::uint32_t tid = 0;       // kernel thread id, for diagnostics
  // True while the thread sleeps in one of our futex waits. relaxed: a hint
  // for spinners, which re-check the lock word anyway.
  std::atomic<bool> parked{false};
  OsqNode osq;                 // this thread's node in spin queues
  // The mutex's per-thread sleep word (the kernel's task state): kAwake or
  // kAsleep. A waiter arms it (kAsleep) before it looks at the lock word for
  // the last time and sleeps on it; a waker exchanges it to kAwake and
  // futex-wakes it if it was armed. Because records are type-stable, a
  // waker may still hold a record whose thread has stopped waiting; the
  // wake-up is then spurious and the thread re-checks its lock. Orders:
  // lib/rwsem/mutex.h.
  std::atomic<std::uint32_t> sleep{0};
  static constexpr std::uint32_t kAwake = 0, kAsleep = 1;
};

inline constexpr int kOwnerIdShift = 6;
static_assert(alignof(ThreadRecord) == (1 << kOwnerIdShift),
              "owner ids are record addresses >> kOwnerIdShift");

ThreadRecord& current_thread_slow();
inline thread_local ThreadRecord* t_current_record = nullptr;

// The calling thread's record, taken from the pool on first use.
inline ThreadRecord& current_thread() {
  ThreadRecord* r = t_current_record;
  return r != nullptr ? *r : current_thread_slow();
}

// The record an owner id names. Round-trips with ThreadRecord::owner_id.
inline ThreadRecord* thread_from_owner_id(std::uint64_t id) {
  return reinterpret_cast<ThreadRecord*>(
      static_cast<std::uintptr_t>(id << kOwnerIdShift));
}

inline OsqNode& current_osq_node() { return current_thread().osq; }

// True when the calling thread runs under SCHED_FIFO or SCHED_RR.
bool current_thread_is_realtime();

// Marks the calling thread parked for the lifetime of the guard.
class ParkedScope {
 public:
  ParkedScope() : r_(current_thread()) { r_.parked.store(true, std::memory_order_relaxed); }
  ~ParkedScope() { r_.parked.store(false, std::memory_order_relaxed); }
  ParkedScope(const ParkedScope&) = delete;
  ParkedScope& operator=(const ParkedScope&) = delete;

 private:
  ThreadRecord& r_;
};

}  // namespace internal
}  // namespace rwsem

#endif  // RWSEM_LIB_INTERNAL_THREAD_RECORD_H_
