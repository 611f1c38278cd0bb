// Asking the kernel not to preempt a thread inside the wait lock's sections:
// Linux's rseq time-slice extension ("rseq: Implement time slice extension
// mechanism", LKML, 2025), on kernels that offer it, detected at run time.
//
// The wait lock (wait_lock.h) is held for a few dozen instructions of queue
// edits. A holder preempted there keeps every waker and every queueing
// thread of that lock waiting for a whole time slice. With the extension, a
// thread sets `request` in its rseq area before such a section; if the
// kernel wants to preempt it meanwhile, it may instead let it run on for a
// short while (tens of microseconds), clearing `request` and setting
// `granted`. The thread clears `request` after the section, and if it finds
// `granted` it gives the CPU back at once with rseq_slice_yield(2). In the
// series' later revisions any other system call under a grant ends the
// grant there (the kernel reschedules the thread; the first posting killed
// it instead), so a section that makes one (a release that must wake a
// sleeper) only loses the rest of its grant.
//
// Where it is on:
//   - the C library registered the thread's rseq area (glibc since 2.35:
//     __rseq_size > 0; it is 0 when registration failed or was turned off,
//     e.g. under QEMU user mode);
//   - the kernel knows the field: AT_RSEQ_FEATURE_SIZE covers slice_ctrl
//     (32 bytes; 28 on Linux 6.3 to 6.18);
//   - the kernel accepts prctl(PR_RSEQ_SLICE_EXTENSION, SET, ENABLE) for
//     the thread (once per thread, on its first wait-lock section).
// Anywhere else the state below stays "not available" and a section costs
// one thread-local load and a branch. Nothing of it is visible to callers;
// time_slice_extension_active() says which case a thread is in.
//
// Which sections. Only the wait lock's. The caller's critical sections are
// not wrapped: every uncontended lock and unlock would pay the thread-local
// load and branch (the uncontended read lock is within a few percent of a
// bare RMW pair), a critical section of a sleeping lock may run far longer
// than any grant, and on this project's machines (Linux 6.18) the gain
// cannot be measured.
//
// Nesting. The thread's `request` byte may also be the caller's own (a
// program that requests an extension around a section that takes one of
// these locks). A section here sets `request` only if it was clear, and
// only a section that set it clears it and answers a grant; the caller's
// own request and grant stay the caller's. The sections themselves never
// nest: no wait lock is taken while a thread holds another.
#ifndef RWSEM_LIB_INTERNAL_TIME_SLICE_H_
#define RWSEM_LIB_INTERNAL_TIME_SLICE_H_

#include <atomic>
#include <cstdint>

namespace rwsem {
namespace internal {

// The kernel's struct rseq_slice_ctrl: 4 bytes at offset 28 of the thread's
// struct rseq. `request` is written by the thread and cleared by the thread
// or the kernel; `granted` is written only by the kernel.
struct SliceCtrl {
  std::uint8_t request;
  std::uint8_t granted;
  std::uint16_t reserved;
};
inline constexpr unsigned kSliceCtrlOffset = 28;  // offsetof(struct rseq, slice_ctrl)

// The calling thread's use of the extension. Constant-initialised, so the
// thread-local access needs no initialisation guard.
struct TimeSliceState {
  SliceCtrl* ctrl = nullptr;        // this thread's control; nullptr: not available
  void (*give_back)() = nullptr;    // rseq_slice_yield(2), or a test's stand-in
  bool looked_up = false;           // time_slice_lookup() ran for this thread
  bool mine = false;                // the open section set `request`
};
inline thread_local TimeSliceState t_time_slice;

// Fills in the calling thread's state (runtime.cc): detects the extension
// (once per process) and enables it for the thread.
void time_slice_lookup(TimeSliceState& s);

// The calling thread's state, looked up on its first use.
inline TimeSliceState& this_thread_time_slice() {
  TimeSliceState& s = t_time_slice;
  if (__builtin_expect(!s.looked_up, 0)) time_slice_lookup(s);
  return s;
}

// Is the extension in use for the calling thread? Looks it up first if
// needed. For diagnostics and tests.
bool time_slice_extension_active();

// Tests: makes the calling thread use `ctrl` as its control and call
// `give_back` instead of rseq_slice_yield(2), or look the real ones up
// again when `ctrl` is nullptr. Only between sections.
void set_time_slice_for_testing(SliceCtrl* ctrl, void (*give_back)());

// The kernel reads and clears `request` and sets `granted` only while this
// thread is interrupted or preempted, on the CPU it runs on: as for a signal
// handler, program order is all the ordering needed, and the signal fences
// keep the compiler from moving the section's own accesses across the
// request. Single-byte atomic accesses, so that neither side sees a torn
// value.
inline void begin_time_slice_section() {
  TimeSliceState& s = this_thread_time_slice();
  if (s.ctrl == nullptr) return;
  s.mine = __atomic_load_n(&s.ctrl->request, __ATOMIC_RELAXED) == 0;
  if (s.mine) __atomic_store_n(&s.ctrl->request, std::uint8_t{1}, __ATOMIC_RELAXED);
  std::atomic_signal_fence(std::memory_order_seq_cst);
}

inline void end_time_slice_section() {
  TimeSliceState& s = t_time_slice;
  if (s.ctrl == nullptr || !s.mine) return;
  s.mine = false;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  __atomic_store_n(&s.ctrl->request, std::uint8_t{0}, __ATOMIC_RELAXED);
  // Granted after all: the kernel deferred a preemption for us; hand the
  // CPU over now rather than at the grant's end.
  if (__atomic_load_n(&s.ctrl->granted, __ATOMIC_RELAXED) != 0) s.give_back();
}

}  // namespace internal
}  // namespace rwsem

#endif  // RWSEM_LIB_INTERNAL_TIME_SLICE_H_
