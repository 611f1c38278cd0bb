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
#include "lib/rwsem/testing.h"

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

// Per-lock Options are stored in two narrow fields of one word (rwsem.h,
// config_): whole microseconds, clamped to what config.h promises, each
// field on its own, and "negative" meaning the process-wide default. A
// clamp one off lets a large value overflow into the other field or into
// the all-ones "default" code, and the lock would still pass every
// contention test above with the wrong timing: so the values the lock runs
// with are checked here, through the test peer.
template <class Layout>
class RwsemOptions : public ::testing::Test {};
TYPED_TEST_SUITE(RwsemOptions, AllLayouts, LayoutNames);

TYPED_TEST(RwsemOptions, AreStoredAsDocumented) {
  using Sem = rwsem::BasicRwSemaphore<TypeParam>;
  using rwsem::testing::Peer;
  RestoreDefaults restore;
  rwsem::set_default_handoff_timeout(7ms);
  rwsem::set_default_spin_budget(30us);
  // Each field's largest non-default value (config.h): 2^24 - 2 us, 254 us.
  constexpr std::int64_t kHandoffMaxNs = ((std::int64_t{1} << 24) - 2) * 1000;
  constexpr std::int64_t kSpinMaxNs = 254'000;
  const auto handoff = [](const Sem& s) { return Peer::handoff_timeout_ns(s); };
  const auto spin = [](const Sem& s) { return Peer::spin_budget_ns(s); };
  {
    Sem s;  // no Options: the defaults, read when used
    EXPECT_EQ(handoff(s), 7'000'000);
    EXPECT_EQ(spin(s), 30'000);
  }
  {
    Sem s(rwsem::Options{3ms, 100us});
    EXPECT_EQ(handoff(s), 3'000'000);
    EXPECT_EQ(spin(s), 100'000);
  }
  {
    Sem s(rwsem::Options{1999ns, 2999ns});  // whole microseconds, rounded down
    EXPECT_EQ(handoff(s), 1'000);
    EXPECT_EQ(spin(s), 2'000);
  }
  {
    Sem s(rwsem::Options{0ns, 0ns});  // handoff at once; no spinning
    EXPECT_EQ(handoff(s), 0);
    EXPECT_EQ(spin(s), 0);
  }
  {
    // The largest values clamp to each field's largest non-default value.
    Sem s(rwsem::Options{nanoseconds::max(), nanoseconds::max()});
    EXPECT_EQ(handoff(s), kHandoffMaxNs);
    EXPECT_EQ(spin(s), kSpinMaxNs);
  }
  {
    // Each field alone: the other keeps the default.
    Sem h(rwsem::Options{nanoseconds::max(), -1ns});
    EXPECT_EQ(handoff(h), kHandoffMaxNs);
    EXPECT_EQ(spin(h), 30'000);
    Sem b(rwsem::Options{-1ns, nanoseconds::max()});
    EXPECT_EQ(handoff(b), 7'000'000);
    EXPECT_EQ(spin(b), kSpinMaxNs);
  }
  // The defaults stay live for a lock without Options of its own.
  Sem later;
  rwsem::set_default_handoff_timeout(9ms);
  EXPECT_EQ(handoff(later), 9'000'000);
}

TEST(MutexOptions, SpinBudgetIsStoredAsDocumented) {
  using rwsem::testing::MutexPeer;
  RestoreDefaults restore;
  rwsem::set_default_spin_budget(30us);
  // With spinning compiled out (--define=rwsem_spin=off) the mutex runs
  // with no budget, whatever it was given.
  const auto expect = [](std::int64_t ns) { return rwsem::kSpinCompiledIn ? ns : 0; };
  rwsem::Mutex d;
  EXPECT_EQ(MutexPeer::spin_budget_ns(d), expect(30'000));
  rwsem::Mutex s(rwsem::Options{{}, 100us});
  EXPECT_EQ(MutexPeer::spin_budget_ns(s), expect(100'000));
  rwsem::Mutex off(rwsem::Options{{}, 0ns});
  EXPECT_EQ(MutexPeer::spin_budget_ns(off), 0);
  // The mutex stores nanoseconds in 31 bits (mutex.h): about 2.1 s at most.
  rwsem::Mutex big(rwsem::Options{{}, nanoseconds::max()});
  EXPECT_EQ(MutexPeer::spin_budget_ns(big), expect(INT32_MAX));
}

}  // namespace
}  // namespace rwsem_test
