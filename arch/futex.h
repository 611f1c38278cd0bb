// arch/futex.h: the Linux futex calls the lock parks on.
//
// Only two operations are used, both process-private:
//   futex_wait(word, expected, deadline): sleep while *word == expected, until
//       woken, a signal, or the absolute CLOCK_MONOTONIC deadline (ns).
//   futex_wake(word, n): wake up to n sleepers on word.
// Callers always re-check their condition after futex_wait returns: spurious
// wake-ups, EINTR and EAGAIN are all "look again".
//
// Time: waits use FUTEX_WAIT_BITSET, whose timeout is absolute on
// CLOCK_MONOTONIC, the clock behind std::chrono::steady_clock. On 32-bit ABIs
// the kernel's futex_time64 call takes a 64-bit timespec; it is used when the
// headers know it, and the classic call (32-bit time) when the running kernel
// says ENOSYS.
#ifndef RWSEM_ARCH_FUTEX_H_
#define RWSEM_ARCH_FUTEX_H_

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <ctime>

namespace rwsem {
namespace arch {

inline constexpr std::int64_t kNoDeadline = INT64_MAX;

static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t),
              "a futex word must be a plain 32-bit word");

// Returns 0 when woken or the value differed, ETIMEDOUT at the deadline,
// EINTR on a signal. Other errors are bugs and abort.
int futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected, std::int64_t deadline_ns);
void futex_wake(std::atomic<std::uint32_t>* word, int n);

// The fallback futex_wait uses when the kernel has no futex_time64 (ENOSYS,
// 32-bit ABIs on kernels before 5.1): the same wait through the classic
// futex system call (SYS_futex), with futex_wait's contract. Its timeout is
// the kernel's 32-bit {s32 tv_sec; s32 tv_nsec} on 32-bit ABIs, whatever
// time_t the program has (deadlines past 2^31 s are clamped), and the 64-bit
// one on 64-bit ABIs. Exposed so that tests can run it on kernels that do
// have futex_time64.
int futex_wait_classic(std::atomic<std::uint32_t>* word, std::uint32_t expected,
                       std::int64_t deadline_ns);

// CLOCK_MONOTONIC in nanoseconds: the clock futex deadlines are measured on.
inline std::int64_t monotonic_now_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace arch
}  // namespace rwsem

#endif  // RWSEM_ARCH_FUTEX_H_
