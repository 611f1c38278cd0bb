// The lock types the corpus runs over, and what each of them can do.
//
// Two kinds of typed lists:
//   AllLayouts   rwsem count layouts. Suites that test the rwsem itself
//                (core scenarios, layout conformance, spinning, events,
//                debug mode) run over these and build BasicRwSemaphore<L>.
//   AllLocks     every lock type: the three rwsem layouts, the queued
//                rwlock and the mutex. Suites that test what any lock must
//                do (ordering litmus tests, torture, starvation, the std
//                lock API) run over these through the adapters below, each
//                with the parts that apply: a lock without shared mode runs
//                its "readers" exclusively, a lock without timed tries runs
//                those operations as plain blocking ones, and so on.
//
// A new layout or lock type joins every suite that applies by being added
// here (and, for a new lock, by a kName).
#ifndef RWSEM_CONFORMANCE_LOCK_TYPES_H_
#define RWSEM_CONFORMANCE_LOCK_TYPES_H_

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "arch/count_layouts.h"
#include "lib/rwsem/mutex.h"
#include "lib/rwsem/qrwlock.h"
#include "lib/rwsem/rwsem.h"

namespace rwsem_test {

// ---- which layouts this target builds -----------------------------------------
//
// A count layout whose word is not a lock-free atomic on the target refuses
// to compile (rwsem.h): on 32-bit PowerPC the 64-bit layouts drop out of
// every list below, and the rest of the corpus runs there. The layout
// report of ci/qualify shows them as not built on that target.

template <class L>
inline constexpr bool kLayoutBuildsHere = std::atomic<typename L::Word>::is_always_lock_free;

template <class T>
struct BuildsHere : std::true_type {};
template <class L, class P>
struct BuildsHere<rwsem::BasicRwSemaphore<L, P>> : std::bool_constant<kLayoutBuildsHere<L>> {};

// Keep<Pred, T...>: ::testing::Types of the T that Pred accepts, in order.
template <template <class> class Pred, class Kept, class... Rest>
struct KeepImpl {
  using type = Kept;
};
template <template <class> class Pred, class... Kept, class T, class... Rest>
struct KeepImpl<Pred, ::testing::Types<Kept...>, T, Rest...>
    : KeepImpl<Pred,
               std::conditional_t<Pred<T>::value, ::testing::Types<Kept..., T>,
                                  ::testing::Types<Kept...>>,
               Rest...> {};
template <template <class> class Pred, class... Ts>
using Keep = typename KeepImpl<Pred, ::testing::Types<>, Ts...>::type;

template <class L>
struct LayoutBuildsHere : std::bool_constant<kLayoutBuildsHere<L>> {};

using AllLayouts = Keep<LayoutBuildsHere, rwsem::Generic64Layout, rwsem::Generic32Layout,
                        rwsem::MergedOwnerLayout>;

using AllLocks =
    Keep<BuildsHere, rwsem::BasicRwSemaphore<rwsem::Generic64Layout>,
         rwsem::BasicRwSemaphore<rwsem::Generic32Layout>,
         rwsem::BasicRwSemaphore<rwsem::MergedOwnerLayout>, rwsem::QRwLock, rwsem::Mutex>;

// ForEachType<List>(f) calls f(TypeTag<T>{}) for each T of a Types list.
template <class T>
struct TypeTag {
  using type = T;
};
template <class List>
struct ForEachTypeImpl;
template <class... Ts>
struct ForEachTypeImpl<::testing::Types<Ts...>> {
  template <class F>
  static void run(F& f) {
    (f(TypeTag<Ts>{}), ...);
  }
};
template <class List, class F>
void ForEachType(F f) {
  ForEachTypeImpl<List>::run(f);
}

// Names typed tests by layout or lock ("RwsemCore/generic32.WakeBatch",
// "Stress/qrwlock.WritersOnly") instead of by index, so a failure names the
// lock, and reports can group results by it.
struct LayoutNames {
  template <class T>
  static std::string GetName(int) {
    return T::kName;
  }
};
using LockNames = LayoutNames;

// ---- capabilities ----------------------------------------------------------

template <class T, class = void>
struct HasShared : std::false_type {};
template <class T>
struct HasShared<T, std::void_t<decltype(std::declval<T&>().lock_shared())>> : std::true_type {};

template <class T, class = void>
struct HasTimed : std::false_type {};
template <class T>
struct HasTimed<
    T, std::void_t<decltype(std::declval<T&>().try_lock_for(std::chrono::milliseconds(1)))>>
    : std::true_type {};

template <class T>
struct IsRwsem : std::false_type {};
template <class L, class P>
struct IsRwsem<rwsem::BasicRwSemaphore<L, P>> : std::true_type {};

template <class T>
inline constexpr bool kShared = HasShared<T>::value;
template <class T>
inline constexpr bool kTimed = HasTimed<T>::value;
// downgrade_write() is the rwsem's alone.
template <class T>
inline constexpr bool kDowngrade = IsRwsem<T>::value;

// ---- adapters: the operations every suite uses, by capability ----------------
//
// "read" operations take the shared side where there is one, else the lock
// exclusively; timed ones fall back to the blocking or try form. Each
// returns whether the lock is now held.

template <class T>
void read_lock(T& l) {
  if constexpr (kShared<T>) l.lock_shared();
  else l.lock();
}
template <class T>
bool read_try_lock(T& l) {
  if constexpr (kShared<T>) return l.try_lock_shared();
  else return l.try_lock();
}
template <class T, class D>
bool read_lock_for(T& l, D d) {
  if constexpr (kShared<T> && kTimed<T>) return l.try_lock_shared_for(d);
  else if constexpr (kTimed<T>) return l.try_lock_for(d);
  else {
    read_lock(l);
    return true;
  }
}
template <class T>
void read_unlock(T& l) {
  if constexpr (kShared<T>) l.unlock_shared();
  else l.unlock();
}
template <class T, class D>
bool write_lock_for(T& l, D d) {
  if constexpr (kTimed<T>) return l.try_lock_for(d);
  else {
    l.lock();
    return true;
  }
}
// Downgrades where the lock can; elsewhere the caller keeps the exclusive
// lock, which is a stronger guarantee than the read lock it asked for.
// Returns true if it downgraded.
template <class T>
bool downgrade(T& l) {
  if constexpr (kDowngrade<T>) {
    l.downgrade_write();
    return true;
  } else return false;
}
// Releases what downgrade() left held.
template <class T>
void unlock_after_downgrade(T& l, bool downgraded) {
  if (downgraded) read_unlock(l);
  else l.unlock();
}

// A lock for starvation tests: the rwsem with an explicit 4 ms handoff
// timeout, the others as they come (their fairness has no timeout).
template <class T>
std::unique_ptr<T> make_starvation_lock() {
  if constexpr (IsRwsem<T>::value)
    return std::make_unique<T>(rwsem::Options{std::chrono::milliseconds(4)});
  else return std::make_unique<T>();
}

// A lock with optimistic spinning on or off, for the locks that spin (the
// rwsem and the mutex); the queued rwlock ignores `spin`. Turning spinning
// off sends every contended acquisition through the sleep-and-wake path.
template <class T>
std::unique_ptr<T> make_lock(bool spin) {
  if constexpr (std::is_constructible_v<T, const rwsem::Options&>) {
    rwsem::Options o;
    if (!spin) o.spin_budget = std::chrono::nanoseconds(0);
    return std::make_unique<T>(o);
  } else {
    return std::make_unique<T>();
  }
}

}  // namespace rwsem_test

#endif  // RWSEM_CONFORMANCE_LOCK_TYPES_H_
