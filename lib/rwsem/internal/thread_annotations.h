// Clang's thread-safety attributes (-Wthread-safety), as macros that vanish
// on other compilers. Only the wait locks use them: a wait lock is a
// capability, the queue fields it guards are GUARDED_BY it, and the helpers
// that edit the queue REQUIRE it, so Clang rejects a call made without it.
// The lock's own protocol (the count word) is lock-free and outside what
// the analysis can express; the corpus and the model checker cover it.
#ifndef RWSEM_LIB_INTERNAL_THREAD_ANNOTATIONS_H_
#define RWSEM_LIB_INTERNAL_THREAD_ANNOTATIONS_H_

#if defined(__clang__)
#define RWSEM_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define RWSEM_THREAD_ANNOTATION(x)
#endif

#define RWSEM_CAPABILITY(name) RWSEM_THREAD_ANNOTATION(capability(name))
#define RWSEM_GUARDED_BY(lock) RWSEM_THREAD_ANNOTATION(guarded_by(lock))
#define RWSEM_REQUIRES(...) RWSEM_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define RWSEM_ACQUIRE(...) RWSEM_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RWSEM_RELEASE(...) RWSEM_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RWSEM_TRY_ACQUIRE(...) RWSEM_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
// For code the analysis cannot follow (a lock taken in one function and
// released in another on some paths); each use says why.
#define RWSEM_NO_THREAD_SAFETY_ANALYSIS RWSEM_THREAD_ANNOTATION(no_thread_safety_analysis)

#endif  // RWSEM_LIB_INTERNAL_THREAD_ANNOTATIONS_H_
