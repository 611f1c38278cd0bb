// The per-thread record every thread that takes a lock gets.
//
// Its address, shifted right by 6, is the thread's owner id: the value the
// merged-owner layout keeps in the count and the generic layouts keep in
// the owner field. The record is 64-byte aligned, so the id maps back to the
// record exactly; the optimistic-spinning code follows it to see whether an
// owner is parked.
#ifndef RWSEM_LIB_INTERNAL_THREAD_RECORD_H_
#define RWSEM_LIB_INTERNAL_THREAD_RECORD_H_

#include <cstdint>

namespace rwsem {
namespace internal {

struct alignas(64) ThreadRecord {
  std::uint64_t owner_id = 0;  // address >> kOwnerIdShift; never 0
  std::uint32_t tid = 0;       // kernel thread id, for diagnostics
};

inline constexpr int kOwnerIdShift = 6;
static_assert(alignof(ThreadRecord) == (1 << kOwnerIdShift),
              "owner ids are record addresses >> kOwnerIdShift");

// The calling thread's record, created on first use.
ThreadRecord& current_thread();

// The record an owner id names. Round-trips with ThreadRecord::owner_id.
inline ThreadRecord* thread_from_owner_id(std::uint64_t id) {
  return reinterpret_cast<ThreadRecord*>(
      static_cast<std::uintptr_t>(id << kOwnerIdShift));
}

// True when the calling thread runs under SCHED_FIFO or SCHED_RR.
bool current_thread_is_realtime();

}  // namespace internal
}  // namespace rwsem

#endif  // RWSEM_LIB_INTERNAL_THREAD_RECORD_H_
