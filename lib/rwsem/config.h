// Tunables of the lock, with the values the seed series uses.
#ifndef RWSEM_LIB_CONFIG_H_
#define RWSEM_LIB_CONFIG_H_

#include <chrono>
#include <cstdint>

namespace rwsem {

// A first waiter that has waited this long sets HANDOFF and stops lock
// stealing until it owns the lock (seed 004: 4 ms). Real-time writers do not
// wait for it.
inline constexpr std::chrono::nanoseconds kDefaultHandoffTimeout =
    std::chrono::milliseconds(4);

// Readers woken by one wake-up when the first waiter is a reader (seed patch
// 6): bounds the waker's work and the growth of the reader count.
inline constexpr int kMaxReadersWakeup = 256;

// Process-wide handoff timeout, used by every lock that does not set its own.
void set_default_handoff_timeout(std::chrono::nanoseconds timeout);
std::chrono::nanoseconds default_handoff_timeout();

struct Options {
  // Per-lock handoff timeout; negative means "use the process-wide default".
  // Stored in microseconds inside the lock; at most about 71 minutes.
  std::chrono::nanoseconds handoff_timeout{-1};
};

}  // namespace rwsem

#endif  // RWSEM_LIB_CONFIG_H_
