// Constants and predicates derived from a count layout (arch/count_layouts.h).
//
// Every layout-dependent test the algorithm makes goes through one of the
// small named predicates below, so that the algorithm reads the same for
// all layouts and a layout only has to state its bits.
#ifndef RWSEM_LIB_INTERNAL_COUNT_BITS_H_
#define RWSEM_LIB_INTERNAL_COUNT_BITS_H_

#include <cstdint>
#include <limits>
#include <type_traits>

namespace rwsem {
namespace internal {

template <class L>
struct CountBits {
  using Word = typename L::Word;
  static_assert(std::is_unsigned<Word>::value, "count word must be unsigned");

  static constexpr int kWordBits = std::numeric_limits<Word>::digits;
  static constexpr Word kReaderBias = Word{1} << L::kReaderShift;
  // The reader count field, READFAIL included: READFAIL is the top bit of
  // the reader count, reached when the count would need one bit too many.
  static constexpr Word kReaderMask = static_cast<Word>(~(kReaderBias - 1));
  static constexpr Word kLockMask = L::kWriterMask | kReaderMask;
  static constexpr Word kReadFailedMask = L::kWriterMask | L::kWaiters | L::kHandoff | L::kReadFail;
  // Readers that can hold the lock at once: the reader that brings the count
  // to this many sets READFAIL, and every later reader sleeps until all
  // readers have left.
  static constexpr std::uint64_t kMaxReaders = L::kReadFail >> L::kReaderShift;

  static_assert(L::kReadFail == Word{1} << (kWordBits - 1),
                "READFAIL must be the sign bit of the count");
  static constexpr Word kFlags = L::kWaiters | L::kHandoff | L::kWoken;
  static_assert((L::kWriterMask & kFlags) == 0 && (L::kWaiters & L::kHandoff) == 0 &&
                    (L::kWaiters & L::kWoken) == 0 && (L::kHandoff & L::kWoken) == 0,
                "flag bits must be disjoint");
  static_assert(((L::kWriterMask | kFlags | L::kReservedMask) & kReaderMask) == 0,
                "flags must lie below the reader count");
  static_assert((L::kWriterMask | kFlags | L::kReservedMask | kReaderMask) ==
                    std::numeric_limits<Word>::max(),
                "the layout must account for every bit of the word");

  static constexpr bool is_write_locked(Word c) { return (c & L::kWriterMask) != 0; }
  static constexpr bool has_readers(Word c) { return (c & kReaderMask) != 0; }
  static constexpr bool is_locked(Word c) { return (c & kLockMask) != 0; }
  static constexpr bool has_waiters(Word c) { return (c & L::kWaiters) != 0; }
  static constexpr bool has_handoff(Word c) { return (c & L::kHandoff) != 0; }
  static constexpr bool has_woken_waiter(Word c) { return (c & L::kWoken) != 0; }
  static constexpr bool is_read_fail(Word c) { return (c & L::kReadFail) != 0; }
  static constexpr bool read_fails(Word c) { return (c & kReadFailedMask) != 0; }
  static constexpr std::uint64_t reader_count(Word c) {
    return static_cast<std::uint64_t>(c >> L::kReaderShift);
  }
  // Must an unlock that sees `c` wake the queue? Only if someone is queued
  // and no woken waiter is already on its way to retry (it will see the
  // lock as the unlock leaves it).
  static constexpr bool must_wake(Word c) { return (c & (L::kWaiters | L::kWoken)) == L::kWaiters; }
  // The state after the last lock holder left with someone queued and
  // nobody on the way: up_read and a reader backing out its bias must then
  // wake the queue.
  static constexpr bool needs_wake_after_reader_exit(Word c) {
    return (c & (kLockMask | L::kWaiters | L::kWoken)) == L::kWaiters;
  }
  // A count no correct sequence of operations produces: reserved bits set,
  // or HANDOFF or WOKEN without WAITERS (both belong to a queued waiter).
  static constexpr bool is_consistent(Word c) {
    return (c & L::kReservedMask) == 0 && (!has_handoff(c) || has_waiters(c)) &&
           (!has_woken_waiter(c) || has_waiters(c));
  }
};

}  // namespace internal
}  // namespace rwsem

#endif  // RWSEM_LIB_INTERNAL_COUNT_BITS_H_
