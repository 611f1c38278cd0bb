// Lock event counters, after the kernel's lock_events_list.h.
//
// Build with --define=rwsem_lock_events=1 to count; otherwise every
// RWSEM_EVENT_* macro compiles to nothing and snapshot() returns zeros.
// Counters are process-wide and relaxed: they count, they do not order.
#ifndef RWSEM_LIB_LOCK_EVENTS_H_
#define RWSEM_LIB_LOCK_EVENTS_H_

#include <array>
#include <cstdint>
#include <iosfwd>

#include "lib/rwsem/config.h"

// X(name, description)
#define RWSEM_LOCK_EVENT_LIST(X)                                             \
  X(rlock, "read locks acquired in the slow path")                           \
  X(rlock_fast, "slow-path read locks acquired without sleeping")            \
  X(rlock_steal, "read locks stolen from a free lock with waiters queued")   \
  X(rlock_fail, "read lock attempts that timed out")                         \
  X(rlock_handoff, "read lock handoffs started")                             \
  X(rlock_phase, "read locks rejoined past waiters within a read phase")     \
  X(rlock_overdue, "reader grants ahead of a first writer, readers overdue") \
  X(rlock_retry, "read locks taken by a reader woken to retry")              \
  X(wlock, "write locks acquired in the slow path")                          \
  X(wlock_steal, "slow-path write locks stolen before queueing")             \
  X(wlock_fail, "write lock attempts that timed out")                        \
  X(wlock_handoff, "write lock handoffs started")                            \
  X(sleep_reader, "reader sleeps")                                           \
  X(sleep_writer, "writer sleeps")                                           \
  X(wake_reader, "readers woken")                                            \
  X(wake_reader_retry, "lone readers woken to retry by a writer's unlock")   \
  X(wake_writer, "writers woken")                                            \
  X(opt_rlock, "read locks acquired by optimistic spinning")                 \
  X(opt_wlock, "write locks acquired by optimistic spinning")                \
  X(opt_fail, "optimistic spins that gave up")                               \
  X(opt_nospin, "reader-owned spins that set NONSPINNABLE")                  \
  X(opt_handoff_stop, "spins stopped because a waiter is owed the lock")     \
  X(wlock_handoff_timer, "queued writers woken by their handoff deadline")   \
  X(wlock_poll, "looks at its wait state by a queued writer before parking") \
  X(wlock_guess_miss, "write locks whose guess of a free count failed")      \
  X(wlock_look, "write locks that loaded the count instead of guessing")     \
  X(wunlock_guess_miss, "write unlocks whose guess of a lone writer failed") \
  X(wunlock_look, "write unlocks that loaded the count instead of guessing") \
  X(destroy_wait_unlocker, "destructor waits for an up_read() still inside") \
  X(destroy_wait_queue, "destructor waits for an unlocker holding the wait lock")

namespace rwsem {

enum class LockEvent : int {
#define RWSEM_X(name, desc) name,
  RWSEM_LOCK_EVENT_LIST(RWSEM_X)
#undef RWSEM_X
      kCount
};

inline constexpr bool kLockEventsEnabled =
#if defined(RWSEM_LOCK_EVENTS)
    true;
#else
    false;
#endif

struct LockEventSnapshot {
  std::array<std::uint64_t, static_cast<int>(LockEvent::kCount)> counts{};
  std::uint64_t operator[](LockEvent e) const { return counts[static_cast<int>(e)]; }
  // Counts since `earlier`.
  LockEventSnapshot operator-(const LockEventSnapshot& earlier) const;
};

const char* lock_event_name(LockEvent e);
LockEventSnapshot lock_events_snapshot();
// "rlock=3 wlock=1 ..." for the non-zero counters.
std::ostream& operator<<(std::ostream& os, const LockEventSnapshot& s);

namespace internal {
void lock_event_add(LockEvent e, std::uint64_t n);
}  // namespace internal

}  // namespace rwsem

#if defined(RWSEM_LOCK_EVENTS)
#define RWSEM_EVENT_ADD(name, n) ::rwsem::internal::lock_event_add(::rwsem::LockEvent::name, (n))
#else
#define RWSEM_EVENT_ADD(name, n) \
  do {                           \
  } while (0)
#endif
#define RWSEM_EVENT_INC(name) RWSEM_EVENT_ADD(name, 1)
// The same, for an event the caller holds as a LockEvent value.
#if defined(RWSEM_LOCK_EVENTS)
#define RWSEM_EVENT_INC_VALUE(e) ::rwsem::internal::lock_event_add((e), 1)
#else
#define RWSEM_EVENT_INC_VALUE(e) \
  do {                           \
  } while (0)
#endif

#endif  // RWSEM_LIB_LOCK_EVENTS_H_
