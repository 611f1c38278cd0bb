// Two back-offs for spin loops: SpinWait, for a spin-wait that has no one to
// park on (the queued rwlock), and Backoff, for a spinner that polls a line
// another core writes (the rwsem's optimistic spinning).
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
// writes (the lock word a spinner watches). Each poll that finds nothing new
// waits twice as long as the one before, up to kMaxPauses hints. A spinner
// that polls at full speed takes the line away from the owner on every
// poll, and the owner's unlock and its next lock then each pay a miss; worse,
// with two cores contending it catches every release, so the lock and its
// line move between the cores on every acquisition. Measured on 2 cores
// (one pause ~9.4 ns there), balanced ops/s of the mixed benchmark at 2
// threads / writers-only at 4, median of 3 one-second runs: one pause per
// poll 7.6 M / 9.2 M; cap 32: 8.8 M / 11.5 M; cap 256: 19.5 M / 16.0 M; cap
// 1024: 21.7 M / 17.0 M. 256 (about 2.4 us per poll here) keeps most of the
// gain while a release is still seen within a few microseconds. The spinner
// reads the clock every 16th poll, so at the cap its budget and its caller's
// deadline are checked about every 40 us here: a spin may overrun either by
// that much.
template <class P>
class Backoff {
 public:
  void pause() {
    P::pause(pauses_);
    if (pauses_ < kMaxPauses) pauses_ <<= 1;
  }

 private:
  static constexpr unsigned kMaxPauses = 256;
  unsigned pauses_ = 1;
};

}  // namespace internal
}  // namespace rwsem

#endif  // RWSEM_LIB_INTERNAL_SPIN_WAIT_H_
