#pragma once
// Always-on invariant checks. A failed check means uroce itself is wrong (never bad input, which
// gets an error code): it prints where and aborts, because continuing could corrupt user memory.
#include <cstdio>
#include <cstdlib>

#define UROCE_CHECK(cond)                                                              \
  do {                                                                                 \
    if (__builtin_expect(!(cond), 0)) {                                                \
      std::fprintf(stderr, "uroce: check failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                    \
    }                                                                                  \
  } while (0)

#ifdef NDEBUG
#define UROCE_DCHECK(cond) ((void)0)
#else
#define UROCE_DCHECK(cond) UROCE_CHECK(cond)
#endif
