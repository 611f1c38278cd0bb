// rwsem::QRwLock: the kernel's queued rwlock in user space, a fair spinning
// reader-writer lock for short critical sections.
//
// Eight bytes: the 32-bit lock word (QRwLockLayout, below:
// writer byte, WAITING bit, reader count) and a ticket lock that orders the
// slow-path waiters. The fast paths touch only the lock word:
//
//   lock_shared    add a reader bias; done unless a writer holds or waits
//   unlock_shared  subtract the bias
//   lock           cmpxchg 0 -> LOCKED
//   unlock         store 0 to the writer byte alone
//
// Everyone who fails a fast path takes a ticket and waits its turn; the one
// at the head of the queue then deals with the lock word on its own, so
// waiters are served in arrival order and a stream of readers cannot starve
// a writer (a writer at the head sets WAITING, which sends newly arriving
// readers to the queue behind it).
//
// The two improvements of the qrwlock series ("Improve qrwlock performance", LINEAGE.md) are both here:
//  - a reader at the head of the queue adds its bias at once and then waits
//    only for a writer that *holds* the lock to leave (read_slow);
//  - a writer at the head takes the lock in one step while no reader is
//    present, and uses the WAITING -> LOCKED two-step only when readers are
//    there to be drained (write_slow), or, unlike the series, when the one
//    step has not worked within the short phase of its wait: fast-path
//    writers could otherwise overtake it for ever.
//
// Waiting never sleeps in the kernel; it spins with back-off
// (internal/spin_wait.h). Use it where critical sections are short and
// threads rarely outnumber cores; rwsem::RwSemaphore is the sleeping lock.
//
// Memory ordering: every acquisition ends with an acquire operation on the
// lock word, every release is a release operation on it; the pairs are
// named at each operation. The ticket lock orders waiters only; it is never
// what orders one critical section before the next. Relaxed loads of the
// word are only pre-checks: the RMW that follows each of them decides, and
// carries the ordering.
//
// QRwLock is BasicQRwLock<NativePlatform>: its atomics, the writer-byte
// store and the spin-wait hints come from the platform policy
// (lib/rwsem/internal/platform.h).
#ifndef RWSEM_LIB_QRWLOCK_H_
#define RWSEM_LIB_QRWLOCK_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "arch/cpu.h"
#include "lib/rwsem/config.h"
#include "lib/rwsem/internal/platform.h"
#include "lib/rwsem/internal/runtime.h"
#include "lib/rwsem/internal/spin_wait.h"

namespace rwsem {

// ---------------------------------------------------------------------------
// The queued rwlock word, 32 bits on every target (every bit of it is
// documented here and nowhere else).
//
//   bits 0-7    writer byte: 0x00 no writer, 0xff write locked
//   bit  8      a writer at the head of the queue waits for readers to drain
//   bits 9-31   reader count (23 bits), including readers that are backing
//               out of a failed fast path
//
// The writer releases the lock by storing 0 to the writer byte alone, so the
// WAITING bit and the reader count are untouched by that store. The byte's
// address inside the word depends on byte order: the least significant
// byte is the lowest address on little-endian targets and the highest on
// big-endian ones (ppc64, ppc, s390x).
// ---------------------------------------------------------------------------
struct QRwLockLayout {
  using Word = std::uint32_t;
  static constexpr const char* kName = "qrwlock";
  static constexpr Word kWriterLocked = 0xff;  // the whole writer byte
  static constexpr Word kWriterWaiting = Word{1} << 8;
  static constexpr Word kWriterMask = kWriterLocked | kWriterWaiting;
  static constexpr int kReaderShift = 9;
  static constexpr Word kReaderBias = Word{1} << kReaderShift;
  static constexpr Word kReaderMask = ~kWriterMask;
  // Offset, in bytes from the start of the word, of bits 0-7.
  static constexpr std::size_t kWriterByteOffset = arch::kTarget.big_endian ? sizeof(Word) - 1 : 0;

