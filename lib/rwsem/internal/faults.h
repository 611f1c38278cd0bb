// Fault injection: builds of the lock with one known defect, so the corpus
// can prove it catches that defect (ci/faults runs the kill matrix).
//
// A fault is switched on only by defining RWSEM_FAULT_<NAME> at compile time
// (ci/faults passes --copt=-DRWSEM_FAULT_<NAME>). Every use is an
// `if constexpr` on, or a memory order computed from, a constant that is
// false in normal builds, so shipped code paths carry no trace of it.
//
// The list, by class (name: defect):
//   ordering
//     READ_LOCK_RELAXED      down_read's fetch_add is relaxed, not acquire
//     WRITE_LOCK_RELAXED     down_write's cmpxchg is relaxed, not acquire
//     UP_READ_RELAXED        up_read's fetch_sub is relaxed, not release
//     UP_WRITE_RELAXED       up_write's fetch_sub is relaxed, not release
//     DOWNGRADE_RELAXED      downgrade_write's fetch_add is relaxed
//     HANDOVER_RELAXED       the waker's grant to a woken waiter (its kWoken
//                            store and the waiter's load) relaxed
//   layout
//     READFAIL_BIT30         READFAIL tested at bit 30 of 32-bit words
//     READER_SHIFT_OFF_BY_1  down_read adds READER_BIAS >> 1
//     OWNER_ID_TRUNC32       the merged writer word keeps 32 bits of the id
//     COUNT_AS_32BIT         the reader bias held in an unsigned long, so on
//                            ILP32 targets a 64-bit layout adds 0 for it
//     WAITERS_HANDOFF_SWAP   mark_wake clears HANDOFF where it means WAITERS
//   protocol
//     WAITERS_CLEARED_EARLY  mark_wake clears WAITERS with writers queued
//     HANDOFF_NEVER_CLEARED  a writer taking an owed lock leaves HANDOFF set
//     WAKE_BATCH_UNLIMITED   the reader wake batch ignores its 256 limit
//     WAKE_BATCH_STOPS_AT_WRITER  the reader wake batch stops at a writer
//     TIMEOUT_LEAVES_WAITER  a timed-out reader stays in the queue
//     MISSED_WAKEUP          up_write does not wake the queue
//     READFAIL_IGNORED_FAST  down_read's fast path ignores READFAIL
//   liveness and lifetime
//     READER_STEALS_WITH_WAITERS  a spinning reader joins a reader-owned
//                            lock although waiters are queued (the reader
//                            stream that starves a queued writer)
//     SPIN_IGNORES_HANDOFF   a spinner keeps spinning on a writer owner
//                            while a waiter is owed the lock
//     NO_HANDOFF_TIMER       the first queued writer sleeps without waking
//                            at its handoff deadline
//     WAKEE_WAITS_FOR_WAKER  a granted waiter spins until its waker has
//                            finished the wake-up (stalls a real-time
//                            wakee behind a preempted waker)
//     RELEASE_SUBTRACTS_CALLER_WORD  up_write subtracts the caller's writer
//                            word, not the owner's (non-owner release)
//     TOUCH_AFTER_RELEASE    an unlock that must wake releases the lock
//                            first and takes the wait lock afterwards
//     FUTEX_WAIT_NO_RECHECK  a waiter takes any return from its futex wait
//                            (signal, spurious wake-up) for a wake-up
//     OWNER_PUBLISH_RELAXED  a new owner publishes its thread record with
//                            relaxed orders (spinners read it unordered)
//   ordering between atomics (invisible to TSan and to x86; the model
//   checker, conformance/model, catches them)
//     ARM_NO_FENCE           arm() drops the seq_cst fence between storing
//                            kAsleep and the waiter's look at its condition
//     UNPARK_NO_FENCE        unpark() drops the seq_cst fence between the
//                            waker's condition store and its read of the
//                            sleep word
//     OSQ_HANDOVER_RELAXED   the spin queue hands over with a relaxed store
//                            of the successor's `locked`
//     OSQ_UNLOCK_RELAXED     the spin queue's last spinner empties the tail
//                            with a relaxed cmpxchg
//
// The companion locks' faults (qrwlock.h, mutex.h):
//   ordering
//     QRW_READ_LOCK_RELAXED      the qrwlock reader's fetch_add is relaxed
//     MUTEX_UNLOCK_RELAXED       the mutex's releasing cmpxchg is relaxed
//   layout
//     QRW_WRITER_BYTE_LOW_ADDRESS  the qrwlock writer byte is taken to be
//                                the word's lowest address, which is right
//                                only on little-endian targets
//   protocol
//     QRW_HEAD_READER_IGNORES_WRITER  the reader at the queue head does not
//                                wait for a lock-holding writer to leave
//     QRW_WRITER_IGNORES_READERS a head writer takes the lock in one step
//                                even with readers present
//     MUTEX_STATE_AFTER_COUNT    a mutex waiter arms its sleep state after
//                                its look at the owner word and outside the
//                                wait lock (the missed wake-up of the waiter-spinning series)
//     MUTEX_HANDOFF_IGNORED      unlock releases the lock even when the
//                                first waiter asked for a handoff
//     MUTEX_PICKUP_BY_ANYONE     any thread may take a lock handed to a
//                                waiter
#ifndef RWSEM_LIB_INTERNAL_FAULTS_H_
#define RWSEM_LIB_INTERNAL_FAULTS_H_

