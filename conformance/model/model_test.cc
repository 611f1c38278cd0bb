// The locks' own code under the model checker (model.h): every lock type
// and rwsem layout, instantiated on ModelPlatform, in scenarios that cover
// the protocols whose ordering the native and TSan runs cannot judge:
// the hand-over of the lock between critical sections, the wake path
// (queue, grant, release), handoff set and clear, a timeout racing a
// wake-up, downgrade, the spin queue's hand-over and give-up, the mutex's
// sleep protocol and pickup, and the queued rwlock's head reader and
// writer.
//
// Every scenario checks three things, whatever the schedule and whatever
// stores the loads return:
//  - the test's data lives in mc::Cell, so a critical section that is not
//    ordered after the previous one (a weakened acquire or release, a lost
//    mutual exclusion) is a reported data race;
//  - no execution ends with every thread blocked (a lost wake-up), or spins
//    without end (livelock);
//  - after all threads have finished the lock is free: count 0, no flag
//    left behind, no waiter queued.
//
// Small scenarios (two threads, one section each) are explored
// exhaustively within a preemption bound; larger ones with PCT-style
// random schedules. Counts can be raised with RWSEM_MC_SCALE (ci/qualify
// runs them longer); RWSEM_MC_SEED replays one random execution.
// RWSEM_MC_SEED_BASE=N moves every random scenario to a fresh range of
// seeds (N << 32 added to its base), so that repeated runs explore new
// executions instead of the same ones (ci/qualify's full profile picks N
// at random, prints it, and checks in this test's log that every random
// scenario's seeds start at N << 32); a failure still prints the one seed
// that replays it.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <map>
#include <memory>
#include <new>
#include <sstream>
#include <string>
#include <type_traits>

#include "arch/count_layouts.h"
#include "conformance/lock_types.h"
#include "conformance/model/model.h"
#include "conformance/model/model_platform.h"
#include "lib/rwsem/internal/count_bits.h"
#include "lib/rwsem/internal/osq.h"
#include "lib/rwsem/internal/wait_lock.h"
#include "lib/rwsem/lock_events.h"
#include "lib/rwsem/mutex.h"
#include "lib/rwsem/qrwlock.h"
#include "lib/rwsem/rwsem.h"
#include "lib/rwsem/testing.h"

namespace rwsem {
namespace mc {
namespace {

using std::chrono::microseconds;
using std::chrono::nanoseconds;
using namespace rwsem_test;  // the lock adapters (lock_types.h)

template <class L>
using ModelRwsem = BasicRwSemaphore<L, ModelPlatform>;
using ModelMutex = BasicMutex<ModelPlatform>;
using ModelQRwLock = BasicQRwLock<ModelPlatform>;

using ModelLocks = ::testing::Types<ModelRwsem<Generic64Layout>, ModelRwsem<Generic32Layout>,
                                    ModelRwsem<MergedOwnerLayout>, ModelQRwLock, ModelMutex>;
using ModelLayouts = ::testing::Types<Generic64Layout, Generic32Layout, MergedOwnerLayout>;

double scale() {
  const char* s = std::getenv("RWSEM_MC_SCALE");
  const double v = s != nullptr ? std::atof(s) : 1.0;
  return v > 0 ? v : 1.0;
}

Options exhaustive(int preemptions = 2) {
  Options o;
  o.mode = Mode::kExhaustive;
  o.preemption_bound = preemptions;
  o.stale_read_bound = 1;
  o.buffered_store_bound = 1;
  o.max_seconds = 120 * scale();
  return o;
}

// RWSEM_MC_SEED_BASE, shifted past any scenario's execution count, so
// that two bases never share an execution. Read before main(): a value
// that is not a number below 2^32 stops the test before it runs anything,
// rather than silently running base 0.
std::uint64_t read_seed_base() {
  const char* s = std::getenv("RWSEM_MC_SEED_BASE");
  if (s == nullptr || *s == '\0') return 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s, &end, 0);
  if (*end != '\0' || v >= (1ull << 32)) {
    std::fprintf(stderr, "RWSEM_MC_SEED_BASE=%s: expected a number below 2^32\n", s);
    std::exit(2);
  }
  std::printf("model_test: random scenarios from seed base %llu (RWSEM_MC_SEED_BASE)\n", v);
  return std::uint64_t{v} << 32;
}
const std::uint64_t g_seed_base = read_seed_base();

Options random_runs(long n, std::uint64_t seed) {
  Options o;
  o.mode = Mode::kRandom;
  o.executions = static_cast<long>(static_cast<double>(n) * scale());
  o.seed = seed + g_seed_base;
  o.max_seconds = 300 * scale();
  return o;
}

// How long a section holds the lock.
//  - kBrief: it reads or writes the data and leaves.
//  - kYields: it yields once inside (1 us of virtual time): holders stay
//    long enough for timed waiters and spinners to run out of time.
//  - kSleeps: it sleeps 2 us inside (a timed futex wait nobody ends), as a
//    holder blocked in I/O: while it sleeps every other thread may be
//    asleep too, and the quiescence check (quiescent()) sees whether a
//    waiter that could join the lock was left asleep.
enum class Hold { kBrief, kYields, kSleeps };

// How a scenario configures the lock.
struct Config {
  bool spin = false;
  long handoff_us = 1000000;  // effectively never, but for the handoff timer
  Hold hold = Hold::kBrief;
  // Spinning asked for and compiled in (--define=rwsem_spin=off compiles it
  // out; the scenario then covers the sleeping paths twice).
  bool spinning() const { return spin && kSpinCompiledIn; }
};

// A lock of type T, constructed in place (locks are not movable).
template <class T>
class Box {
 public:
  explicit Box(const Config& c) {
    if constexpr (std::is_constructible_v<T, const rwsem::Options&>) {
      rwsem::Options o;
      o.spin_budget = c.spin ? microseconds(2) : nanoseconds(0);
      o.handoff_timeout = microseconds(c.handoff_us);
      p_ = new (buf_) T(o);
    } else {
      p_ = new (buf_) T();
    }
  }
  ~Box() { p_->~T(); }
  T& operator*() { return *p_; }