  static constexpr Word readers(Word w) { return w >> kReaderShift; }
  static constexpr bool write_locked(Word w) { return (w & kWriterLocked) != 0; }
  static constexpr bool writer_waiting(Word w) { return (w & kWriterWaiting) != 0; }
  static constexpr bool has_writer(Word w) { return (w & kWriterMask) != 0; }
};

namespace testing {
struct QRwLockPeer;
}  // namespace testing

template <class P>
class BasicQRwLock {
  using L = QRwLockLayout;
  template <class T>
  using Atomic = typename P::template Atomic<T>;

 public:
  using Word = L::Word;
  static constexpr const char* kName = L::kName;

  BasicQRwLock() = default;
  BasicQRwLock(const BasicQRwLock&) = delete;
  BasicQRwLock& operator=(const BasicQRwLock&) = delete;

  // ---- shared ----------------------------------------------------------
  void lock_shared() {
    // acquire pairs with the writer-byte release store in unlock(): if no
    // writer was there, the last writer's section happened before ours.
    const Word c = cnts_.fetch_add(L::kReaderBias, kReadLockOrder);
    if (!L::has_writer(c)) return;
    read_slow();
  }

  [[nodiscard]] bool try_lock_shared() {
    Word c = cnts_.load(std::memory_order_relaxed);
    if (L::has_writer(c)) return false;
    // acquire: as in lock_shared().
    c = cnts_.fetch_add(L::kReaderBias, kReadLockOrder);
    if (!L::has_writer(c)) return true;
    // relaxed: we never held the lock, so there is nothing to publish.
    cnts_.fetch_sub(L::kReaderBias, std::memory_order_relaxed);
    return false;
  }

  void unlock_shared() {
    // release pairs with the acquire that a writer's cmpxchg to LOCKED
    // performs: our loads happen before its stores.
    cnts_.fetch_sub(L::kReaderBias, std::memory_order_release);
  }

  // ---- exclusive -------------------------------------------------------
  void lock() {
    if (try_lock()) return;
    write_slow();
  }

  [[nodiscard]] bool try_lock() {
    Word expected = 0;
    if (cnts_.load(std::memory_order_relaxed) != 0) return false;
    // acquire pairs with unlock_shared()'s release fetch_sub and with the
    // writer-byte release store of the previous writer.
    return cnts_.compare_exchange_strong(expected, L::kWriterLocked, std::memory_order_acquire,
                                         std::memory_order_relaxed);
  }

  void unlock() {
    // A store to the writer byte alone, as the kernel's queued_write_unlock:
    // the WAITING bit and reader biases added meanwhile are not ours to
    // overwrite. release pairs with the acquire of the next owner (a load or
    // RMW of the whole word, which contains this byte). ThreadSanitizer keys
    // synchronisation by address; the byte is at the word's own address on
    // every little-endian target, which is where TSan runs.
    P::store_byte(&cnts_, kWriterByte, std::uint8_t{0}, std::memory_order_release);
  }

  // ---- inspection ------------------------------------------------------
  Word count() const { return cnts_.load(std::memory_order_relaxed); }
  std::string describe() const { return describe_word(count()); }

  static std::string describe_word(Word c) {
    std::string s;
    internal::append_format(
        &s, "%s 0x%llx readers=%llu writer=%s%s", kName, static_cast<unsigned long long>(c),
        static_cast<unsigned long long>(L::readers(c)), L::write_locked(c) ? "locked" : "none",
        L::writer_waiting(c) ? " waiting" : "");
    if (const Word stray = c & L::kWriterLocked; stray != 0 && stray != L::kWriterLocked)
      internal::append_format(&s, " bad-writer-byte=0x%llx",
                              static_cast<unsigned long long>(stray));
    return s;
  }

 private:
  // The readers' fetch_add that takes the lock (lock_shared(),
  // try_lock_shared()): acquire, pairing with the writer-byte release store
  // in unlock().
  static constexpr std::memory_order kReadLockOrder = std::memory_order_acquire;