#include <atomic>

namespace rwsem {
namespace internal {
namespace fault {

#if defined(RWSEM_FAULT_READ_LOCK_RELAXED)
inline constexpr bool kReadLockRelaxed = true;
#else
inline constexpr bool kReadLockRelaxed = false;
#endif
#if defined(RWSEM_FAULT_WRITE_LOCK_RELAXED)
inline constexpr bool kWriteLockRelaxed = true;
#else
inline constexpr bool kWriteLockRelaxed = false;
#endif
#if defined(RWSEM_FAULT_UP_READ_RELAXED)
inline constexpr bool kUpReadRelaxed = true;
#else
inline constexpr bool kUpReadRelaxed = false;
#endif
#if defined(RWSEM_FAULT_UP_WRITE_RELAXED)
inline constexpr bool kUpWriteRelaxed = true;
#else
inline constexpr bool kUpWriteRelaxed = false;
#endif
#if defined(RWSEM_FAULT_DOWNGRADE_RELAXED)
inline constexpr bool kDowngradeRelaxed = true;
#else
inline constexpr bool kDowngradeRelaxed = false;
#endif
#if defined(RWSEM_FAULT_HANDOVER_RELAXED)
inline constexpr bool kHandoverRelaxed = true;
#else
inline constexpr bool kHandoverRelaxed = false;
#endif
#if defined(RWSEM_FAULT_READFAIL_BIT30)
inline constexpr bool kReadFailBit30 = true;
#else
inline constexpr bool kReadFailBit30 = false;
#endif
#if defined(RWSEM_FAULT_READER_SHIFT_OFF_BY_1)
inline constexpr bool kReaderShiftOffBy1 = true;
#else
inline constexpr bool kReaderShiftOffBy1 = false;
#endif
#if defined(RWSEM_FAULT_OWNER_ID_TRUNC32)
inline constexpr bool kOwnerIdTrunc32 = true;
#else
inline constexpr bool kOwnerIdTrunc32 = false;
#endif
#if defined(RWSEM_FAULT_COUNT_AS_32BIT)
inline constexpr bool kCountAs32Bit = true;
#else
inline constexpr bool kCountAs32Bit = false;
#endif
#if defined(RWSEM_FAULT_WAITERS_HANDOFF_SWAP)
inline constexpr bool kWaitersHandoffSwap = true;
#else
inline constexpr bool kWaitersHandoffSwap = false;
#endif
#if defined(RWSEM_FAULT_WAITERS_CLEARED_EARLY)
inline constexpr bool kWaitersClearedEarly = true;
#else
inline constexpr bool kWaitersClearedEarly = false;
#endif
#if defined(RWSEM_FAULT_HANDOFF_NEVER_CLEARED)
inline constexpr bool kHandoffNeverCleared = true;
#else
inline constexpr bool kHandoffNeverCleared = false;
#endif
#if defined(RWSEM_FAULT_WAKE_BATCH_UNLIMITED)
inline constexpr bool kWakeBatchUnlimited = true;
#else
inline constexpr bool kWakeBatchUnlimited = false;
#endif
#if defined(RWSEM_FAULT_WAKE_BATCH_STOPS_AT_WRITER)
inline constexpr bool kWakeBatchStopsAtWriter = true;
#else
inline constexpr bool kWakeBatchStopsAtWriter = false;
#endif
#if defined(RWSEM_FAULT_TIMEOUT_LEAVES_WAITER)
inline constexpr bool kTimeoutLeavesWaiter = true;
#else
inline constexpr bool kTimeoutLeavesWaiter = false;
#endif
#if defined(RWSEM_FAULT_MISSED_WAKEUP)
inline constexpr bool kMissedWakeup = true;
#else
inline constexpr bool kMissedWakeup = false;
#endif
#if defined(RWSEM_FAULT_READFAIL_IGNORED_FAST)
inline constexpr bool kReadFailIgnoredFast = true;
#else
inline constexpr bool kReadFailIgnoredFast = false;
#endif
#if defined(RWSEM_FAULT_QRW_READ_LOCK_RELAXED)
inline constexpr bool kQrwReadLockRelaxed = true;
#else
inline constexpr bool kQrwReadLockRelaxed = false;
#endif
#if defined(RWSEM_FAULT_MUTEX_UNLOCK_RELAXED)
inline constexpr bool kMutexUnlockRelaxed = true;
#else
inline constexpr bool kMutexUnlockRelaxed = false;
#endif
#if defined(RWSEM_FAULT_QRW_WRITER_BYTE_LOW_ADDRESS)
inline constexpr bool kQrwWriterByteLowAddress = true;
#else
inline constexpr bool kQrwWriterByteLowAddress = false;
#endif
#if defined(RWSEM_FAULT_QRW_HEAD_READER_IGNORES_WRITER)
inline constexpr bool kQrwHeadReaderIgnoresWriter = true;
#else
inline constexpr bool kQrwHeadReaderIgnoresWriter = false;
#endif
#if defined(RWSEM_FAULT_QRW_WRITER_IGNORES_READERS)
inline constexpr bool kQrwWriterIgnoresReaders = true;
#else
inline constexpr bool kQrwWriterIgnoresReaders = false;
#endif
#if defined(RWSEM_FAULT_MUTEX_STATE_AFTER_COUNT)
inline constexpr bool kMutexStateAfterCount = true;
#else
inline constexpr bool kMutexStateAfterCount = false;
#endif
#if defined(RWSEM_FAULT_MUTEX_HANDOFF_IGNORED)
inline constexpr bool kMutexHandoffIgnored = true;
#else
inline constexpr bool kMutexHandoffIgnored = false;
#endif
#if defined(RWSEM_FAULT_MUTEX_PICKUP_BY_ANYONE)
inline constexpr bool kMutexPickupByAnyone = true;
#else
inline constexpr bool kMutexPickupByAnyone = false;
#endif

#if defined(RWSEM_FAULT_READER_STEALS_WITH_WAITERS)
inline constexpr bool kReaderStealsWithWaiters = true;
#else
inline constexpr bool kReaderStealsWithWaiters = false;
#endif
#if defined(RWSEM_FAULT_SPIN_IGNORES_HANDOFF)
inline constexpr bool kSpinIgnoresHandoff = true;
#else
inline constexpr bool kSpinIgnoresHandoff = false;
#endif
#if defined(RWSEM_FAULT_NO_HANDOFF_TIMER)
inline constexpr bool kNoHandoffTimer = true;
#else
inline constexpr bool kNoHandoffTimer = false;
#endif
#if defined(RWSEM_FAULT_WAKEE_WAITS_FOR_WAKER)
inline constexpr bool kWakeeWaitsForWaker = true;
#else
inline constexpr bool kWakeeWaitsForWaker = false;
#endif
#if defined(RWSEM_FAULT_RELEASE_SUBTRACTS_CALLER_WORD)
inline constexpr bool kReleaseSubtractsCallerWord = true;
#else
inline constexpr bool kReleaseSubtractsCallerWord = false;
#endif
#if defined(RWSEM_FAULT_TOUCH_AFTER_RELEASE)
inline constexpr bool kTouchAfterRelease = true;
#else
inline constexpr bool kTouchAfterRelease = false;
#endif
#if defined(RWSEM_FAULT_FUTEX_WAIT_NO_RECHECK)
inline constexpr bool kFutexWaitNoRecheck = true;
#else
inline constexpr bool kFutexWaitNoRecheck = false;
#endif
#if defined(RWSEM_FAULT_OWNER_PUBLISH_RELAXED)
inline constexpr bool kOwnerPublishRelaxed = true;
#else
inline constexpr bool kOwnerPublishRelaxed = false;
#endif

#if defined(RWSEM_FAULT_ARM_NO_FENCE)
inline constexpr bool kArmNoFence = true;
#else
inline constexpr bool kArmNoFence = false;
#endif
#if defined(RWSEM_FAULT_UNPARK_NO_FENCE)
inline constexpr bool kUnparkNoFence = true;
#else
inline constexpr bool kUnparkNoFence = false;
#endif
#if defined(RWSEM_FAULT_OSQ_HANDOVER_RELAXED)
inline constexpr bool kOsqHandoverRelaxed = true;
#else
inline constexpr bool kOsqHandoverRelaxed = false;
#endif
#if defined(RWSEM_FAULT_OSQ_UNLOCK_RELAXED)
inline constexpr bool kOsqUnlockRelaxed = true;
#else
inline constexpr bool kOsqUnlockRelaxed = false;
#endif

// `mo`, or relaxed when the fault `weaken` is compiled in. A relaxed fence
// is no fence at all.
constexpr std::memory_order order(bool weaken, std::memory_order mo) {
  return weaken ? std::memory_order_relaxed : mo;
}

}  // namespace fault
}  // namespace internal
}  // namespace rwsem

#endif  // RWSEM_LIB_INTERNAL_FAULTS_H_
