#include "lib/rwsem/lock_events.h"

#include <atomic>
#include <ostream>

#include "arch/cpu.h"

namespace rwsem {
namespace {

// One cache line per counter so that counting readers and writers do not
// bounce a shared line between them.
struct alignas(arch::kCacheLineSize) Counter {
  std::atomic<std::uint64_t> value{0};
};
Counter g_counters[static_cast<int>(LockEvent::kCount)];

constexpr const char* kNames[] = {
#define RWSEM_X(name, desc) #name,
    RWSEM_LOCK_EVENT_LIST(RWSEM_X)
#undef RWSEM_X
};

}  // namespace

namespace internal {
void lock_event_add(LockEvent e, std::uint64_t n) {
  g_counters[static_cast<int>(e)].value.fetch_add(n, std::memory_order_relaxed);
}
}  // namespace internal

const char* lock_event_name(LockEvent e) { return kNames[static_cast<int>(e)]; }

LockEventSnapshot lock_events_snapshot() {
  LockEventSnapshot s;
  for (int i = 0; i < static_cast<int>(LockEvent::kCount); ++i)
    s.counts[i] = g_counters[i].value.load(std::memory_order_relaxed);
  return s;
}

LockEventSnapshot LockEventSnapshot::operator-(const LockEventSnapshot& earlier) const {
  LockEventSnapshot d;
  for (std::size_t i = 0; i < counts.size(); ++i) d.counts[i] = counts[i] - earlier.counts[i];
  return d;
}

std::ostream& operator<<(std::ostream& os, const LockEventSnapshot& s) {
  bool any = false;
  for (int i = 0; i < static_cast<int>(LockEvent::kCount); ++i) {
    if (s.counts[i] == 0) continue;
    os << (any ? " " : "") << kNames[i] << '=' << s.counts[i];
    any = true;
  }
  if (!any) os << "(no events)";
  return os;
}

}  // namespace rwsem
