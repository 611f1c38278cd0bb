// The locks the benchmark compares, as one table (RWSEM_BENCH_LOCKS at the
// bottom: one X(adapter, "name", "description") line per lock).
//
// Every entry is an *adapter*: a class the harness default-constructs once
// per run (cache-line aligned), with
//
//   struct Ctx;                     per-thread state (a queue node for
//                                   tbb::queuing_rw_mutex; empty otherwise)
//   void lock(Ctx&);  void unlock(Ctx&);                  the writer path
//   void lock_shared(Ctx&);  void unlock_shared(Ctx&);    the reader path
//   static constexpr bool kExclusiveOnly;
//
// Plain<T> adapts any type with the std names (lock/unlock and, if it has
// them, lock_shared/unlock_shared), so adding such a lock is one line in
// RWSEM_BENCH_LOCKS (plus its #include):
//
//   X(::bench::Plain<MyLock>, "mylock", "what MyLock is")
//
// (X is a macro: an adapter whose template arguments contain a comma needs a
// `using` alias first, e.g. `using RwsemHandoff1ms = Tuned<50, 1000>;`.)
//
// Exclusive-only locks (a T without lock_shared, e.g. rwsem::Mutex) are
// detected automatically and marked kExclusiveOnly. The harness then
//   - runs their "readers" through the writer path in the mixed scenarios
//     (1 mixed, 5 mostly readers, 7 mixed with think time): a mutex is a
//     real alternative to an rwlock for those workloads, and its numbers
//     stay comparable;
//   - skips the reader-only scenario (3) and the uncontended read latency
//     (6 read), where the entry would only repeat the writer numbers. Tables
//     print "excl" there.
#ifndef RWSEM_BENCH_LOCKS_H_
#define RWSEM_BENCH_LOCKS_H_

#include <pthread.h>

#include <chrono>
#include <shared_mutex>
#include <type_traits>
#include <utility>

#include "lib/rwsem/mutex.h"
#include "lib/rwsem/qrwlock.h"
#include "lib/rwsem/rwsem.h"

#if !defined(RWSEM_BENCH_RWSEM_ONLY)
#include <absl/synchronization/mutex.h>
#include <oneapi/tbb/queuing_rw_mutex.h>
#include <oneapi/tbb/spin_rw_mutex.h>

#include <boost/thread/shared_mutex.hpp>
#endif

