// The model checker checked: classic litmus tests whose outcomes the C++
// memory model allows or forbids. An allowed weak outcome must be found
// (else the checker could not see the bug it exists for); a forbidden one
// must never be produced (else it would report bugs that cannot happen).
// Each test also bounds what "found" costs, so a regression in the
// exploration shows up as a failure here rather than as a silent miss in
// the lock scenarios.
#include <gtest/gtest.h>

#include <cerrno>
#include <new>

#include "conformance/model/model.h"

namespace rwsem {
namespace mc {
namespace {

constexpr auto rlx = std::memory_order_relaxed;
constexpr auto acq = std::memory_order_acquire;
constexpr auto rel = std::memory_order_release;
constexpr auto sc = std::memory_order_seq_cst;

Options exhaustive(int pb = 2) {
  Options o;
  o.mode = Mode::kExhaustive;
  o.preemption_bound = pb;
  o.stale_read_bound = 2;
  o.buffered_store_bound = 1;
  return o;
}

Options random_runs(long n = 3000) {
  Options o;
  o.mode = Mode::kRandom;
  o.executions = n;
  o.seed = 42;
  return o;
}

// Runs `s` under `o`; returns the result after printing its summary.
Result check(const Options& o, const char* name, const Scenario& s) {
  Result r = explore(o, name, s);
  std::printf("%s\n", r.summary.c_str());
  return r;
}

// Store buffering: each thread stores to one location, then loads the
// other (store order `so`, load order `lo`); checks "not both 0".
Scenario store_buffering(std::memory_order so, std::memory_order lo) {
  return [so, lo](Execution& x) {
    Atomic<int> a(0), b(0);
    int r1 = -1, r2 = -1;
    x.spawn([&] {
      a.store(1, so);
      r1 = b.load(lo);
    });
    x.spawn([&] {
      b.store(1, so);
      r2 = a.load(lo);
    });
    x.run();
    MC_CHECK(!(r1 == 0 && r2 == 0), "both read 0");
  };
}

// Message passing with a relaxed flag: the reader may see the flag and
// not the data, and the plain data access is a race.
TEST(ModelLitmus, MessagePassingRelaxedIsARace) {
  for (const Options& o : {exhaustive(), random_runs()}) {
    Result r = check(o, "MP relaxed", [](Execution& x) {
      Cell<int> data(0);
      Atomic<int> flag(0);
      x.spawn([&] {
        data.write(1);
        flag.store(1, rlx);
      });
      x.spawn([&] {
        if (flag.load(rlx) == 1) (void)data.read();
      });
      x.run();
    });
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.report.find("data race"), std::string::npos) << r.report;
  }
}

// With release/acquire the same program is race-free and the reader that
// sees the flag sees the data.
TEST(ModelLitmus, MessagePassingReleaseAcquireIsClean) {
  Result r = check(exhaustive(3), "MP rel/acq", [](Execution& x) {
    Cell<int> data(0);
    Atomic<int> flag(0);
    x.spawn([&] {
      data.write(1);
      flag.store(1, rel);
    });
    x.spawn([&] {
      if (flag.load(acq) == 1) MC_CHECK(data.read() == 1, "stale data after acquire");
    });
    x.run();
  });
  EXPECT_TRUE(r.ok) << r.report;
  EXPECT_TRUE(r.complete);
}

// Message passing through relaxed atomics only: the data load may return
// the old value (a load reads from the store history).
TEST(ModelLitmus, MessagePassingRelaxedAtomicsShowsStaleValue) {
  Result r = check(exhaustive(), "MP atomics relaxed", [](Execution& x) {
    Atomic<int> data(0), flag(0);
    x.spawn([&] {
      data.store(1, rlx);
      flag.store(1, rlx);
    });
    x.spawn([&] {
      if (flag.load(rlx) == 1) MC_CHECK(data.load(rlx) == 1, "saw the flag, not the data");
    });
    x.run();
  });
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.report.find("saw the flag, not the data"), std::string::npos) << r.report;
  EXPECT_NE(r.report.find("older than the newest"), std::string::npos) << r.report;
}

// Store buffering: with relaxed (or release/acquire) operations both
// threads may read 0.
TEST(ModelLitmus, StoreBufferingAllowsBothZero) {
  for (std::memory_order so : {rlx, rel}) {
    Result r = check(exhaustive(), "SB", store_buffering(so, so == rel ? acq : rlx));
    EXPECT_FALSE(r.ok);
  }
}

// ...and seq_cst fences between the store and the load forbid it; so do
// seq_cst operations.
TEST(ModelLitmus, StoreBufferingWithSeqCstFencesForbidsBothZero) {
  Result r = check(exhaustive(3), "SB+fences", [](Execution& x) {
    Atomic<int> a(0), b(0);
    int r1 = -1, r2 = -1;
    x.spawn([&] {
      a.store(1, rlx);
      std::atomic_signal_fence(sc);
      op_fence(sc);
      r1 = b.load(rlx);
    });
    x.spawn([&] {
      b.store(1, rlx);
      op_fence(sc);
      r2 = a.load(rlx);
    });
    x.run();
    MC_CHECK(!(r1 == 0 && r2 == 0), "both read 0 across seq_cst fences");
  });
  EXPECT_TRUE(r.ok) << r.report;
  EXPECT_TRUE(r.complete);

  Result r2 = check(exhaustive(3), "SB seq_cst", store_buffering(sc, sc));
  EXPECT_TRUE(r2.ok) << r2.report;
  EXPECT_TRUE(r2.complete);
}

// A relaxed store followed by a read-modify-write of another location: the
// RMW reads the newest value, so only a store buffer (the first store
// entering memory after the other thread's RMW) shows both zero.
TEST(ModelLitmus, StoreThenRmwNeedsTheStoreBuffer) {
  Result r = check(exhaustive(), "store;RMW", [](Execution& x) {
    Atomic<int> a(0), b(0);
    int r1 = -1, r2 = -1;
    x.spawn([&] {
      a.store(1, rlx);
      r1 = b.load(rlx);
    });
    x.spawn([&] {
      b.store(1, rlx);
      r2 = a.exchange(2, rlx);
    });
    x.run();
    MC_CHECK(!(r1 == 0 && r2 == 0), "store;RMW both read 0");
  });
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.report.find("waits in T1's buffer"), std::string::npos) << r.report;
}

