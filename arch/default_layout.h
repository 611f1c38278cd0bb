// arch/default_layout.h: which count layout each ISA uses by default.
#ifndef RWSEM_ARCH_DEFAULT_LAYOUT_H_
#define RWSEM_ARCH_DEFAULT_LAYOUT_H_

#include "arch/count_layouts.h"

namespace rwsem {

#if defined(__x86_64__)
// Owner merged into the count: the owner is visible in the same atomic word
// that says "write locked" ("Merge owner into count on x86-64", rwsem
// series patch 11).
using DefaultLayout = MergedOwnerLayout;
#elif defined(__LP64__) || defined(_LP64)
using DefaultLayout = Generic64Layout;
#else
using DefaultLayout = Generic32Layout;
#endif

}  // namespace rwsem

#endif  // RWSEM_ARCH_DEFAULT_LAYOUT_H_