namespace bench {

// ---- adapters ----------------------------------------------------------------

template <class T, class = void>
struct HasLockShared : std::false_type {};
template <class T>
struct HasLockShared<T, std::void_t<decltype(std::declval<T&>().lock_shared()),
                                    decltype(std::declval<T&>().unlock_shared())>>
    : std::true_type {};

// Any lock with the std names. Without lock_shared it is exclusive-only and
// its reader path is the writer path.
template <class T>
struct Plain {
  struct Ctx {};
  static constexpr bool kExclusiveOnly = !HasLockShared<T>::value;
  void lock(Ctx&) { m.lock(); }
  void unlock(Ctx&) { m.unlock(); }
  void lock_shared(Ctx&) {
    if constexpr (kExclusiveOnly) m.lock();
    else m.lock_shared();
  }
  void unlock_shared(Ctx&) {
    if constexpr (kExclusiveOnly) m.unlock();
    else m.unlock_shared();
  }
  T m;
};

// This project's lock with optimistic spinning off for this lock only
// (Options::spin_budget = 0); the default-constructed RwSemaphore spins.
struct RwsemNoSpin : rwsem::RwSemaphore {
  static rwsem::Options options() {
    rwsem::Options o;
    o.spin_budget = std::chrono::nanoseconds(0);
    return o;
  }
  RwsemNoSpin() : rwsem::RwSemaphore(options()) {}
};

#if !defined(RWSEM_BENCH_RWSEM_ONLY)
// pthread_rwlock_t of a given kind: PTHREAD_RWLOCK_PREFER_READER_NP is
// glibc's default; PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP makes new
// readers wait behind a waiting writer.
template <int Kind>
struct PthreadRwlock {
  PthreadRwlock() {
    pthread_rwlockattr_t a;
    pthread_rwlockattr_init(&a);
    pthread_rwlockattr_setkind_np(&a, Kind);
    pthread_rwlock_init(&l, &a);
    pthread_rwlockattr_destroy(&a);
  }
  ~PthreadRwlock() { pthread_rwlock_destroy(&l); }
  void lock() { pthread_rwlock_wrlock(&l); }
  void unlock() { pthread_rwlock_unlock(&l); }
  void lock_shared() { pthread_rwlock_rdlock(&l); }
  void unlock_shared() { pthread_rwlock_unlock(&l); }
  pthread_rwlock_t l;
};

// absl::Mutex, readers in reader mode (ReaderLock). absl annotates its
// Mutex for clang's thread-safety analysis; these wrappers acquire in one
// function and release in another, which the analysis cannot follow.
struct AbslMutex {
  void lock() RWSEM_NO_THREAD_SAFETY_ANALYSIS { m.Lock(); }
  void unlock() RWSEM_NO_THREAD_SAFETY_ANALYSIS { m.Unlock(); }
  void lock_shared() RWSEM_NO_THREAD_SAFETY_ANALYSIS { m.ReaderLock(); }
  void unlock_shared() RWSEM_NO_THREAD_SAFETY_ANALYSIS { m.ReaderUnlock(); }
  absl::Mutex m;
};

// tbb::queuing_rw_mutex has no lock()/unlock(): every acquisition needs a
// scoped_lock, which is the thread's queue node. One per thread, reused.
struct TbbQueuing {
  struct Ctx {
    tbb::queuing_rw_mutex::scoped_lock node;
  };
  static constexpr bool kExclusiveOnly = false;
  void lock(Ctx& c) { c.node.acquire(m, /*write=*/true); }
  void unlock(Ctx& c) { c.node.release(); }
  void lock_shared(Ctx& c) { c.node.acquire(m, /*write=*/false); }
  void unlock_shared(Ctx& c) { c.node.release(); }
  tbb::queuing_rw_mutex m;
};
#endif

// ---- the table -----------------------------------------------------------------

// RWSEM_BENCH_LOCKS(X) lists X(Adapter, "name", "description") once per lock.
// Add a lock here; nothing else needs to change.
#define RWSEM_BENCH_RWSEM_LOCKS(X)                                                 \
  X(::bench::Plain<::rwsem::RwSemaphore>, "rwsem",                                 \
    "rwsem::RwSemaphore, default layout, optimistic spinning on (default budget)") \
  X(::bench::Plain<::bench::RwsemNoSpin>, "rwsem-nospin",                          \
    "rwsem::RwSemaphore, default layout, Options{spin_budget=0}: spinning off")

#if defined(RWSEM_BENCH_RWSEM_ONLY)
#define RWSEM_BENCH_LOCKS(X) RWSEM_BENCH_RWSEM_LOCKS(X)
#else
#define RWSEM_BENCH_LOCKS(X)                                                               \
  RWSEM_BENCH_RWSEM_LOCKS(X)                                                               \
  X(::bench::Plain<::rwsem::QRwLock>, "qrwlock",                                           \
    "rwsem::QRwLock, the companion queued rwlock (spins, never sleeps)")                   \
  X(::bench::Plain<::rwsem::Mutex>, "mutex",                                               \
    "rwsem::Mutex, the companion mutex (spinning, waiter spinning, handoff)")              \
  X(::bench::Plain<::bench::PthreadRwlock<PTHREAD_RWLOCK_PREFER_READER_NP>>, "pthread",    \
    "pthread_rwlock_t, glibc default (prefer readers)")                                    \
  X(::bench::Plain<::bench::PthreadRwlock<PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP>>,  \
    "pthread-wpref", "pthread_rwlock_t, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP")     \
  X(::bench::Plain<std::shared_mutex>, "std-shared", "std::shared_mutex (libstdc++)")      \
  X(::bench::Plain<::bench::AbslMutex>, "absl", "absl::Mutex, readers in ReaderLock mode") \
  X(::bench::TbbQueuing, "tbb-queuing", "tbb::queuing_rw_mutex (oneTBB)")                  \
  X(::bench::Plain<::tbb::spin_rw_mutex>, "tbb-spin", "tbb::spin_rw_mutex (oneTBB)")       \
  X(::bench::Plain<::boost::shared_mutex>, "boost-shared", "boost::shared_mutex")
#endif

}  // namespace bench

#endif  // RWSEM_BENCH_LOCKS_H_