// Coherence: two reads of one location never go backwards in mo.
TEST(ModelLitmus, CoherenceReadRead) {
  Result r = check(exhaustive(3), "CoRR", [](Execution& x) {
    Atomic<int> a(0);
    x.spawn([&] {
      a.store(1, rlx);
      a.store(2, rlx);
    });
    x.spawn([&] {
      const int r1 = a.load(rlx);
      const int r2 = a.load(rlx);
      MC_CHECK(!(r1 == 2 && r2 < 2) && !(r1 == 1 && r2 == 0), "reads went backwards");
    });
    x.run();
  });
  EXPECT_TRUE(r.ok) << r.report;
  EXPECT_TRUE(r.complete);
}

// Release sequence: an RMW between the release store and the acquire load
// keeps the synchronisation.
TEST(ModelLitmus, ReleaseSequenceThroughRmw) {
  Result r = check(exhaustive(3), "release sequence", [](Execution& x) {
    Cell<int> data(0);
    Atomic<int> flag(0);
    x.spawn([&] {
      data.write(1);
      flag.store(1, rel);
    });
    x.spawn([&] { flag.fetch_add(1, rlx); });
    x.spawn([&] {
      if (flag.load(acq) == 2) MC_CHECK(data.read() == 1, "release sequence broken");
    });
    x.run();
  });
  EXPECT_TRUE(r.ok) << r.report;
}

