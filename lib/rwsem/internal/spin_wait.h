// Three waits without a futex: SpinWait, for a spin-wait that has no one to
// park on (the queued rwlock); Backoff, for a spinner that polls a line
// another core writes (the rwsem's optimistic spinning, a queued writer's
// poll); UnlockerWait, for a destructor waiting for an unlock call to end.
//
// The queued rwlock is a spinning lock: its waiters never sleep in the
// kernel. In the kernel that is fine, because a spinner runs with preemption
// off and the holder it waits for is on another CPU. In user space the
// holder may be preempted, and with more threads than cores (two cores
// under QEMU, 64 threads in the benchmark) pure spinning would burn whole
// time slices waiting for a thread that cannot run. So a waiter relaxes the
// core for a short while, then yields its time slice on every further
// iteration; the lock's protocol does not change. Both hints come from the
// platform policy P (platform.h).
#ifndef RWSEM_LIB_INTERNAL_SPIN_WAIT_H_
#define RWSEM_LIB_INTERNAL_SPIN_WAIT_H_

#include <cstdint>

namespace rwsem {
namespace internal {

template <class P>
class SpinWait {
 public:
  void once() {
    if (spins_ < kRelaxSpins) {
      ++spins_;
      P::cpu_relax();
    } else {
      P::yield();
    }
  }

  // The short phase is over: further waits yield the time slice.
  bool yielding() const { return spins_ >= kRelaxSpins; }

 private:
  // About 1-5 us of pause/yield hints on current cores: longer than a short
  // critical section, far shorter than a time slice.
  static constexpr unsigned kRelaxSpins = 128;
  unsigned spins_ = 0;
};

// Exponential back-off between polls of a cache line that another core
// writes. Each poll that finds nothing new waits twice as long as the one
// before, from `first` up to kMaxPauses pause hints.
//
// A spinner that polls the lock word (the rwsem's optimistic spinning)
// starts at kSpinFirstPauses. One that polls at full speed takes the line
// away from the owner on every poll, so the owner's unlock and its next
// lock each pay a miss; worse, with two cores contending it catches every
// release, and the lock and its line move between the cores on every
// acquisition. Measured on 2 cores, balanced ops/s of the mixed benchmark
// at 2 threads / writers-only at 4, median of 3 one-second runs: first and
// cap one pause (one pause ~9.4 ns there) 7.6 M / 9.2 M; cap 32: 8.8 M /
// 11.5 M; cap 256: 19.5 M / 16.0 M; cap 1024: 21.7 M / 17.0 M. Then, with
// cap 256, on a machine where one pause takes ~19.7 ns, three interleaved
// runs each: first 1: 9.6-14.1 M / 28.8-31.3 M; first 64: 26.2-31.3 M /
// 37.7-47.7 M; first 128: 39.4-48.0 M / 41.1-53.0 M; first 256: 41.1-55.2
// M / 47.0-58.5 M, but then the 2-writer cell starved a writer in one run
// of three (first 64 and 256 also started the writer's poll there). 128
// costs the mostly-readers benchmark 5-20% at 4-32 threads (README, "Where
// the lock departs from the kernel"). At the cap a poll waits about 5 us there,
// so a release is seen within that, and as the spinner reads the clock every
// 16th poll, its budget and its caller's deadline are checked about every
// 80 us: a spin may overrun either by that much.
//
// A queued writer's poll of its own wait state (waiter.h) starts at one
// pause: only its waker writes that line, once, so a poll there takes
// nothing from an owner.
inline constexpr unsigned kSpinFirstPauses = 128;

template <class P>
class Backoff {
 public:
  explicit Backoff(unsigned first = 1) : pauses_(first) {}

  void pause() {
    P::pause(pauses_);
    if (pauses_ < kMaxPauses) pauses_ <<= 1;
  }

 private:
  static constexpr unsigned kMaxPauses = 256;
  unsigned pauses_;
};

// A lock's destructor waiting for a thread that released the lock and is
// still inside its unlock call for a few more instructions (rwsem.h,
// "Lifetime"). That thread may have been preempted there, on this CPU, by
// the destroyer itself: a SCHED_FIFO waiter it just woke preempts a
// SCHED_OTHER waker at once. Yielding gives the CPU only to threads of the
// yielder's priority or higher, so a real-time destroyer that only yielded
// would keep the unlocker off its CPU until the kernel's real-time
// bandwidth limit stepped in (measured: 950 ms, sched_rt_runtime_us
// 950000). So the wait yields a few times (enough for an equal-priority
// unlocker, the common case), then sleeps: 1 us, doubling up to 1 ms.
template <class P>
class UnlockerWait {
 public:
  void once() {
    if (yields_ < kYields) {
      ++yields_;
      P::yield();
      return;
    }
    P::sleep_for_ns(sleep_ns_);
    if (sleep_ns_ < kMaxSleepNs) sleep_ns_ *= 2;
  }

 private:
  static constexpr unsigned kYields = 8;
  static constexpr std::int64_t kMaxSleepNs = 1000000;
  unsigned yields_ = 0;
  std::int64_t sleep_ns_ = 1000;
};

}  // namespace internal
}  // namespace rwsem

#endif  // RWSEM_LIB_INTERNAL_SPIN_WAIT_H_