 private:
  alignas(T) unsigned char buf_[sizeof(T)];
  T* p_;
};

template <class T>
std::string state_of(T& lock) {
  return lock.describe();
}

// The final-state check every scenario ends with.
template <class T>
void check_free(T& lock) {
  MC_CHECK(lock.count() == 0, "the lock is not free after every thread left: " + lock.describe());
  if constexpr (std::is_same_v<T, ModelMutex>) {
    MC_CHECK(lock.queue_length() == 0, "waiters left on the mutex's list");
  } else if constexpr (!std::is_same_v<T, ModelQRwLock>) {
    MC_CHECK(testing::Peer::queue_length(lock) == 0, "waiters left in the rwsem's queue");
  }
}

template <class T, class F>
void for_each_word(T& lock, F f) {
  if constexpr (std::is_same_v<T, ModelMutex>) {
    testing::MutexPeer::for_each_word(lock, f);
  } else if constexpr (std::is_same_v<T, ModelQRwLock>) {
    testing::QRwLockPeer::for_each_word(lock, f);
  } else {
    testing::Peer::for_each_word(lock, f);
  }
}

// The address of the lock's main word (the rwsem's count, the mutex's
// owner word, the queued rwlock's cnts).
template <class T>
const void* main_word(T& lock) {
  const void* w = nullptr;
  for_each_word(lock, [&](const char*, const void* p, std::size_t) {
    if (w == nullptr) w = p;
  });
  return w;
}

template <class T>
void name_lock(Execution& x, T& lock) {
  const std::string base = T::kName;
  x.name(&lock, sizeof lock, base);
  auto field = [&](const char* n, const void* p, std::size_t size) {
    x.name(p, size, base + "." + n);
  };
  for_each_word(lock, field);
  x.describe([&lock] { return state_of(lock); });
}

enum Kind { kRead, kWrite, kDowngrade, kReadTimed, kWriteTimed, kReadTry, kWriteTry };

const char* kind_name(Kind k) {
  static const char* names[] = {"read",        "write",    "downgrade", "read-timed",
                                "write-timed", "read-try", "write-try"};
  return names[k];
}

// Ghost state of one execution, kept by section() when given one: plain
// memory, not modelled (the model's threads are coroutines on one OS
// thread, so it follows the schedule exactly and adds no synchronisation).
//  - calls_while_held: how often a thread called for the lock while another
//    was inside its section (from its lock call's return to its unlock
//    call's return): executions in which one section had to wait for, or
//    be refused by, the other, or raced with its release.
//  - readers / writers: the threads that hold the lock now, from the lock
//    call's return to the unlock call; downgrading: those inside a
//    downgrade call, which hold it as one or the other throughout. Every
//    value stored to the main word must account for them
//    (holders_accounted() below).
//  - acquiring_readers / acquiring_writers: the threads inside a lock
//    call, by kind. When no thread can run, none of them may be waiting
//    for a lock it could take (quiescent()).
//  - bias_past_handoff (the rwsem): per thread (its record), whether the
//    reader bias it last added itself went into a count with HANDOFF set
//    and no writer (note_reader_bias()). A reader may not enter on such a
//    bias: the lock is owed to the first waiter.
struct Ghost {
  int inside = 0;
  int acquiring_readers = 0;
  int acquiring_writers = 0;
  long calls_while_held = 0;
  int readers = 0;
  int writers = 0;
  int downgrading = 0;
  std::map<const void*, bool> bias_past_handoff;
};

// One critical section of kind k. A writing section increments the cell;
// a reading one reads it. Returns the number of increments made.
template <class T>
int section(T& lock, Cell<int>& data, Kind k, nanoseconds timeout = nanoseconds(300),
            bool* timed_out = nullptr, Hold hold = Hold::kBrief, Ghost* ghost = nullptr) {
  auto gave_up = [&] {
    if (timed_out != nullptr) *timed_out = true;
    return 0;
  };
  auto work = [&] {
    if (hold == Hold::kYields) ModelPlatform::yield();
    if (hold == Hold::kSleeps) {
      Atomic<std::uint32_t> nap(0);  // nobody wakes it: the wait times out
      (void)ModelPlatform::futex_wait(&nap, 0, ModelPlatform::now_ns() + 2000);
    }
  };
  auto calling = [&] {
    if (ghost != nullptr && ghost->inside > 0) ++ghost->calls_while_held;
  };
  auto entered = [&](bool reader) {
    if (ghost == nullptr) return;
    MC_CHECK(!reader || !ghost->bias_past_handoff[&ModelPlatform::current_thread()],
             "a reader entered on the bias it added while HANDOFF was set: the lock is owed to "
             "the first waiter");
    ++ghost->inside;
    ++(reader ? ghost->readers : ghost->writers);
  };
  auto releasing = [&](bool reader) {
    if (ghost != nullptr) --(reader ? ghost->readers : ghost->writers);
  };
  auto leaving = [&] {
    if (ghost != nullptr) --ghost->inside;
  };
  calling();
  const bool reader = k == kRead || k == kReadTimed || k == kReadTry;
  if (ghost != nullptr) ++(reader ? ghost->acquiring_readers : ghost->acquiring_writers);
  bool got = true;
  switch (k) {
    case kRead: read_lock(lock); break;
    case kReadTimed: got = read_lock_for(lock, timeout); break;
    case kReadTry: got = read_try_lock(lock); break;
    case kWrite:
    case kDowngrade: lock.lock(); break;
    case kWriteTimed: got = write_lock_for(lock, timeout); break;
    case kWriteTry: got = lock.try_lock(); break;
  }
  if (ghost != nullptr) --(reader ? ghost->acquiring_readers : ghost->acquiring_writers);
  if (!got) return k == kReadTry || k == kWriteTry ? 0 : gave_up();
  entered(reader);
  if (reader) (void)data.read();
  else data.write(data.read() + 1);
  if (k != kReadTry && k != kWriteTry && k != kDowngrade) work();
  if (k == kDowngrade) {
    if (ghost != nullptr) {
      --ghost->writers;
      ++ghost->downgrading;
    }
    const bool d = downgrade(lock);
    if (ghost != nullptr) {
      --ghost->downgrading;
      ++(d ? ghost->readers : ghost->writers);
    }
    (void)data.read();
    work();
    releasing(d);
    unlock_after_downgrade(lock, d);
  } else {
    releasing(reader);
    if (reader) read_unlock(lock);
    else lock.unlock();
  }
  leaving();
  return reader ? 0 : 1;
}

// What the explorations reached, summed over all executions: a scenario
// that never reaches the protocol state it is about proves nothing, so the
// tests assert on these (the lock events, where compiled in, and the
// states the lock's main word went through).
struct Coverage {
  LockEventSnapshot events;  // rwsem lock events (this binary counts them)
  long waiters = 0;          // main word stored with WAITERS (rwsem, mutex)
  long handoff = 0;          // ... with HANDOFF (rwsem, mutex)
  long pickup = 0;           // ... with PICKUP (mutex: a lock handed over)
  long writer_waiting = 0;   // qrwlock: a head writer set WAITING
  long reader_behind_writer = 0;  // qrwlock: a head reader's bias beside a writer
  long timeouts = 0;         // timed sections that gave up
  long calls_while_held = 0;  // Ghost, summed over executions
  long quiescent_waits = 0;   // quiescent states with a thread in a lock call
  std::uint64_t event(LockEvent e) const { return events[e]; }
  std::string text() const {
    std::ostringstream os;
    os << "waiters " << waiters << ", handoff " << handoff << ", pickup " << pickup
       << ", writer waiting " << writer_waiting << ", reader behind writer " << reader_behind_writer
       << ", timeouts " << timeouts << ", calls while held " << calls_while_held
       << ", quiescent waits " << quiescent_waits;
    if (kLockEventsEnabled) os << "; events: " << events;
    return os.str();
  }
};

// Sorts one value stored to the lock's main word into the coverage.
template <class T>
void classify(std::uint64_t v, Coverage& cov) {
  if constexpr (std::is_same_v<T, ModelMutex>) {
    using L = MutexOwnerLayout;
    const auto w = static_cast<L::Word>(v);
    cov.waiters += L::has_waiters(w);
    cov.handoff += L::has_handoff(w);
    cov.pickup += L::has_pickup(w);
  } else if constexpr (std::is_same_v<T, ModelQRwLock>) {
    using L = QRwLockLayout;
    const auto w = static_cast<L::Word>(v);
    cov.writer_waiting += L::writer_waiting(w);
    cov.reader_behind_writer += L::write_locked(w) && L::readers(w) > 0;
  } else {
    using B = internal::CountBits<typename T::layout_type>;
    const auto w = static_cast<typename T::Word>(v);
    cov.waiters += B::has_waiters(w);
    cov.handoff += B::has_handoff(w);
  }
}

// A value of the lock's main word, decoded as far as the holder checks
// need: the reader count (none for the mutex), whether a writer holds the
// lock, and whether the flags are ones a correct sequence produces (the
// rwsem's is_consistent()).
struct MainWord {
  std::uint64_t readers = 0;
  bool write_locked = false;
  bool consistent = true;
};
template <class T>
MainWord decode(std::uint64_t v) {
  if constexpr (std::is_same_v<T, ModelMutex>) {
    return {0, MutexOwnerLayout::owner_bits(v) != 0, true};
  } else if constexpr (std::is_same_v<T, ModelQRwLock>) {
    using L = QRwLockLayout;
    const auto w = static_cast<L::Word>(v);
    return {static_cast<std::uint64_t>(L::readers(w)), L::write_locked(w), true};
  } else {
    using B = internal::CountBits<typename T::layout_type>;
    const auto w = static_cast<typename T::Word>(v);
    return {B::reader_count(w), B::is_write_locked(w), B::is_consistent(w)};
  }
}

// Does a value stored to the lock's main word account for every thread
// that holds the lock (Ghost)? Each holder's share of the word (a reader
// bias, the writer bit or owner) enters it by an RMW before the lock call
// returns and leaves it only in the unlock call, and every later store is
// an RMW on the newest value, so no store in between may lack it: one
// that does lost a holder (a bias subtracted twice, a grant told before
// its bias was added, a release on another thread's behalf).
template <class T>
bool holders_accounted(std::uint64_t v, const Ghost& g) {
  const MainWord m = decode<T>(v);
  // The mutex is exclusive whatever the section's kind.
  if constexpr (!kShared<T>) return g.readers + g.writers == 0 || m.write_locked;
  // A downgrader holds the writer bits or a reader bias, never neither.
  const int readers = g.readers + (m.write_locked ? 0 : g.downgrading);
  return m.readers >= static_cast<std::uint64_t>(readers) && (g.writers == 0 || m.write_locked);
}

// What is wrong with a quiescent state (no thread can run, some wait with
// a deadline: a timed waiter, a queued writer's handoff timer, a holder
// asleep in its section; Execution::on_quiescent()), or "" if nothing is.
// Every thread inside a lock call is then asleep in it, and none may be
// waiting for a lock it could take: whoever last made that possible owed
// it a wake-up, and only a timeout would now end its wait (the deadlock
// check sees only waits without one).
//  - Nobody holds the lock: every waiter could take it.
//  - Readers hold it (a shared lock) and no writer holds it or waits for
//    it: a waiting reader could join them. (No fairness rule keeps a
//    reader out when no writer waits; the read-count limit, READFAIL, is
//    far beyond these scenarios' thread counts.)
// This judges lateness, which the final-state and deadlock checks cannot:
// a waiter left asleep until a later unlock happens to wake it passes them.
template <class T>
std::string quiescent(const Ghost& g) {
  const int waiting = g.acquiring_readers + g.acquiring_writers;
  if (waiting == 0 || g.downgrading > 0) return "";
  if (g.readers + g.writers == 0)
    return std::to_string(waiting) + " thread(s) wait inside a lock call while nobody holds it";
  if (kShared<T> && g.writers == 0 && g.acquiring_writers == 0 && g.acquiring_readers > 0)
    return std::to_string(g.acquiring_readers) + " reader(s) wait while " +
           std::to_string(g.readers) + " reader(s) hold the lock and no writer holds or wants it";
  return "";
}

// Could a value stored to the lock's main word be there with `threads`
// threads using the lock? Each thread has at most one reader bias in the
// word at a time (its own, or one a waker added when granting it), so the
// reader count can never exceed the thread count: a larger one is a bias
// subtracted that was never added (the reader field wrapped) or one added
// twice. Unlike holders_accounted() it needs no holder inside at the
// time, so a wrapped count fails at the store that wrapped it even while a
// writer or nobody holds the lock.
template <class T>
bool readers_possible(std::uint64_t v, int threads) {
  const MainWord m = decode<T>(v);
  return m.readers <= static_cast<std::uint64_t>(threads) && m.consistent;
}

// The rwsem layouts, which have a count with HANDOFF (the model's other
// lock types, the mutex and the queued rwlock, are judged without it).
template <class T>
inline constexpr bool kIsRwsem = !std::is_same_v<T, ModelMutex> && !std::is_same_v<T, ModelQRwLock>;

// Did a store to the lock's main word take the lock past a hand-over? `before`
// is the value it replaced (the rwsem's count and the mutex's owner word
// change only by RMWs, so consecutive stores in the modification order are
// what each RMW read and wrote). Returns what is wrong, or "". This judges
// order, which the other checks cannot: a lock taken past the waiter owed
// it keeps exclusion, the data and the final state.
//  - rwsem: while HANDOFF is set the lock is owed to the first waiter
//    (invariant H in rwsem.h): no writer but that waiter may take it,
//    whether by a fast path, a spin, a steal or a retry from further back
//    in the queue. So a store that write-locks a count that had HANDOFF set
//    and no writer must be the first waiter's own (its try_write_lock(),
//    which runs with the wait lock held while it is still queued first).
//  - mutex: HANDOFF asks the owner to hand the lock over, so the owner bits
//    may then change only to a hand-over (PICKUP), and only then: a lock
//    handed over without the request is one that a running thread could
//    have taken. A handed-over lock keeps its addressee in the owner bits
//    until that thread itself clears PICKUP (the waiter's pickup, or its
//    give_up() that finds it handed).
template <class T>
std::string handoff_bypass(std::uint64_t before, std::uint64_t after, T& lock) {
  if constexpr (std::is_same_v<T, ModelMutex>) {
    // Decoded here from the bit constants, not with the layout's own
    // predicates, so that a broken predicate does not break the check too.
    using L = MutexOwnerLayout;
    const auto owner = [](std::uint64_t w) {
      return w & ~std::uint64_t{L::kFlagMask | L::kReservedMask};
    };
    const auto self = reinterpret_cast<std::uintptr_t>(&ModelPlatform::current_thread());
    if ((before & L::kPickup) != 0) {
      if (owner(after) != owner(before))
        return "a lock handed over (PICKUP) changed owner before its addressee took it";
      if ((after & L::kPickup) == 0 && owner(after) != self)
        return "a thread other than the addressee picked up a handed-over lock";
      return "";
    }
    if ((after & L::kPickup) != 0 && (before & L::kHandoff) == 0)
      return "the lock was handed over (PICKUP) without a HANDOFF request";
    if ((before & L::kHandoff) != 0 && owner(after) != owner(before) && (after & L::kPickup) == 0)
      return "the owner word changed owner with HANDOFF set, but not by a hand-over (PICKUP)";
    return "";
  } else if constexpr (!kIsRwsem<T>) {
    return "";
  } else {
    using B = internal::CountBits<typename T::layout_type>;
    const auto b = static_cast<typename T::Word>(before);
    const auto a = static_cast<typename T::Word>(after);
    if (!B::has_handoff(b) || B::is_write_locked(b) || !B::is_write_locked(a)) return "";
    const auto* owed = testing::Peer::first_waiter_thread(lock);
    if (owed == &ModelPlatform::current_thread()) return "";
    return std::string("a writer took the lock past HANDOFF: it is owed to the first waiter, ") +
           (owed == nullptr ? "but the queue is empty" : "and the writer is not it");
  }
}

// Keeps Ghost::bias_past_handoff for the thread making a store to the
// rwsem's count (`before` -> `after`, as in handoff_bypass()). A reader's
// own lock attempt adds exactly one bias and nothing else (the fast path,
// a spin, a trylock); it keeps the bias or takes it back out, again as
// exactly one bias, before it queues, and its unlock takes it out too. A
// correct lock backs out every bias added while HANDOFF is set and no
// writer holds the lock (reader_may_join(), may_rejoin_read_phase()), so
// no reader enters on one; a reader granted from the queue backed its own
// out first. A waker's grant of one reader adds one bias too, but a grant
// with HANDOFF set also clears it in the same store, and a waker is
// between lock calls, so its next own attempt sets its entry again.
template <class T>
void note_reader_bias(std::uint64_t before, std::uint64_t after, Ghost& g) {
  if constexpr (kIsRwsem<T>) {
    using B = internal::CountBits<typename T::layout_type>;
    using W = typename T::Word;
    const auto b = static_cast<W>(before);
    const auto a = static_cast<W>(after);
    bool& mine = g.bias_past_handoff[&ModelPlatform::current_thread()];
    if (a == static_cast<W>(b + B::kReaderBias)) mine = B::has_handoff(b) && !B::is_write_locked(b);
    else if (a == static_cast<W>(b - B::kReaderBias)) mine = false;
  }
}

std::string hex_word(std::uint64_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << v;
  return os.str();
}

// Checks made at every release of the wait lock (a store of kFree to its
// word), when the fields it guards must be consistent again.
//  - rwsem, invariant H of rwsem.h: HANDOFF is set in the count exactly
//    when the queue's first waiter owns it (handoff_set). Both change only
//    with the wait lock held, so H holds whenever nobody holds it; it is
//    checked against the count's newest value (`count`, kept by the
//    count's watch). A HANDOFF left behind by a waiter that leaves, or
//    cleared under a waiter that still owns it, fails at that release.
//  - rwsem, invariant W of rwsem.h: WOKEN is set in the count exactly when
//    the queue's first waiter has been woken to retry and has not retried
//    (its state kWoken while queued). The waker and the retry change both
//    with the wait lock held. A waker that forgets the bit is correct but
//    makes every unlock until the retry take the wait lock for nothing, a
//    cost no outcome shows; this is what catches it.
//  - mutex: `first_`, the hint is_first() reads without the wait lock, is
//    a copy of the list's head, and both are stored under the wait lock. A
//    hint left stale when the head changes keeps the new first waiter from
//    ever seeing itself first, and so from asking for HANDOFF, which is
//    what protects it from spinners that keep taking the lock.
template <class T>
void watch_wait_lock_invariants(Execution& x, T& lock, const std::uint64_t& count) {
  const void* wait_lock_word = nullptr;
  const void* first_word = nullptr;
  auto find = [&](const char* name, const void* p, std::size_t) {
    if (std::string(name) == "wait_lock") wait_lock_word = p;
    if (std::string(name) == "first") first_word = p;
  };
  auto is_release = [](std::uint64_t v) {
    return v == internal::BasicWaitLock<ModelPlatform>::kFree;
  };
  if constexpr (kIsRwsem<T>) {
    using B = internal::CountBits<typename T::layout_type>;
    testing::Peer::for_each_word(lock, find);
    x.watch(wait_lock_word, [&lock, &count, is_release](std::uint64_t v) {
      if (!is_release(v)) return;
      const bool bit = B::has_handoff(static_cast<typename T::Word>(count));
      const bool owned = testing::Peer::first_waiter_owns_handoff(lock);
      MC_CHECK(bit == owned, std::string("the wait lock was released with HANDOFF ") +
                                 (bit ? "set" : "clear") + " but the first waiter " +
                                 (owned ? "owning it" : "not owning it") + " (invariant H)");
      const bool woken_bit = B::has_woken_waiter(static_cast<typename T::Word>(count));
      const bool woken = testing::Peer::first_waiter_woken(lock);
      MC_CHECK(woken_bit == woken, std::string("the wait lock was released with WOKEN ") +
                                       (woken_bit ? "set" : "clear") + " but the first waiter " +
                                       (woken ? "woken to retry" : "not woken to retry") +
                                       " (invariant W)");
    });
  } else if constexpr (std::is_same_v<T, ModelMutex>) {
    testing::MutexPeer::for_each_word(lock, find);
    // The hint's newest value: every store to it enters the modification
    // order before the wait lock's release (a release drains the buffer).
    auto first = std::make_shared<std::uint64_t>(0);
    x.watch(first_word, [first](std::uint64_t v) { *first = v; });
    x.watch(wait_lock_word, [&lock, first, is_release](std::uint64_t v) {
      if (!is_release(v)) return;
      const auto head = reinterpret_cast<std::uintptr_t>(testing::MutexPeer::head(lock));
      MC_CHECK(*first == head, "the wait lock was released with the is_first() hint " +
                                   hex_word(*first) + " but the list's head " + hex_word(head));
    });
  }
}

struct LockRun {
  Result result;
  Coverage cov;
};

// Threads each running a list of sections on one lock; checks the data
// and the final state. Returns the explorer's result and what it reached.
template <class T>
LockRun run_threads(const Options& o, const std::string& name, const Config& c,
                    std::vector<std::vector<Kind>> threads, unsigned max_spinners = 2) {
  Options opts = o;
  opts.max_spinners = max_spinners;
  LockRun run;
  const LockEventSnapshot before = lock_events_snapshot();
  run.result = explore(opts, name, [&](Execution& x) {
    Box<T> box(c);
    T& lock = *box;
    Cell<int> data(0);
    name_lock(x, lock);
    x.name(&data, sizeof data, "data");
    Ghost ghost;
    std::uint64_t last_stored = 0;  // the main word starts at 0 for every lock type
    x.watch(main_word(lock), [&](std::uint64_t v) {
      classify<T>(v, run.cov);
      const std::string bypass = handoff_bypass<T>(last_stored, v, lock);
      MC_CHECK(bypass.empty(), bypass + " (" + hex_word(last_stored) + " -> " + hex_word(v) + ")");
      note_reader_bias<T>(last_stored, v, ghost);
      last_stored = v;
      MC_CHECK(holders_accounted<T>(v, ghost),
               "a store to the lock word dropped a holder: " + std::to_string(ghost.readers) +
                   " reader(s), " + std::to_string(ghost.writers) + " writer(s) and " +
                   std::to_string(ghost.downgrading) +
                   " downgrader(s) hold the lock, the stored value " + hex_word(v));
      MC_CHECK(readers_possible<T>(v, static_cast<int>(threads.size())),
               "a store to the lock word no sequence of " + std::to_string(threads.size()) +
                   " threads' operations produces (more reader biases than threads, or "
                   "inconsistent flags): " +
                   hex_word(v));
    });
    watch_wait_lock_invariants(x, lock, last_stored);
    x.on_quiescent([&] {
      run.cov.quiescent_waits += ghost.acquiring_readers + ghost.acquiring_writers > 0;
      return quiescent<T>(ghost);
    });
    int writes[kMaxThreads] = {};
    for (std::size_t i = 0; i < threads.size(); ++i) {
      x.spawn([&, i] {
        for (Kind k : threads[i]) {
          bool timed_out = false;
          writes[i] += section(lock, data, k, nanoseconds(300), &timed_out, c.hold, &ghost);
          run.cov.timeouts += timed_out;
        }
      });
    }
    x.run();
    run.cov.calls_while_held += ghost.calls_while_held;
    int total = 0;
    for (std::size_t i = 0; i < threads.size(); ++i) total += writes[i];
    MC_CHECK(data.read() == total, "a write was lost: data " + std::to_string(data.read()) +
                                       ", writes " + std::to_string(total));
    check_free(lock);
  });
  run.cov.events = lock_events_snapshot() - before;
  std::printf("%s\n    reached: %s\n", run.result.summary.c_str(), run.cov.text().c_str());
  return run;
}

std::string names(const std::vector<std::vector<Kind>>& threads) {
  std::string s;
  for (const auto& t : threads) {
    s += s.empty() ? "" : " vs ";
    for (std::size_t i = 0; i < t.size(); ++i) s += (i ? "," : "") + std::string(kind_name(t[i]));
  }
  return s;
}

template <class T>
class Model : public ::testing::Test {
 public:
  static std::string label(const char* scenario, const Config& c) {
    return std::string(T::kName) + "." + scenario +
           (c.spinning() ? " (spin)"
            : c.spin     ? " (spin compiled out)"
                         : " (no spin)");
  }
  static void expect(const Result& r) { EXPECT_TRUE(r.ok) << r.report; }
};
TYPED_TEST_SUITE(Model, ModelLocks, LayoutNames);

// ---- hand-over litmus tests, exhaustive ---------------------------------------
//
// Two threads, one section each: every interleaving within two preemptions,
// every store a load may read (one stale read per execution), one store
// buffered. The section that runs second must see the first's data through
// the lock alone.

using Pairs = std::vector<std::vector<std::vector<Kind>>>;

// Some execution of a pair had one thread call for the lock while the
// other was inside its section (Ghost), which the hand-over litmus tests are
// about: the two sections run one after the other pass them whatever the
// lock does (a preemption bound of 0 gives exactly that). Counted from the
// schedule, not from the lock's state, so a stale read that sends a
// thread down a slow path does not count, and every lock is checked alike.
void expect_overlapped(const Coverage& cov) {
  EXPECT_GT(cov.calls_while_held, 0) << "no thread ever called for the lock while the other "
                                        "was inside its section: "
                                     << cov.text();
}

// Each pair of one-section threads, exhaustively within `preemptions`.
template <class T>
void handover_pairs(const Pairs& pairs, int preemptions, std::initializer_list<bool> spins) {
  for (bool spin : spins) {
    Config c;
    c.spin = spin;
    for (const auto& p : pairs) {
      const LockRun run = run_threads<T>(
          exhaustive(preemptions), Model<T>::label("handover", c) + " [" + names(p) + "]", c, p);
      Model<T>::expect(run.result);
      EXPECT_TRUE(run.result.complete) << "the bounded exploration did not finish";
      expect_overlapped(run.cov);
    }
  }
}

TYPED_TEST(Model, HandoverExhaustive) {
  Pairs pairs = {{{kWrite}, {kWrite}}, {{kWrite}, {kRead}}, {{kRead}, {kWrite}}};
  if (rwsem_test::kDowngrade<TypeParam>) pairs.push_back({{kDowngrade}, {kRead}});
  handover_pairs<TypeParam>(pairs, 2, {false, true});
}

// The same with timed and try operations, one preemption.
TYPED_TEST(Model, HandoverTimedAndTryExhaustive) {
  handover_pairs<TypeParam>(
      {{{kWriteTimed}, {kReadTimed}}, {{kWriteTry}, {kWrite}}, {{kReadTry}, {kWriteTimed}}}, 1,
      {false});
}

// ---- the wake path, randomised ------------------------------------------------
//
// Without spinning every contended acquisition queues and sleeps: a writer
// holds the lock while readers and a writer queue behind it; the release
// must wake them (the reader batch, then the writer), grant with the data
// visible, and leave no waiter behind.

TYPED_TEST(Model, WakePath) {
  for (bool spin : {false, true}) {
    Config c;
    c.spin = spin;
    const LockRun run =
        run_threads<TypeParam>(random_runs(30000, 0x1000), TestFixture::label("wake path", c), c,
                               {{kWrite, kRead}, {kRead, kRead}, {kRead, kWrite}, {kWrite}});
    TestFixture::expect(run.result);
    const Coverage& cov = run.cov;
    if constexpr (std::is_same_v<TypeParam, ModelQRwLock>) {
      EXPECT_GT(cov.writer_waiting + cov.reader_behind_writer, 0) << cov.text();
    } else {
      EXPECT_GT(cov.waiters, 0) << "nobody ever queued: " << cov.text();
    }
    if constexpr (IsRwsem<TypeParam>::value) {
      if (c.spinning()) {
        EXPECT_GT(cov.event(LockEvent::opt_wlock) + cov.event(LockEvent::opt_rlock), 0u)
            << cov.text();
      } else {
        EXPECT_GT(cov.event(LockEvent::wake_reader), 0u) << cov.text();
        EXPECT_GT(cov.event(LockEvent::wake_writer), 0u) << cov.text();
        // A reader stole a free lock past queued waiters (read_slowpath()).
        EXPECT_GT(cov.event(LockEvent::rlock_steal), 0u) << cov.text();
      }
    }
  }
}

// Three writers: every release hands over to a queued writer.
TYPED_TEST(Model, WriterQueue) {
  Config c;
  const LockRun run =
      run_threads<TypeParam>(random_runs(30000, 0x2000), TestFixture::label("writer queue", c), c,
                             {{kWrite, kWrite}, {kWrite, kWrite}, {kWrite, kWrite}});
  TestFixture::expect(run.result);
  if constexpr (IsRwsem<TypeParam>::value)
    EXPECT_GT(run.cov.event(LockEvent::wake_writer), 0u) << run.cov.text();
}

// Timed waits whose deadlines race the wake-up that grants them: a waiter
// that times out must leave the queue (and pass on a wake-up meant for
// it); one granted as it timed out must keep the lock.
TYPED_TEST(Model, TimeoutRacingWake) {
  for (bool spin : {false, true}) {
    Config c;
    c.spin = spin;
    c.hold = Hold::kYields;
    const LockRun run = run_threads<TypeParam>(
        random_runs(30000, 0x3000), TestFixture::label("timeout racing wake", c), c,
        {{kWrite, kWriteTimed}, {kReadTimed, kReadTimed}, {kWriteTimed, kRead}});
    TestFixture::expect(run.result);
    if constexpr (kTimed<TypeParam>) EXPECT_GT(run.cov.timeouts, 0) << run.cov.text();
  }
}

// Waiters that could take or join the lock while its holder sleeps inside
// its section (Hold::kSleeps): a timed writer gives up while a reader
// holds the lock, so the readers queued behind it may join at once; a
// writer downgrades with readers queued, who may join at once; a holder's
// unlock must wake the queue before the holder's next section. With every
// thread asleep, run_threads()' quiescence check reports a waiter left
// asleep that could have entered. A lock that lets such a waiter in only
// at some later unlock passes the data, final-state and deadlock checks.
TYPED_TEST(Model, WaitersThatCouldEnterAreWokenAtOnce) {
  for (bool spin : {false, true}) {
    Config c;
    c.spin = spin;
    c.hold = Hold::kSleeps;
    for (const auto& threads : std::vector<std::vector<std::vector<Kind>>>{
             {{kRead, kRead}, {kWriteTimed}, {kRead, kReadTimed}},
             {{kDowngrade, kRead}, {kRead}, {kRead}}}) {
      const LockRun run =
          run_threads<TypeParam>(random_runs(20000, 0xa000),
                                 TestFixture::label("could enter, holder asleep", c), c, threads);
      TestFixture::expect(run.result);
      // The queued rwlock's waiters spin (yielding) and never sleep, so no
      // state with one of them waiting is quiescent; a waiter it keeps out
      // too long shows as a livelock instead.
      if constexpr (!std::is_same_v<TypeParam, ModelQRwLock>)
        EXPECT_GT(run.cov.quiescent_waits, 0) << run.cov.text();
    }
  }
}

// Destroy right after unlock: POSIX and C++ let a thread destroy an
// unlocked lock nobody waits on while the thread that released it is still
// returning from unlock. The second thread polls (timed tries) until it
// has seen the first one's section, unlocks and destroys the lock; the
// first must not touch the lock after its releasing operation. Once with
// a writer releasing (the poller reads) and once with a reader releasing
// (the poller writes, so that its try queues behind the reader and the
// reader's unlock is the one that may have to wake it): the two unlocks
// are separate code, and either could touch the lock after its release.
TYPED_TEST(Model, DestroyRightAfterUnlock) {
  for (const bool reader_releases : {false, true}) {
    for (bool spin : {false, true}) {
      Config c;
      c.spin = spin;
      const std::string name = TestFixture::label(
          reader_releases ? "destroy after read unlock" : "destroy after unlock", c);
      LockRun run;
      const LockEventSnapshot before = lock_events_snapshot();
      run.result = explore(exhaustive(2), name, [&](Execution& x) {
        alignas(Box<TypeParam>) unsigned char storage[sizeof(Box<TypeParam>)];
        Box<TypeParam>* box = new (storage) Box<TypeParam>(c);
        TypeParam& lock = **box;
        Cell<int> data(0);
        name_lock(x, lock);
        x.watch(main_word(lock), [&](std::uint64_t v) { classify<TypeParam>(v, run.cov); });
        x.spawn([&] {
          if (!reader_releases) {
            section(lock, data, kWrite);
            return;
          }
          // The only reader: its write races with nothing but the poller's
          // read, which the lock orders after this section.
          read_lock(lock);
          data.write(1);
          read_unlock(lock);
        });
        x.spawn([&] {
          // Timed tries: a try that times out in the queue leaves it, so the
          // first thread's unlock may have seen a waiter that is gone.
          for (;;) {
            const bool got = reader_releases ? write_lock_for(lock, nanoseconds(200))
                                             : read_lock_for(lock, nanoseconds(200));
            if (got) {
              const int seen = data.read();
              if (reader_releases) lock.unlock();
              else read_unlock(lock);
              if (seen == 1) break;
            }
            ModelPlatform::yield();
          }
          box->~Box();  // the lock is free and nobody waits on it
        });
        x.run();
      });
      run.cov.events = lock_events_snapshot() - before;
      std::printf("%s\n    reached: %s\n", run.result.summary.c_str(), run.cov.text().c_str());
      TestFixture::expect(run.result);
      // Without spinning the poller's try queues: the releaser's unlock
      // then runs with a waiter (or one that has just left) in the queue.
      if constexpr (!std::is_same_v<TypeParam, ModelQRwLock>) {
        if (!c.spinning()) EXPECT_GT(run.cov.waiters, 0) << run.cov.text();
      }
      // The windows the scenario is about, which a native run rarely hits:
      // the destroyer waiting for a read unlocker that still announces its
      // up_read(), or for a write unlocker that still holds the wait lock.
      // Every other check here passes on an exploration that never reaches
      // them: letting the wait lock's first taking run a spin hint once cut
      // the write-release scenario from 118,526 executions to 9,980, none
      // of them with the destroyer waiting for the wait lock.
      if constexpr (!std::is_same_v<TypeParam, ModelQRwLock>) {
        const bool announced = reader_releases && IsRwsem<TypeParam>::value;
        if (!c.spinning())
          EXPECT_GT(run.cov.event(announced ? LockEvent::destroy_wait_unlocker
                                            : LockEvent::destroy_wait_queue),
                    0u)
              << "the destroyer never waited for the unlocker: " << run.cov.text();
      }
    }
  }
}

// Two locks of the same type, threads moving between them. A thread's
// sleep word is shared by every lock it waits on, so the late unpark of a
// waker on one lock (its wakee returned without waiting for it) lands in
// the thread's wait on the other: stale wake-ups across locks, which every
// wait must absorb and none may lose a real wake-up to.
TYPED_TEST(Model, TwoLocksStaleWakeups) {
  for (bool spin : {false, true}) {
    Config c;
    c.spin = spin;
    const std::string name = TestFixture::label("two locks", c);
    LockRun run;
    const LockEventSnapshot before = lock_events_snapshot();
    run.result = explore(random_runs(30000, 0x9000), name, [&](Execution& x) {
      Box<TypeParam> box1(c), box2(c);
      TypeParam& a = *box1;
      TypeParam& b = *box2;
      Cell<int> da(0), db(0);
      x.name(&a, sizeof a, "a");
      x.name(&b, sizeof b, "b");
      x.describe([&a, &b] { return "a: " + state_of(a) + "; b: " + state_of(b); });
      x.watch(main_word(a), [&](std::uint64_t v) { classify<TypeParam>(v, run.cov); });
      x.watch(main_word(b), [&](std::uint64_t v) { classify<TypeParam>(v, run.cov); });
      int wa = 0, wb = 0, wa2 = 0, wb2 = 0;
      x.spawn([&] {
        wa += section(a, da, kWrite);
        wb += section(b, db, kRead);
        wa += section(a, da, kWrite);
      });
      x.spawn([&] {
        wb2 += section(b, db, kWrite);
        wa2 += section(a, da, kRead);
        wb2 += section(b, db, kWrite);
      });
      x.spawn([&] {
        (void)section(a, da, kRead);
        (void)section(b, db, kRead);
      });
      x.run();
      MC_CHECK(da.read() == wa + wa2, "a write under lock a was lost");
      MC_CHECK(db.read() == wb + wb2, "a write under lock b was lost");
      check_free(a);
      check_free(b);
    });
    run.cov.events = lock_events_snapshot() - before;
    std::printf("%s\n    reached: %s\n", run.result.summary.c_str(), run.cov.text().c_str());
    TestFixture::expect(run.result);
    if constexpr (!std::is_same_v<TypeParam, ModelQRwLock>) {
      if (!c.spinning()) EXPECT_GT(run.cov.waiters, 0) << run.cov.text();
    }
  }
}

// ---- the rwsem's own protocols ---------------------------------------------------

template <class L>
class ModelRwsemOnly : public Model<ModelRwsem<L>> {};
TYPED_TEST_SUITE(ModelRwsemOnly, ModelLayouts, LayoutNames);

// Handoff set and clear: with a zero handoff timeout every first waiter
// claims HANDOFF at once, from a writer's retry or from a reader's waker
// that finds the lock stolen; it must be cleared by whoever takes the lock
// or leaves, and never left set.
TYPED_TEST(ModelRwsemOnly, HandoffSetAndClear) {
  using T = ModelRwsem<TypeParam>;
  for (bool spin : {false, true}) {
    Config c;
    c.spin = spin;
    c.handoff_us = 0;
    const LockRun run =
        run_threads<T>(random_runs(30000, 0x4000), Model<T>::label("handoff set and clear", c), c,
                       {{kWrite, kWrite}, {kRead, kWrite}, {kRead, kReadTimed}});
    Model<T>::expect(run.result);
    if (!c.spinning()) {
      EXPECT_GT(run.cov.handoff, 0) << run.cov.text();
      EXPECT_GT(run.cov.event(LockEvent::wlock_handoff), 0u) << run.cov.text();
    } else {
      EXPECT_GT(run.cov.event(LockEvent::opt_wlock), 0u) << run.cov.text();
    }
  }
}

// A reader's handoff: the reader is first in the queue, the lock goes free,
// and a writer steals it before the waker's reader test; the waker then
// sets HANDOFF for the reader (mark_wake()), and the next release must
// grant it. Every interleaving of one writer releasing, one reader
// queueing and one writer stealing, within two preemptions.
TYPED_TEST(ModelRwsemOnly, ReaderHandoffExhaustive) {
  using T = ModelRwsem<TypeParam>;
  Config c;
  c.handoff_us = 0;
  Options o = exhaustive(2);
  o.max_executions = 5000000;
  const LockRun run =
      run_threads<T>(o, Model<T>::label("reader handoff", c), c, {{kWrite}, {kRead}, {kWrite}});
  Model<T>::expect(run.result);
  EXPECT_TRUE(run.result.complete) << "the bounded exploration did not finish";
  EXPECT_GT(run.cov.event(LockEvent::rlock_handoff), 0u) << run.cov.text();
}

// A woken reader: a writer's unlock that finds one reader queued, not yet
// owed the lock, wakes it to retry instead of granting it the lock, and
// the writer may take the free lock again before the reader runs. The
// reader must then take the lock itself, or sleep again and be woken by
// the next unlock, and clear WOKEN either way, or no later unlock wakes
// anyone; a timed reader that gives up must leave no WOKEN behind. Every
// interleaving of a writer locking three times against one reader (plain,
// then timed) within two preemptions; then random schedules of a writer
// stream with a handoff timeout that passes during the run, where the
// reader is woken to retry before its deadline and granted after it.
TYPED_TEST(ModelRwsemOnly, WokenReaderRetries) {
  using T = ModelRwsem<TypeParam>;
  Config c;  // no spinning; the handoff timeout never passes
  for (Kind reader : {kRead, kReadTimed}) {
    Options o = exhaustive(2);
    o.max_executions = 5000000;
    const LockRun run = run_threads<T>(o, Model<T>::label("woken reader", c), c,
                                       {{kWrite, kWrite, kWrite}, {reader}});
    Model<T>::expect(run.result);
    EXPECT_TRUE(run.result.complete) << "the bounded exploration did not finish";
    EXPECT_GT(run.cov.event(LockEvent::rlock_retry), 0u) << run.cov.text();
    // Some retries failed (the writer took the lock first): the reader
    // slept again, or gave up.
    EXPECT_GT(run.cov.event(LockEvent::wake_reader_retry), run.cov.event(LockEvent::rlock_retry))
        << run.cov.text();
  }
  c.handoff_us = 1;
  const LockRun run = run_threads<T>(
      random_runs(30000, 0x5c00), Model<T>::label("woken reader, handoff", c), c,
      {{kWrite, kWrite, kWrite, kWrite}, {kRead, kReadTimed}, {kWrite, kWrite, kWrite, kWrite}});
  Model<T>::expect(run.result);
  EXPECT_GT(run.cov.event(LockEvent::wake_reader_retry), 0u) << run.cov.text();
  EXPECT_GT(run.cov.event(LockEvent::wake_reader), 0u) << run.cov.text();
  EXPECT_GT(run.cov.handoff, 0) << run.cov.text();
}

// Read phases: readers granted past a queued writer rejoin the lock while
// other granted readers still hold it, then leave; the writer must still
// get the lock and no waiter may be stranded. max_spinners 0 (a 1-CPU
// machine: no spinning, and any other holder may be waiting for the CPU)
// makes every contended acquisition queue, so the wake-ups that open phases
// are reached, and lets one other holder's bias open a rejoin, also the
// transient bias of a failed reader beside a writer.
TYPED_TEST(ModelRwsemOnly, ReadPhaseRejoin) {
  using T = ModelRwsem<TypeParam>;
  Config c;
  const LockRun run = run_threads<T>(
      random_runs(30000, 0x5800), Model<T>::label("read phase rejoin", c), c,
      {{kWrite, kRead}, {kRead, kRead}, {kRead, kRead}, {kWrite, kWrite}, {kRead, kRead}},
      /*max_spinners=*/0);
  Model<T>::expect(run.result);
  EXPECT_GT(run.cov.event(LockEvent::rlock_phase), 0u) << run.cov.text();
}

// Downgrade with readers and a writer queued: the downgrader wakes the
// readers, which share the lock with it; the writer waits for all of them.
TYPED_TEST(ModelRwsemOnly, DowngradeWithWaiters) {
  using T = ModelRwsem<TypeParam>;
  for (bool spin : {false, true}) {
    Config c;
    c.spin = spin;
    const LockRun run =
        run_threads<T>(random_runs(30000, 0x5000), Model<T>::label("downgrade with waiters", c), c,
                       {{kDowngrade, kDowngrade}, {kRead, kRead}, {kWrite}, {kRead}});
    Model<T>::expect(run.result);
    EXPECT_GT(run.cov.event(LockEvent::wake_reader), 0u) << run.cov.text();
  }
}

// ---- the sleep protocol, alone ----------------------------------------------------
//
// thread_record.h's arm/look/park against change/unpark, the protocol every
// sleep of the rwsem and the mutex uses: a waiter arms its sleep word,
// looks at its condition and parks; the waker sets the condition and
// unparks. A third thread unparks the waiter for nothing, as a waker whose
// wakee has already moved on does (a stale wake-up). Every interleaving
// within three preemptions (two with the third thread) must end with the
// waiter awake.

TEST(ModelSleepProtocol, ArmLookParkAgainstChangeUnpark) {
  using Record = ModelPlatform::Record;
  for (bool stale : {false, true}) {
    const Result r = explore(exhaustive(stale ? 2 : 3),
                             stale ? "sleep protocol with a stale wake-up" : "sleep protocol",
                             [&](Execution& x) {
      Atomic<int> cond(0);
      Atomic<Record*> waiter(nullptr);
      x.name(&cond, sizeof cond, "cond");
      x.name(&waiter, sizeof waiter, "waiter");
      auto find_waiter = [&] {
        Record* w;
            // acquire pairs with the waiter's release: its record is built.
        while ((w = waiter.load(std::memory_order_acquire)) == nullptr) ModelPlatform::yield();
        return w;
      };
      x.spawn([&] {
        Record& me = ModelPlatform::current_thread();
        waiter.store(&me, std::memory_order_release);
        for (;;) {
          internal::arm(me);
          if (cond.load(std::memory_order_acquire) == 1) break;
          internal::park(me, INT64_MAX);
        }
      });
      x.spawn([&] {
        Record* w = find_waiter();
        cond.store(1, std::memory_order_release);
        internal::unpark(w);
      });
      if (stale) x.spawn([&] { internal::unpark(find_waiter()); });
      x.run();
    });
    std::printf("%s\n", r.summary.c_str());
    EXPECT_TRUE(r.ok) << r.report;
  }
}

// The same protocol inside the mutex: two threads that each lock twice
// with spinning off, so every contended lock sleeps and every unlock with
// waiters unparks; the second unpark of a waiter that has not re-armed yet
// finds it awake and skips the futex wake. (A first waiter re-reads the
// owner word until its cmpxchg succeeds, so the lost wake-up of a missing
// waker fence needs a third thread: SleepProtocolAndPickup.)
TEST(ModelMutex, SleepProtocolExhaustive) {
  Config c;
  const LockRun run = run_threads<ModelMutex>(exhaustive(2), "mutex.sleep protocol", c,
                                              {{kWrite, kWrite}, {kWrite, kWrite}});
  EXPECT_TRUE(run.result.ok) << run.result.report;
  EXPECT_TRUE(run.result.complete) << "the bounded exploration did not finish";
  EXPECT_GT(run.cov.waiters, 0) << run.cov.text();
}

// ---- the spin queue, alone -----------------------------------------------------
//
// The MCS spin queue is a lock among spinners: a thread that lock()ed it
// runs alone until it unlock()s. Used here as a lock over a cell, a relaxed
// hand-over inside it is a race, although in the rwsem it guards only
// atomics. Short deadlines make spinners give up in every step of the
// unlinking (A: detach, B: find the successor or restore the tail, C:
// splice).

struct QueueScenario {
  std::int64_t deadline_after_ns;
  unsigned max_spinners;
};

struct QueueRun {
  Result result;
  long handovers = 0;  // a successor's `locked` set by its predecessor
  long give_ups = 0;   // lock() returned false (deadline or too many)
};

QueueRun run_spin_queue(const Options& o, const std::string& name, int threads, int rounds,
                        QueueScenario q) {
  QueueRun run;
  run.result = explore(o, name, [&](Execution& x) {
    internal::SpinQueue<ModelPlatform> queue;
    Cell<int> data(0);
    x.name(&queue, sizeof queue, "osq");
    x.name(&data, sizeof data, "data");
    int entered[kMaxThreads] = {};
    for (int t = 0; t < threads; ++t) {
      x.spawn([&, t] {
        auto& node = ModelPlatform::current_thread().osq;
        x.watch(&node.locked, [&](std::uint64_t v) { run.handovers += v != 0; });
        for (int i = 0; i < rounds; ++i) {
          const std::int64_t deadline =
              q.deadline_after_ns < 0 ? INT64_MAX : ModelPlatform::now_ns() + q.deadline_after_ns;
          if (!queue.lock(node, deadline, q.max_spinners)) {
            ++run.give_ups;
            continue;
          }
          data.write(data.read() + 1);
          ++entered[t];
          queue.unlock(node);
        }
      });
    }
    x.run();
    int total = 0;
    for (int t = 0; t < threads; ++t) total += entered[t];
    MC_CHECK(data.read() == total, "an increment under the spin queue was lost");
    MC_CHECK(!queue.is_locked(), "the spin queue's tail is not empty after everyone left");
  });
  std::printf("%s\n    reached: %ld hand-overs, %ld give-ups\n", run.result.summary.c_str(),
              run.handovers, run.give_ups);
  return run;
}

TEST(ModelSpinQueue, HandOverExhaustive) {
  const QueueRun run = run_spin_queue(exhaustive(2), "osq hand-over", 2, 1, {-1, 4});
  EXPECT_TRUE(run.result.ok) << run.result.report;
  EXPECT_TRUE(run.result.complete) << "the bounded exploration did not finish";
  EXPECT_GT(run.handovers, 0);
}

TEST(ModelSpinQueue, HandOverAndGiveUp) {
  for (std::int64_t d : {-1, 40, 150, 400}) {
    const QueueRun run =
        run_spin_queue(random_runs(40000, 0x6000 + static_cast<std::uint64_t>(d)),
                       "osq give-up after " + std::to_string(d) + " ns", 3, 2, {d, 4});
    EXPECT_TRUE(run.result.ok) << run.result.report;
    EXPECT_GT(run.handovers, 0);
    if (d >= 0) EXPECT_GT(run.give_ups, 0);
  }
}

// Neighbours leave at once. A head H holds the queue until every spinner
// behind it has returned, so none can be handed the queue: each must
// unlink itself. When the nearer of two, X, leaves first, it takes the
// farther one, Y, from its `next` (step B), so Y's detach from X fails,
// and splices Y to X's predecessor (step C); Y must then follow the `prev`
// the splice gave it and detach from there. A Y that misses the splice (X
// never stores it, or Y never re-reads it) tries to detach from X for
// ever: a livelock here; natively a spinner that overstays its deadline
// until the head hands it the queue. With three leavers a spinner may be
// spliced twice, once by each neighbour leaving ahead of it. `splices`
// counts the executions with at least `leavers - 1` splices.
struct QueueLeaveRun {
  Result result;
  long splices = 0;
};

QueueLeaveRun run_neighbours_leave(const Options& o, int leavers) {
  QueueLeaveRun run;
  run.result = explore(o, "osq " + std::to_string(leavers) + " neighbours leave together",
                       [&](Execution& x) {
    internal::SpinQueue<ModelPlatform> queue;
    Atomic<int> head_holds(0);
    Atomic<int> left(0);
    int prev_stores = 0;
    x.name(&queue, sizeof queue, "osq");
    x.name(&head_holds, sizeof head_holds, "head_holds");
    x.name(&left, sizeof left, "left");
    x.spawn([&] {
      auto& node = ModelPlatform::current_thread().osq;
      MC_CHECK(queue.lock(node, INT64_MAX, 4), "the first spinner did not get the empty queue");
      // release: pairs with the spinners' acquire loads below; they join
      // after the head holds the queue.
      head_holds.store(1, std::memory_order_release);
      // acquire pairs with each spinner's release increment: it has left.
      while (left.load(std::memory_order_acquire) < leavers) ModelPlatform::yield();
      queue.unlock(node);
    });
    for (int t = 0; t < leavers; ++t) {
      x.spawn([&] {
        auto& node = ModelPlatform::current_thread().osq;
        x.watch(&node.prev, [&](std::uint64_t) { ++prev_stores; });
        while (head_holds.load(std::memory_order_acquire) == 0) ModelPlatform::yield();
        // A deadline already past: give up at the first budget check.
        MC_CHECK(!queue.lock(node, ModelPlatform::now_ns() - 1, 4),
                 "a spinner got the queue while its head still held it");
        left.fetch_add(1, std::memory_order_release);
      });
    }
    x.run();
    // Each spinner stores its `prev` once when it joins; more are splices.
    run.splices += prev_stores - leavers >= leavers - 1;
    MC_CHECK(!queue.is_locked(), "the spin queue's tail is not empty after everyone left");
  });
  std::printf("%s\n    reached: %ld executions with %d or more splices\n",
              run.result.summary.c_str(), run.splices, leavers - 1);
  return run;
}

struct Bounds {
  int preemptions, stale_reads, buffered_stores;
};

// Two leavers, every interleaving within each set of bounds. Each bound
// alone explodes past a few million executions at the next step up (the
// waits for the head poll); these three finish in seconds.
TEST(ModelSpinQueue, NeighboursLeaveTogether) {
  for (Bounds b : {Bounds{2, 0, 0}, Bounds{1, 1, 0}, Bounds{1, 0, 1}}) {
    Options o = exhaustive(b.preemptions);
    o.stale_read_bound = b.stale_reads;
    o.buffered_store_bound = b.buffered_stores;
    const QueueLeaveRun run = run_neighbours_leave(o, 2);
    EXPECT_TRUE(run.result.ok) << run.result.report;
    EXPECT_TRUE(run.result.complete) << "the bounded exploration did not finish";
    EXPECT_GT(run.splices, 0);
  }
}

// Three leavers, random schedules: a spinner spliced by both neighbours
// ahead of it, one after the other.
TEST(ModelSpinQueue, ThreeNeighboursLeaveTogether) {
  const QueueLeaveRun run = run_neighbours_leave(random_runs(40000, 0x6c00), 3);
  EXPECT_TRUE(run.result.ok) << run.result.report;
  EXPECT_GT(run.splices, 0);
}

// Past the spinner limit a joining thread leaves at once (the give-up
// steps with a predecessor that may be handing over at the same moment).
TEST(ModelSpinQueue, SpinnerLimit) {
  const QueueRun run = run_spin_queue(random_runs(40000, 0x6800), "osq limit 2", 3, 2, {400, 2});
  EXPECT_TRUE(run.result.ok) << run.result.report;
  EXPECT_GT(run.give_ups, 0);
}

// ---- the mutex's sleep protocol and pickup ----------------------------------------
//
// With spinning on, a woken first waiter spins and then asks for HANDOFF;
// the unlocker then writes it into the owner word with PICKUP, and the
// waiter picks the lock up. With spinning off, every waiter sleeps and is
// woken by unlock (the arm/look/sleep protocol of thread_record.h).

TEST(ModelMutex, SleepProtocolAndPickup) {
  for (bool spin : {false, true}) {
    Config c;
    c.spin = spin;
    // Holders outlast the spin budget: spinners queue.
    c.hold = spin ? Hold::kYields : Hold::kBrief;
    const LockRun run = run_threads<ModelMutex>(
        random_runs(40000, 0x7000), std::string("mutex.sleep and pickup") + (spin ? " (spin)" : ""),
        c, {{kWrite, kWrite}, {kWrite, kWriteTimed}, {kWrite, kWrite}});
    EXPECT_TRUE(run.result.ok) << run.result.report;
    EXPECT_GT(run.cov.waiters, 0) << run.cov.text();
    EXPECT_GT(run.cov.handoff, 0) << run.cov.text();
    EXPECT_GT(run.cov.pickup, 0) << run.cov.text();
  }
}

// ---- the queued rwlock's head reader and writer -------------------------------------

TEST(ModelQRwLock, HeadReaderAndWriter) {
  Config c;
  const LockRun run =
      run_threads<ModelQRwLock>(random_runs(40000, 0x8000), "qrwlock.head", c,
                                {{kWrite, kRead}, {kRead, kRead}, {kWrite, kWrite}});
  EXPECT_TRUE(run.result.ok) << run.result.report;
  EXPECT_GT(run.cov.writer_waiting, 0) << run.cov.text();
  EXPECT_GT(run.cov.reader_behind_writer, 0) << run.cov.text();
}

}  // namespace
}  // namespace mc
}  // namespace rwsem