// Fences: relaxed store after a release fence, relaxed load before an
// acquire fence, synchronise.
TEST(ModelLitmus, FenceToFenceSynchronisation) {
  Result r = check(exhaustive(3), "fence-fence", [](Execution& x) {
    Cell<int> data(0);
    Atomic<int> flag(0);
    x.spawn([&] {
      data.write(1);
      op_fence(rel);
      flag.store(1, rlx);
    });
    x.spawn([&] {
      if (flag.load(rlx) == 1) {
        op_fence(acq);
        MC_CHECK(data.read() == 1, "fence synchronisation broken");
      }
    });
    x.run();
  });
  EXPECT_TRUE(r.ok) << r.report;
  EXPECT_TRUE(r.complete);
}

// A futex wait nobody wakes is a deadlock, reported with the threads.
TEST(ModelLitmus, LostWakeupIsReported) {
  Result r = check(exhaustive(), "lost wake-up", [](Execution& x) {
    Atomic<std::uint32_t> word(0);
    x.spawn([&] { op_futex_wait(word.location(), 0, INT64_MAX); });
    x.spawn([&] { word.store(1, rlx); });  // forgets the wake
    x.run();
  });
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.report.find("deadlock or lost wake-up"), std::string::npos) << r.report;
  EXPECT_NE(r.report.find("blocked in futex_wait"), std::string::npos) << r.report;
}

// A timed futex wait times out in virtual time instead of deadlocking.
TEST(ModelLitmus, TimedWaitTimesOut) {
  Result r = check(exhaustive(), "timed wait", [](Execution& x) {
    Atomic<std::uint32_t> word(0);
    int rc = -1;
    x.spawn([&] { rc = op_futex_wait(word.location(), 0, now_ns() + 1000); });
    x.run();
    MC_CHECK(rc == ETIMEDOUT, "the wait did not time out");
  });
  EXPECT_TRUE(r.ok) << r.report;
}

// An object published with a relaxed store: the reader's access to the
// object's atomic is not ordered after its initialisation.
TEST(ModelLitmus, PublicationWithoutReleaseIsARace) {
  for (std::memory_order pub : {rlx, rel}) {
    Result r = check(exhaustive(), "publication", [pub](Execution& x) {
      Atomic<Atomic<int>*> slot(nullptr);
      alignas(Atomic<int>) unsigned char storage[sizeof(Atomic<int>)];
      x.spawn([&] { slot.store(new (storage) Atomic<int>(7), pub); });
      x.spawn([&] {
        if (Atomic<int>* p = slot.load(pub == rel ? acq : rlx)) (void)p->load(rlx);
      });
      x.run();
    });
    if (pub == rlx) {
      EXPECT_FALSE(r.ok);
      EXPECT_NE(r.report.find("before its initialisation"), std::string::npos) << r.report;
    } else {
      EXPECT_TRUE(r.ok) << r.report;
    }
  }
}

// An atomic touched by a thread after handing it to the thread that
// destroys it is reported.
TEST(ModelLitmus, UseAfterDestructionIsReported) {
  Result r = check(exhaustive(), "use after destruction", [](Execution& x) {
    alignas(Atomic<int>) unsigned char storage[sizeof(Atomic<int>)];
    Atomic<int>* a = new (storage) Atomic<int>(0);
    x.spawn([&] {
      a->store(1, rel);
      (void)a->load(rlx);  // touches the object after handing it over
    });
    x.spawn([&] {
      while (a->load(acq) != 1) op_spin_hint(true);
      a->~Atomic();
    });
    x.run();
  });
  // Depending on the schedule the late access comes after the destructor
  // (a use after free) or before it without being ordered (a race with
  // the destruction); the first execution explored is the second.
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.report.find("use after free") != std::string::npos ||
              r.report.find("does not happen before the destruction") != std::string::npos)
      << r.report;
}

