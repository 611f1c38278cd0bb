// arch/count_layouts.h: every count layout of the rwsem, documented here and
// nowhere else. Which one each ISA uses by default is in default_layout.h.
// (The companion locks document their own words, which no ISA changes, at
// the top of lib/rwsem/qrwlock.h and lib/rwsem/mutex.h.)
//
// A layout is data: the bit positions of one count word plus the pure
// functions that put a writer's owner id into the word and take it out
// again. The lock algorithm (lib/rwsem/rwsem.h) is written once against
// the members every layout provides:
//
//   Word            unsigned integer type of the atomic count
//   kName           short name used by describe(), tests and reports
//   kWaiters        "the wait queue is not empty"
//   kHandoff        "the first waiter is owed the lock; no stealing"
//   kWoken          "the first waiter has been woken to retry and has not
//                   retried yet" (a writer, or a lone reader woken by a
//                   writer's unlock): an unlock need not wake anyone
//   kWriterMask     the bits that are non-zero iff a writer owns the lock
//   kReaderShift    the reader count starts at this bit
//   kReadFail       the guard bit: a reader that sees it set sleeps
//   kReservedMask   bits no correct operation ever sets
//   kOwnerInCount   true when kWriterMask holds the owner's id
//   encodable(id)   can the thread with owner id `id` take the write lock
//   writer_word(id) the value a writer adds to the count (cached per thread)
//   owner_id(word)  the id of the writer in `word`; 0 if the layout has none
//
// Derived constants (reader bias, masks, the maximum reader count) are
// computed once for all layouts in lib/rwsem/internal/count_bits.h.
//
// Owner ids: lib/rwsem gives every thread a 64-byte aligned record and
// uses (record address >> 6) as the thread's owner id, so an id is never 0
// and, on 64-bit ABIs, usually needs more than 32 bits.
#ifndef RWSEM_ARCH_COUNT_LAYOUTS_H_
#define RWSEM_ARCH_COUNT_LAYOUTS_H_

#include <cstdint>

namespace rwsem {

// The two generic layouts differ only in the width of the word, so they are
// one template; each is documented here.
//
// Generic 64-bit layout (default on 64-bit ISAs other than x86-64):
//
//   bit  0      writer locked
//   bit  1      waiters present
//   bit  2      handoff
//   bit  3      woken waiter on its way
//   bits 4-7    reserved (always 0)
//   bits 8-62   reader count (55 bits)
//   bit  63     READFAIL guard
//
// Generic 32-bit layout (default on 32-bit ISAs):
//
//   bit  0      writer locked
//   bit  1      waiters present
//   bit  2      handoff
//   bit  3      woken waiter on its way
//   bits 4-7    reserved (always 0)
//   bits 8-30   reader count (23 bits)
//   bit  31     READFAIL guard
//
// The owner lives in a separate field of the lock.
template <class W>
struct GenericLayout {
  using Word = W;
  static constexpr Word kWriterMask = Word{1} << 0;
  static constexpr Word kWaiters = Word{1} << 1;
  static constexpr Word kHandoff = Word{1} << 2;
  static constexpr Word kWoken = Word{1} << 3;
  static constexpr Word kReservedMask = Word{0xF0};
  static constexpr int kReaderShift = 8;
  static constexpr Word kReadFail = Word{1} << (sizeof(Word) * 8 - 1);
  static constexpr bool kOwnerInCount = false;

  static constexpr bool encodable(std::uint64_t /*id*/) { return true; }
  static constexpr Word writer_word(std::uint64_t /*id*/) { return kWriterMask; }
  static constexpr std::uint64_t owner_id(Word /*word*/) { return 0; }
};

struct Generic64Layout : GenericLayout<std::uint64_t> {
  static constexpr const char* kName = "generic64";
};

struct Generic32Layout : GenericLayout<std::uint32_t> {
  static constexpr const char* kName = "generic32";
};

// ---------------------------------------------------------------------------
// Merged-owner layout (default on x86-64; runs on every target).
//
//   bit  0      waiters present
//   bit  1      handoff
//   bit  2      woken waiter on its way
//   bits 3-47   owner id of the writer (45 bits); non-zero = write locked
//   bits 48-62  reader count (15 bits)
//   bit  63     READFAIL guard
//
// The write lock word of a thread is (owner id << 3). Taking it is still
// one cmpxchg (adding the word to a count with no holder), and the owner
// is known the instant the lock is taken, with no window where the count
// says "write locked" but the owner is unknown.
// An id of 2^45 or more (a record at or above 2^51, far beyond the 47-bit
// user address space of 4-level paging) cannot be encoded; the thread is refused at its
// first write lock with a message, never truncated.
// ---------------------------------------------------------------------------
struct MergedOwnerLayout {
  using Word = std::uint64_t;
  static constexpr const char* kName = "merged";
  static constexpr Word kWaiters = Word{1} << 0;
  static constexpr Word kHandoff = Word{1} << 1;
  static constexpr Word kWoken = Word{1} << 2;
  static constexpr int kOwnerShift = 3;
  static constexpr int kOwnerBits = 45;
  static constexpr Word kWriterMask = ((Word{1} << kOwnerBits) - 1) << kOwnerShift;
  static constexpr Word kReservedMask = Word{0};
  static constexpr int kReaderShift = kOwnerShift + kOwnerBits;  // 48
  static constexpr Word kReadFail = Word{1} << 63;
  static constexpr bool kOwnerInCount = true;

  static constexpr bool encodable(std::uint64_t id) { return id != 0 && (id >> kOwnerBits) == 0; }
  static constexpr Word writer_word(std::uint64_t id) {
    return static_cast<Word>(id) << kOwnerShift;
  }
  static constexpr std::uint64_t owner_id(Word word) { return (word & kWriterMask) >> kOwnerShift; }
};

}  // namespace rwsem

#endif  // RWSEM_ARCH_COUNT_LAYOUTS_H_
