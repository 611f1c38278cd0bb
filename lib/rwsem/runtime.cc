#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "arch/futex.h"
#include "lib/rwsem/config.h"
#include "lib/rwsem/internal/runtime.h"
#include "lib/rwsem/internal/thread_record.h"
#include "lib/rwsem/testing.h"

namespace rwsem {
namespace {

std::atomic<std::int64_t> g_default_handoff_ns{kDefaultHandoffTimeout.count()};
// nullptr = the real monotonic clock. Written only by tests.
std::atomic<testing::FakeHandoffClock*> g_fake_clock{nullptr};

}  // namespace

void set_default_handoff_timeout(std::chrono::nanoseconds timeout) {
  g_default_handoff_ns.store(timeout.count(), std::memory_order_relaxed);
}

std::chrono::nanoseconds default_handoff_timeout() {
  return std::chrono::nanoseconds(
      g_default_handoff_ns.load(std::memory_order_relaxed));
}

namespace internal {

std::int64_t default_handoff_timeout_ns() {
  return g_default_handoff_ns.load(std::memory_order_relaxed);
}

std::int64_t handoff_clock_now() {
  // acquire pairs with the release in FakeHandoffClock's constructor, so a
  // thread that sees the fake clock also sees its initial time.
  testing::FakeHandoffClock* fake = g_fake_clock.load(std::memory_order_acquire);
  return fake ? fake->now_ns() : arch::monotonic_now_ns();
}

ThreadRecord& current_thread() {
  static thread_local ThreadRecord record;
  if (record.owner_id == 0) {
    const auto addr = reinterpret_cast<std::uintptr_t>(&record);
    const std::uint64_t id = static_cast<std::uint64_t>(addr) >> kOwnerIdShift;
    if (id == 0 || (addr & ((std::uintptr_t{1} << kOwnerIdShift) - 1)) != 0 ||
        thread_from_owner_id(id) != &record) {
      std::fprintf(stderr,
                   "rwsem: thread record %p is not %d-byte aligned; owner ids "
                   "would not round-trip\n",
                   static_cast<void*>(&record), 1 << kOwnerIdShift);
      std::abort();
    }
    record.tid = static_cast<std::uint32_t>(syscall(SYS_gettid));
    record.owner_id = id;
  }
  return record;
}

bool current_thread_is_realtime() {
  const int policy = sched_getscheduler(0);
  return policy == SCHED_FIFO || policy == SCHED_RR;
}

void debug_fail(const char* what, const void* lock,
                const std::string& decoded_state) {
  std::fprintf(stderr,
               "rwsem DEBUG: %s\n  lock:   %p\n  count:  %s\n  thread: tid %ld "
               "(owner id 0x%llx)\n",
               what, lock, decoded_state.c_str(),
               static_cast<long>(syscall(SYS_gettid)),
               static_cast<unsigned long long>(current_thread().owner_id));
  std::fflush(stderr);
  std::abort();
}

}  // namespace internal

namespace testing {

FakeHandoffClock::FakeHandoffClock(std::int64_t start_ns) : now_(start_ns) {
  FakeHandoffClock* expected = nullptr;
  if (!g_fake_clock.compare_exchange_strong(expected, this,
                                            std::memory_order_release,
                                            std::memory_order_relaxed)) {
    std::fprintf(stderr, "rwsem: only one FakeHandoffClock at a time\n");
    std::abort();
  }
}

FakeHandoffClock::~FakeHandoffClock() {
  g_fake_clock.store(nullptr, std::memory_order_release);
}

}  // namespace testing
}  // namespace rwsem
