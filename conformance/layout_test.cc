// Layout conformance: each count layout's bits are what arch/count_layouts.h
// documents, the derived constants follow, and describe() decodes every flag.
// On failure the layout's constant table is printed.
#include <gtest/gtest.h>

#include <bitset>
#include <cstdio>
#include <sstream>

#include "arch/cpu.h"
#include "conformance/lock_types.h"
#include "lib/rwsem/rwsem.h"

namespace rwsem_test {
namespace {

template <class L>
class Layout : public ::testing::Test {
 protected:
  using B = rwsem::internal::CountBits<L>;
  using Word = typename L::Word;

  static std::string table() {
    std::ostringstream os;
    auto row = [&](const char* name, Word v) {
      os << "  " << name << " = 0x" << std::hex << static_cast<std::uint64_t>(v) << std::dec
         << "\n";
    };
    os << "layout " << L::kName << " (" << B::kWordBits << "-bit word)\n";
    row("kWriterMask     ", L::kWriterMask);
    row("kWaiters        ", L::kWaiters);
    row("kHandoff        ", L::kHandoff);
    row("kWoken          ", L::kWoken);
    row("kReservedMask   ", L::kReservedMask);
    row("kReaderBias     ", B::kReaderBias);
    row("kReaderMask     ", B::kReaderMask);
    row("kReadFail       ", L::kReadFail);
    row("kReadFailedMask ", B::kReadFailedMask);
    os << "  kMaxReaders      = " << B::kMaxReaders << "\n";
    return os.str();
  }
};
TYPED_TEST_SUITE(Layout, AllLayouts, LayoutNames);

TYPED_TEST(Layout, MasksAreDisjointAndCoverTheWord) {
  using L = TypeParam;
  using B = typename TestFixture::B;
  using Word = typename TestFixture::Word;
  const Word parts[] = {L::kWriterMask,   L::kWaiters,
                        L::kHandoff,      L::kWoken,
                        L::kReservedMask, static_cast<Word>(B::kReaderMask & ~L::kReadFail),
                        L::kReadFail};
  Word seen = 0;
  for (std::size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); ++i) {
    const Word p = parts[i];
    if (i != 4) EXPECT_NE(p, 0u) << "empty mask #" << i << "\n" << TestFixture::table();
    EXPECT_EQ(seen & p, 0u) << "overlapping masks\n" << TestFixture::table();
    seen |= p;
  }
  EXPECT_EQ(seen, static_cast<Word>(~Word{0})) << "bits unaccounted for\n" << TestFixture::table();
}

TYPED_TEST(Layout, ReadFailedMaskIsWriterWaitersHandoffReadFail) {
  using L = TypeParam;
  using B = typename TestFixture::B;
  EXPECT_EQ(B::kReadFailedMask, L::kWriterMask | L::kWaiters | L::kHandoff | L::kReadFail)
      << TestFixture::table();
  EXPECT_EQ(L::kReadFail, typename L::Word{1} << (B::kWordBits - 1))
      << "READFAIL must be the sign bit\n"
      << TestFixture::table();
}

TYPED_TEST(Layout, MatchesTheDesignTable) {
  using L = TypeParam;
  using B = typename TestFixture::B;
  const std::string name = L::kName;
  if (name == "generic64" || name == "generic32") {
    EXPECT_EQ(L::kWriterMask, 1u << 0) << TestFixture::table();
    EXPECT_EQ(L::kWaiters, 1u << 1) << TestFixture::table();
    EXPECT_EQ(L::kHandoff, 1u << 2) << TestFixture::table();
    EXPECT_EQ(L::kWoken, 1u << 3) << TestFixture::table();
    EXPECT_EQ(L::kReservedMask, 0xF0u) << TestFixture::table();
    EXPECT_EQ(L::kReaderShift, 8) << TestFixture::table();
    EXPECT_EQ(B::kWordBits, name == "generic64" ? 64 : 32);
    EXPECT_EQ(B::kMaxReaders,
              name == "generic64" ? (std::uint64_t{1} << 55) : (std::uint64_t{1} << 23));
  } else {
    ASSERT_EQ(name, "merged");
    EXPECT_EQ(L::kWaiters, 1u << 0) << TestFixture::table();
    EXPECT_EQ(L::kHandoff, 1u << 1) << TestFixture::table();
    EXPECT_EQ(L::kWoken, 1u << 2) << TestFixture::table();
    EXPECT_EQ(L::kWriterMask, ((std::uint64_t{1} << 48) - 1) & ~std::uint64_t{7})
        << TestFixture::table();
    EXPECT_EQ(L::kReaderShift, 48) << TestFixture::table();
    EXPECT_EQ(B::kMaxReaders, std::uint64_t{1} << 15);
  }
  EXPECT_EQ(B::kReaderBias, typename L::Word{1} << L::kReaderShift);
}

TYPED_TEST(Layout, DescribeDecodesEveryFlag) {
  using L = TypeParam;
  using B = typename TestFixture::B;
  using Word = typename TestFixture::Word;
  const std::uint64_t id = 0x123456789aULL;  // 37 bits: needs the merged owner field
  const Word writer = L::writer_word(id);
  struct Case {
    Word word;
    std::vector<std::string> expect;
  } cases[] = {
      {0, {"readers=0", "writer=none"}},
      {static_cast<Word>(3 * B::kReaderBias), {"readers=3", "writer=none"}},
      {static_cast<Word>(writer | L::kWaiters),
       {"readers=0", L::kOwnerInCount ? "writer=0x123456789a" : "writer=locked", "waiters"}},
      {static_cast<Word>(2 * B::kReaderBias | L::kWaiters | L::kHandoff),
       {"readers=2", "waiters", "handoff"}},
      {static_cast<Word>(L::kReadFail | L::kWaiters), {"readfail", "waiters"}},
      {static_cast<Word>(L::kWaiters | L::kWoken),
       {"readers=0", "writer=none", "waiters", "woken"}},
  };
  for (const auto& c : cases) {
    const std::string d = rwsem::describe<L>(c.word);
    std::printf("  %-9s %s\n", L::kName, d.c_str());
    for (const auto& e : c.expect)
      EXPECT_NE(d.find(e), std::string::npos) << "'" << d << "' lacks '" << e << "'\n"
                                              << TestFixture::table();
    if (!B::has_handoff(c.word)) EXPECT_EQ(d.find("handoff"), std::string::npos) << d;
    if (!B::has_waiters(c.word)) EXPECT_EQ(d.find("waiters"), std::string::npos) << d;
  }
  if (L::kReservedMask != 0) {
    const std::string d =
        rwsem::describe<L>(static_cast<Word>(L::kReservedMask & (0 - L::kReservedMask)));
    EXPECT_NE(d.find("reserved="), std::string::npos) << d;
  }
}

TYPED_TEST(Layout, OwnerIdRoundTrips) {
  using L = TypeParam;
  if (!L::kOwnerInCount) {
    EXPECT_EQ(L::writer_word(12345), L::kWriterMask);
    return;
  }
  for (int bits = 1; bits <= 45; ++bits) {
    const std::uint64_t id = (std::uint64_t{1} << bits) - 1;
    ASSERT_TRUE(L::encodable(id)) << bits;
    EXPECT_EQ(L::owner_id(L::writer_word(id)), id) << "id of " << bits << " bits";
    EXPECT_EQ(L::writer_word(id) & ~L::kWriterMask, 0u) << "id spills out of its field";
  }
}

TEST(LockSize, FitsTheBudget) {
  const std::size_t budget = sizeof(void*) == 8 ? 40 : 24;
  std::printf("  target %s: sizeof(RwSemaphore)=%zu (default layout %s);",
              rwsem::arch::kTarget.name, sizeof(rwsem::RwSemaphore), rwsem::DefaultLayout::kName);
  ForEachType<AllLayouts>([](auto tag) {
    using L = typename decltype(tag)::type;
    std::printf(" %s=%zu", L::kName, sizeof(rwsem::BasicRwSemaphore<L>));
  });
  std::printf("\n");
  EXPECT_LE(sizeof(rwsem::RwSemaphore), budget) << "on " << rwsem::arch::kTarget.name;
}

TEST(LockSize, DefaultLayoutPerTarget) {
  const std::string target = rwsem::arch::kTarget.name;
  const std::string expected = target == "x86_64"                        ? "merged"
                               : rwsem::arch::kTarget.pointer_bits == 64 ? "generic64"
                                                                         : "generic32";
  EXPECT_EQ(rwsem::DefaultLayout::kName, expected) << "on " << target;
}

}  // namespace
}  // namespace rwsem_test
