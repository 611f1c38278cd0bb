#include "lib/rwsem/testing.h"

#include <cstdio>
#include <cstdlib>

#include "lib/rwsem/internal/runtime.h"

namespace rwsem {
namespace testing {

FakeHandoffClock::FakeHandoffClock(std::int64_t start_ns) : now_(start_ns) {
  if (!internal::set_handoff_clock_override(&now_)) {
    std::fprintf(stderr, "rwsem: only one FakeHandoffClock at a time\n");
    std::abort();
  }
}

FakeHandoffClock::~FakeHandoffClock() { internal::set_handoff_clock_override(nullptr); }

}  // namespace testing
}  // namespace rwsem
