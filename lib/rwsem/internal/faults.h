// Fault injection: builds of the lock with one known defect, so the corpus
// can prove it catches that defect. A fault is switched on only by defining
// RWSEM_FAULT_<NAME> at compile time (the fault runner passes it with
// --copt); every use is an `if constexpr` on a constant that is false in
// normal builds, so shipped code paths carry no trace of it.
#ifndef RWSEM_LIB_INTERNAL_FAULTS_H_
#define RWSEM_LIB_INTERNAL_FAULTS_H_

namespace rwsem {
namespace internal {
namespace fault {

// Protocol: up_write does not wake the queue although WAITERS is set.
inline constexpr bool kMissedWakeup =
#if defined(RWSEM_FAULT_MISSED_WAKEUP)
    true;
#else
    false;
#endif

// True when any fault is compiled in (tests print it in their banner).
inline constexpr bool kAny = kMissedWakeup;

}  // namespace fault
}  // namespace internal
}  // namespace rwsem

#endif  // RWSEM_LIB_INTERNAL_FAULTS_H_
