/* CLTRAIN_TEST_SMALL=1 shrinks the test programs' largest shapes for slow devices: oclgrind
 * (tools/oclgrind.sh), an interpreter that checks every work-item's memory accesses, runs about
 * 1000x slower than PoCL. The awkward sizes stay (1, 17, sizes that are no multiple of any
 * work-group, vector width or tile, and that span more than one work-group, tile or slice);
 * only the sizes that make a program slow get smaller. Header-only (static inline), so that a
 * test program includes it beside common.h. */
#ifndef CLTRAIN_TESTS_SMALL_H
#define CLTRAIN_TESTS_SMALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Whether CLTRAIN_TEST_SMALL is set to anything but "" or "0". */
static inline bool tc_small(void)
{
    const char *env = getenv("CLTRAIN_TEST_SMALL");
    return env && *env && strcmp(env, "0") != 0;
}

/* `full`, or `small` under CLTRAIN_TEST_SMALL. */
static inline size_t tc_size(size_t full, size_t small)
{
    return tc_small() ? small : full;
}

/* One of two arrays of the same length (of sizes, shapes, ...): `full`, or `small` under
 * CLTRAIN_TEST_SMALL. A compile-time check makes a length mismatch an error, so the loops over
 * either keep their counts. */
#define TC_SMALL_OR(full, small)                                                                   \
    ((void)sizeof(char[sizeof(full) == sizeof(small) ? 1 : -1]), tc_small() ? (small) : (full))

#endif
