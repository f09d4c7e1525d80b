/*
 * check.h - CHECK(cond): an invariant that stays on in release builds.
 *
 * assert() is removed by -DNDEBUG (the RelWithDebInfo build defines it);
 * CHECK is not.  A broken invariant in the store, the backend or the
 * member core must stop the process before it writes or acknowledges
 * wrong data.  Never use it on network or disk input: bad input gets an
 * error code (STYLE).  raft and wal keep their own RAFT_ASSERT and
 * WAL_ASSERT with the same meaning.
 */
#ifndef CETCD_UTIL_CHECK_H
#define CETCD_UTIL_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                          \
    do {                                                                     \
        if (__builtin_expect(!(cond), 0)) {                                  \
            fprintf(stderr, "%s:%d: %s: invariant failed: %s\n", __FILE__,   \
                    __LINE__, __func__, #cond);                              \
            abort();                                                         \
        }                                                                    \
    } while (0)

#endif