  // queued_read_lock_slowpath().
  void read_slow() {
    // Back out of the fast path's bias and queue. relaxed: we did not own
    // the lock; the head writer that waits for readers to drain reads the
    // count again after this, so it cannot miss the decrement.
    cnts_.fetch_sub(L::kReaderBias, std::memory_order_relaxed);
    queue_.lock();
    // "locking/qrwlock: Reduce reader/writer to reader lock transfer latency"
    // (the qrwlock series): at the head of the queue, add the bias now and
    // wait only for a writer that holds the lock. No writer can be in WAITING
    // here: only the head of the queue sets WAITING, and it turns it into
    // LOCKED before it leaves the head. relaxed: the acquire is the load
    // that ends the wait.
    cnts_.fetch_add(L::kReaderBias, std::memory_order_relaxed);
    internal::SpinWait<P> w;
    // acquire pairs with the writer-byte release store in unlock().
    while (L::write_locked(cnts_.load(std::memory_order_acquire))) w.once();
    queue_.unlock();
  }

  // queued_write_lock_slowpath().
  void write_slow() {
    queue_.lock();
    internal::SpinWait<P> w;
    // "locking/qrwlock: Reduce writer to writer lock transfer latency"
    // (the qrwlock series): one step while no reader is present. The word can be
    // non-zero without readers only while a fast-path writer holds it.
    //
    // Only for the short phase of the wait (SpinWait's relaxing, a few
    // microseconds), not as the series has it, for as long as no reader
    // comes. A fast-path writer takes the word whenever it is 0, and one
    // that loops unlock/lock leaves it 0 for nanoseconds: a head writer
    // polling between yields almost never sees that, and every waiter
    // queued behind it waits with it (a reader waited 2.5 s behind two
    // such writers on 2 cores). WAITING stops fast-path writers as it stops
    // new readers, so the head writer then gets the lock at the next
    // release: the transfer the series sped up is kept for short waits,
    // and the queue stays fair.
    for (;;) {
      Word c = cnts_.load(std::memory_order_relaxed);
      if (c == 0) {
        // acquire: as in try_lock().
        if (cnts_.compare_exchange_strong(c, c | L::kWriterLocked, std::memory_order_acquire,
                                          std::memory_order_relaxed)) {
          queue_.unlock();
          return;
        }
      }
      if ((c & L::kReaderMask) != 0 || w.yielding()) break;
      w.once();
    }
    // Readers are present, or the short phase is over: announce ourselves
    // so that new readers and fast-path writers queue behind us, then wait
    // for the present holders to leave. relaxed: WAITING is a request, not
    // a publication of data.
    cnts_.fetch_or(L::kWriterWaiting, std::memory_order_relaxed);
    for (;;) {
      Word c = cnts_.load(std::memory_order_relaxed);
      // acquire pairs with the last reader's release fetch_sub and with the
      // writer-byte release store of a writer that held the lock meanwhile.
      if (c == L::kWriterWaiting &&
          cnts_.compare_exchange_strong(c, L::kWriterLocked, std::memory_order_acquire,
                                        std::memory_order_relaxed))
        break;
      w.once();
    }
    queue_.unlock();
  }

  // Where unlock() stores: the writer byte's offset inside cnts_.
  static constexpr std::size_t kWriterByte = L::kWriterByteOffset;

  // A FIFO ticket lock: the kernel's qrwlock queues on a qspinlock; any fair
  // queue lock gives the same order. Its acquire/release pairs order only the
  // queue hand-over, not the protected data.
  class TicketLock {
   public:
    void lock() {
      // relaxed: a ticket number orders nothing; the acquire load of
      // serving_ below is what orders us after the previous holder.
      const std::uint16_t me = next_.fetch_add(1, std::memory_order_relaxed);
      internal::SpinWait<P> w;
      // acquire pairs with the release store in unlock().
      while (serving_.load(std::memory_order_acquire) != me) w.once();
    }
    void unlock() {
      // Only the holder writes serving_; relaxed load of our own value.
      const std::uint16_t s = serving_.load(std::memory_order_relaxed);
      serving_.store(static_cast<std::uint16_t>(s + 1), std::memory_order_release);
    }

   private:
    Atomic<std::uint16_t> next_{0};
    Atomic<std::uint16_t> serving_{0};
  };

  friend struct testing::QRwLockPeer;
  Atomic<Word> cnts_{0};
  TicketLock queue_;
};

using QRwLock = BasicQRwLock<internal::NativePlatform>;

static_assert(sizeof(std::atomic<QRwLock::Word>) == sizeof(QRwLock::Word),
              "the writer byte is addressed inside the lock word");

}  // namespace rwsem

#endif  // RWSEM_LIB_QRWLOCK_H_
