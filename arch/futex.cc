#include "arch/futex.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

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

long raw_wait_classic(std::atomic<std::uint32_t>* word, std::uint32_t expected,
                      std::int64_t deadline_ns) {
  const bool timed = deadline_ns != kNoDeadline;
  struct timespec ts;
  std::int64_t sec = deadline_ns / 1000000000;
  if (sizeof(ts.tv_sec) < 8 && sec > INT32_MAX) sec = INT32_MAX;
  ts.tv_sec = static_cast<decltype(ts.tv_sec)>(sec);
  ts.tv_nsec = static_cast<long>(deadline_ns % 1000000000);
  return syscall(SYS_futex, word, kWaitOp, expected, timed ? &ts : nullptr,
                 nullptr, FUTEX_BITSET_MATCH_ANY);
}

long raw_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected,
              std::int64_t deadline_ns) {
#if defined(SYS_futex_time64) && !defined(__LP64__)
  const bool timed = deadline_ns != kNoDeadline;
  static std::atomic<bool> have_time64{true};
  if (have_time64.load(std::memory_order_relaxed)) {
    Timespec64 ts{deadline_ns / 1000000000, deadline_ns % 1000000000};
    long r = syscall(SYS_futex_time64, word, kWaitOp, expected,
                     timed ? &ts : nullptr, nullptr, FUTEX_BITSET_MATCH_ANY);
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
    case EINTR:
      return err;
    default:
      std::fprintf(stderr, "rwsem: futex_wait(%p) failed: %s\n",
                   static_cast<void*>(word), std::strerror(err));
      std::abort();
  }
}

}  // namespace

int futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected,
               std::int64_t deadline_ns) {
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