// Destroying an object whose last access by another thread does not
// happen before the destruction is a race (the free would race with it).
TEST(ModelLitmus, DestructionMustFollowEveryAccess) {
  for (std::memory_order handover : {rlx, rel}) {
    Result r = check(exhaustive(), "destruction", [handover](Execution& x) {
      alignas(Atomic<int>) unsigned char storage[sizeof(Atomic<int>)];
      Atomic<int>* a = new (storage) Atomic<int>(0);
      Atomic<int> done(0);
      x.spawn([&] {
        a->store(1, rlx);
        done.store(1, handover);
      });
      x.spawn([&] {
        while (done.load(handover == rel ? acq : rlx) != 1) op_spin_hint(true);
        a->~Atomic();
      });
      x.run();
    });
    if (handover == rlx) {
      EXPECT_FALSE(r.ok);
      EXPECT_NE(r.report.find("does not happen before the destruction"), std::string::npos)
          << r.report;
    } else {
      EXPECT_TRUE(r.ok) << r.report;
    }
  }
}

// futex_wake names its word by address only (FUTEX_WAKE of a private futex
// reads no memory), so a wake-up after the word's destruction is not an
// access; futex_wait reads the word, so a wait after it is a use after free.
TEST(ModelLitmus, FutexWakeAfterDestructionIsNoAccessButWaitIs) {
  for (bool wait : {false, true}) {
    Result r =
        check(exhaustive(), wait ? "futex_wait after destruction" : "futex_wake after destruction",
              [wait](Execution& x) {
      alignas(Atomic<std::uint32_t>) unsigned char storage[sizeof(Atomic<std::uint32_t>)];
      auto* w = new (storage) Atomic<std::uint32_t>(0);
      Atomic<int> released(0);
      x.spawn([&] {
        released.store(1, rel);
        if (wait) (void)op_futex_wait(w->location(), 0, now_ns() + 1000);
        else op_futex_wake(w->location(), 1);
      });
      x.spawn([&] {
        while (released.load(acq) != 1) op_spin_hint(true);
        w->~Atomic();
      });
      x.run();
    });
    if (wait) {
      EXPECT_FALSE(r.ok);
      EXPECT_TRUE(r.report.find("use after free") != std::string::npos ||
                  r.report.find("does not happen before the destruction") != std::string::npos)
          << r.report;
    } else {
      EXPECT_TRUE(r.ok) << r.report;
    }
  }
}

// on_quiescent: the scenario's check runs when no thread can run and a
// timed wait would end the standstill, so it sees a waiter left asleep
// that only its timeout wakes; with a waker, no such state arises.
TEST(ModelLitmus, QuiescentCheckSeesAWaitOnlyATimeoutEnds) {
  for (bool woken : {false, true}) {
    Result r = check(exhaustive(), woken ? "quiescent, woken" : "quiescent, only a timeout",
                     [woken](Execution& x) {
      Atomic<std::uint32_t> word(0);
      bool waiting = false;  // plain: model threads are coroutines
      x.on_quiescent([&] { return waiting ? std::string("it waits") : ""; });
      x.spawn([&] {
        waiting = true;
        while (word.load(acq) == 0 &&
               op_futex_wait(word.location(), 0, now_ns() + 1000) != ETIMEDOUT) {
        }
        waiting = false;
      });
      if (woken)
        x.spawn([&] {
          word.store(1, rel);
          op_futex_wake(word.location(), 1);
        });
      x.run();
    });
    if (woken) {
      EXPECT_TRUE(r.ok) << r.report;
    } else {
      EXPECT_FALSE(r.ok);
      EXPECT_NE(r.report.find("it waits"), std::string::npos) << r.report;
    }
  }
}

// Random mode replays: the same seed gives the same execution.
TEST(ModelLitmus, RandomModeFindsStoreBufferingAndNamesSeed) {
  Result r = check(random_runs(5000), "SB random", store_buffering(rlx, rlx));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.report.find("RWSEM_MC_SEED=0x"), std::string::npos) << r.report;
}

}  // namespace
}  // namespace mc
}  // namespace rwsem
