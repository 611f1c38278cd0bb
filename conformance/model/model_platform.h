// ModelPlatform: the lock's platform policy (lib/rwsem/internal/platform.h)
// with every member forwarded to the model checker (model.h). A lock
// instantiated on it, e.g. BasicRwSemaphore<Layout, mc::ModelPlatform>,
// runs its one and only algorithm under the checker's scheduler and memory
// model.
#ifndef RWSEM_CONFORMANCE_MODEL_MODEL_PLATFORM_H_
#define RWSEM_CONFORMANCE_MODEL_MODEL_PLATFORM_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "conformance/model/model.h"
#include "lib/rwsem/internal/thread_record.h"

namespace rwsem {
namespace mc {

struct ModelPlatform {
  template <class T>
  using Atomic = mc::Atomic<T>;
  template <class T>
  using Plain = mc::Plain<T>;
  using Record = internal::BasicThreadRecord<ModelPlatform>;

  static void fence(std::memory_order mo) { op_fence(mo); }
  static int futex_wait(Atomic<std::uint32_t>* w, std::uint32_t expected,
                        std::int64_t deadline_ns) {
    return op_futex_wait(w->location(), expected, deadline_ns);
  }
  static void futex_wake(Atomic<std::uint32_t>* w, int n) { op_futex_wake(w->location(), n); }
  // One clock, virtual: the futex deadlines' and the handoff decisions'.
  static std::int64_t now_ns() { return mc::now_ns(); }
  static std::int64_t handoff_now_ns() { return mc::now_ns(); }
  static void cpu_relax() { op_spin_hint(false); }
  // One scheduling point however long the back-off: the interleavings a
  // longer pause allows are the same, only less likely natively.
  static void pause(unsigned) { op_spin_hint(false); }
  static void yield() { op_spin_hint(true); }
  // A yield: the model has no priorities, so sleeping lets no thread run
  // that a yield would not.
  static void sleep_for_ns(std::int64_t) { op_spin_hint(true); }
  // The scheduler explores the windows perturbation widens natively.
  static void perturb() {}
  static Record& current_thread() { return *static_cast<Record*>(current_record()); }
  template <class F>
  static void for_each_record(F&& f) {
    using Fn = std::remove_reference_t<F>;
    mc::for_each_record(
        [](void* r, void* fn) { (*static_cast<Fn*>(fn))(*static_cast<Record*>(r)); }, &f);
  }
  static bool current_thread_is_realtime() { return false; }
  static unsigned max_spinners() { return mc::max_spinners(); }
  static int wait_lock_spins() { return mc::wait_lock_spins(); }
  // No kernel to ask: a model thread is preempted wherever the scheduler
  // chooses, which is what the extension only makes less likely.
  static void begin_short_section() {}
  static void end_short_section() {}
  template <class W>
  static void store_byte(Atomic<W>* word, std::size_t offset, std::uint8_t v,
                         std::memory_order mo) {
    op_store_byte(word->location(), offset, v, mo);
  }
};

}  // namespace mc
}  // namespace rwsem

#endif  // RWSEM_CONFORMANCE_MODEL_MODEL_PLATFORM_H_
