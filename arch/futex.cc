#include "arch/futex.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace rwsem {
namespace arch {
namespace {

constexpr int kWaitOp = FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG;
constexpr int kWakeOp = FUTEX_WAKE | FUTEX_PRIVATE_FLAG;

// The kernel's 64-bit timespec (struct __kernel_timespec).
struct Timespec64 {
  std::int64_t tv_sec;
  std::int64_t tv_nsec;
};

// The timeout of the classic futex system call, as the kernel reads it.
// 64-bit ABIs (x32 included, whose futex is the 64-bit entry point): struct
// __kernel_timespec, 64-bit seconds and nanoseconds. 32-bit ABIs: the
// kernel's sys_futex_time32 takes struct old_timespec32
// {old_time32_t tv_sec; s32 tv_nsec} whatever time_t this program was built
// with. The C library's struct timespec is not it: with _TIME_BITS=64 it has
// a 64-bit tv_sec, which the kernel would read as seconds = one half of it
// and nanoseconds = the other (a deadline cut to the whole second on little
// endian, seconds 0 on big endian).
#if defined(__LP64__) || (defined(__x86_64__) && defined(__ILP32__))
using ClassicTimespec = Timespec64;
#else
struct ClassicTimespec {
  std::int32_t tv_sec;
  std::int32_t tv_nsec;
};
#endif
static_assert(sizeof(ClassicTimespec) == 2 * sizeof(ClassicTimespec::tv_sec),
              "no padding in the kernel's timespec");

long raw_wait_classic(std::atomic<std::uint32_t>* word, std::uint32_t expected,
                      std::int64_t deadline_ns) {
  const bool timed = deadline_ns != kNoDeadline;
  using Sec = decltype(ClassicTimespec::tv_sec);
  // Monotonic seconds past what the field holds (2^31 s, 68 years of
  // uptime, on 32-bit ABIs) are "forever" in practice: clamp, not wrap.
  std::int64_t sec = deadline_ns / 1000000000;
  if (sec > std::numeric_limits<Sec>::max()) sec = std::numeric_limits<Sec>::max();
  ClassicTimespec ts{static_cast<Sec>(sec),
                     static_cast<decltype(ClassicTimespec::tv_nsec)>(deadline_ns % 1000000000)};
  return syscall(SYS_futex, word, kWaitOp, expected, timed ? &ts : nullptr, nullptr,
                 FUTEX_BITSET_MATCH_ANY);
}

long raw_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected, std::int64_t deadline_ns) {
#if defined(SYS_futex_time64) && !defined(__LP64__)
  const bool timed = deadline_ns != kNoDeadline;
  static std::atomic<bool> have_time64{true};
  if (have_time64.load(std::memory_order_relaxed)) {
    Timespec64 ts{deadline_ns / 1000000000, deadline_ns % 1000000000};
    long r = syscall(SYS_futex_time64, word, kWaitOp, expected, timed ? &ts : nullptr, nullptr,
                     FUTEX_BITSET_MATCH_ANY);
    if (r == 0 || errno != ENOSYS) return r;
    have_time64.store(false, std::memory_order_relaxed);
  }
#endif
  return raw_wait_classic(word, expected, deadline_ns);
}

// futex_wait's answer from a wait's return value and errno.
int wait_result(std::atomic<std::uint32_t>* word, long r) {
  if (r == 0) return 0;
  const int err = errno;
  switch (err) {
    case EAGAIN:  // *word != expected already
      return 0;
    case ETIMEDOUT:
    case EINTR: return err;
    default:
      std::fprintf(stderr, "rwsem: futex_wait(%p) failed: %s\n", static_cast<void*>(word),
                   std::strerror(err));
      std::abort();
  }
}

}  // namespace

int futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected, std::int64_t deadline_ns) {
  if (deadline_ns <= 0) return ETIMEDOUT;
  return wait_result(word, raw_wait(word, expected, deadline_ns));
}

int futex_wait_classic(std::atomic<std::uint32_t>* word, std::uint32_t expected,
                       std::int64_t deadline_ns) {
  if (deadline_ns <= 0) return ETIMEDOUT;
  return wait_result(word, raw_wait_classic(word, expected, deadline_ns));
}

void futex_wake(std::atomic<std::uint32_t>* word, int n) {
  // A wake on a word whose owner already moved on is harmless: waiters
  // re-check their condition, and the memory is still mapped (see the
  // hand-over protocol in lib/rwsem/internal/waiter.h).
  syscall(SYS_futex, word, kWakeOp, n, nullptr, nullptr, 0);
}

}  // namespace arch
}  // namespace rwsem
