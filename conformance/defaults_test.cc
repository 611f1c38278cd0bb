// The process-wide tunables (config.h) at their extremes: every lock type
// stays correct, and nothing computes "now + tunable" past INT64_MAX (signed
// overflow; --config=ubsan aborts on it).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <type_traits>

#include "conformance/lock_types.h"
#include "conformance/test_util.h"
#include "lib/rwsem/config.h"

namespace rwsem_test {
namespace {

using namespace std::chrono_literals;
using std::chrono::nanoseconds;

// Puts the defaults back whatever the test does: they are process-wide.
struct RestoreDefaults {
  const nanoseconds handoff = rwsem::default_handoff_timeout();
  const nanoseconds spin = rwsem::default_spin_budget();
  ~RestoreDefaults() {
    rwsem::set_default_handoff_timeout(handoff);
    rwsem::set_default_spin_budget(spin);
  }
};

// A writer holds the lock while a reader and a writer come for it (each
// spins or queues, as the lock decides), then lets go; both get it.
template <class T>
void contend(T& m) {
  m.lock();
  std::atomic<int> started{0}, done{0};
  ThreadGroup g;
  g.spawn([&] {
    started++;
    read_lock(m);
    read_unlock(m);
    done++;
  });
  g.spawn([&] {
    started++;
    m.lock();
    m.unlock();
    done++;
  });
  ASSERT_TRUE(eventually(m, [&] { return started.load() == 2; }, "contenders started"));
  std::this_thread::sleep_for(20ms);  // let them spin and queue (not required to pass)
  EXPECT_EQ(done.load(), 0) << "a contender got past the holder: " << m.describe();
  m.unlock();
  g.join();
  EXPECT_EQ(done.load(), 2);
  EXPECT_EQ(m.count(), 0u) << m.describe();
}

template <class T>
class TunableDefaults : public ::testing::Test {};
TYPED_TEST_SUITE(TunableDefaults, AllLocks, LockNames);

TYPED_TEST(TunableDefaults, MaximumDefaultsAreSafeUnderContention) {
  RestoreDefaults restore;
  rwsem::set_default_handoff_timeout(nanoseconds::max());
  rwsem::set_default_spin_budget(nanoseconds::max());
  TypeParam m;  // takes the process-wide defaults
  contend(m);
}

TYPED_TEST(TunableDefaults, NegativeDefaultsMeanZero) {
  RestoreDefaults restore;
  rwsem::set_default_handoff_timeout(nanoseconds::min());
  rwsem::set_default_spin_budget(-1ns);
  EXPECT_EQ(rwsem::default_handoff_timeout().count(), 0);
  EXPECT_EQ(rwsem::default_spin_budget().count(), 0);
  TypeParam m;
  contend(m);
}

// The Options path: per-lock values are stored in narrow fields and
// clamped there (config.h), so the maximum is safe too.
TYPED_TEST(TunableDefaults, MaximumOptionsAreSafeUnderContention) {
  if constexpr (!std::is_constructible_v<TypeParam, const rwsem::Options&>) {
    GTEST_SKIP() << TypeParam::kName << " takes no Options";
  } else {
    TypeParam m(rwsem::Options{nanoseconds::max(), nanoseconds::max()});
    contend(m);
  }
}

}  // namespace
}  // namespace rwsem_test
