/* Helpers shared by the runtime's test programs: a ctx on the device CLTRAIN_DEVICE selects
 * (created inside each test, never in main(): check forks, and a forked child of a process
 * that used PoCL hangs), a seeded generator whose seed is fixed per test (a hash of the test's
 * name, varied with CLTRAIN_TEST_SEED), the tolerance check, poisoning and the check that
 * no library object outlives a test. */
#ifndef CLTRAIN_TESTS_COMMON_H
#define CLTRAIN_TESTS_COMMON_H

#include "cltrain/alloc.h"
#include "cltrain/device.h"
#include "cltrain/opencl.h"
#include "ops/ops_internal.h"
#include "cltrain/tensor.h"
#include "runtime/half_internal.h"
#include "runtime/internal.h"
#include "runtime/program_internal.h"

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A ctx with default params on $CLTRAIN_DEVICE (or auto); fails the test if it cannot. */
clt_ctx *tc_ctx(void);
/* The same with the given params (params->device NULL: $CLTRAIN_DEVICE or auto). */
clt_ctx *tc_ctx_with(const struct clt_ctx_params *p);

/* Fails the test unless every live-object counter is zero. Call after freeing everything. */
void tc_assert_no_live(void);

/* splitmix64: small, seedable, the same on every machine. */
typedef struct tc_rng {
    uint64_t state;
    uint64_t seed;
} tc_rng;
/* Seed = FNV-1a of `name` (pass __func__), started from $CLTRAIN_TEST_SEED when set. */
tc_rng tc_rng_for(const char *name);
uint64_t tc_u64(tc_rng *r);
uint32_t tc_u32(tc_rng *r);
double tc_uniform(tc_rng *r, double lo, double hi); /* [lo, hi) */
/* Random non-zero values: sign random, magnitude uniform in [lo, hi), 0 < lo < hi. */
void tc_fill_nonzero(tc_rng *r, float *x, size_t n, float lo, float hi);
void tc_fill_bytes(tc_rng *r, void *dst, size_t n);

/* Fails the test at the first element with |got - ref| > atol + rtol * |ref|, naming `what`,
 * the index, both values and the seed. NaN in got never passes. */
void tc_check_close(const float *got, const double *ref, size_t n, double atol, double rtol,
                    const char *what, uint64_t seed);

/* Overwrites all of t's elements (blocking) with 0xff bytes: a NaN in f32/f16/bf16, -1 in i32,
 * 255 in u8. Uses a plain write, not an op, so it does not depend on the code under test. */
void tc_poison(clt_tensor *t);

/* Blocking helpers that fail the test with the ctx's message. */
void tc_write(clt_tensor *t, const void *src);
void tc_read(const clt_tensor *t, void *dst);
clt_tensor *tc_tensor(clt_ctx *ctx, clt_dtype dtype, size_t n);

/* Asserts that a status is CLT_OK, printing the call, the status name and the ctx's message. */
#define TC_OK(ctx, expr)                                                                           \
    do {                                                                                           \
        clt_status tc_st_ = (expr);                                                                \
        ck_assert_msg(tc_st_ == CLT_OK, "%s -> %s: %s", #expr, clt_status_name(tc_st_),            \
                      clt_ctx_errmsg(ctx));                                                        \
    } while (0)

/* Whether `hay` contains `needle`. */
bool tc_contains(const char *hay, const char *needle);

/* A fresh empty directory under $TMPDIR (or /tmp); tc_rmdir removes it and its files
 * (one level deep). */
void tc_mkdtemp(char *dst, size_t n);
void tc_rmdir(const char *dir);
/* The number of regular files in dir; the first one's path in first (if not NULL). */
int tc_count_files(const char *dir, char *first, size_t n);

/* A test case with a 300 s timeout per test (check's default of 4 s is shorter than a first
 * PoCL compile), unless CK_DEFAULT_TIMEOUT is set in the environment. */
TCase *tc_tcase(const char *name);

/* meson's exit code for a test that checked nothing: reported as SKIP, never as a pass. */
#define TC_EXIT_SKIP 77

/* Says on stdout that the case `name` is not registered in this run, and why (a test left out
 * must be visible, not counted as a pass). */
void tc_skip_case(const char *name, const char *why);

/* Runs a suite (CK_VERBOSITY=verbose lists every test) and returns the process exit code: 0
 * only when every test passed, TC_EXIT_SKIP when no test ran at all (every case left out, or
 * CK_RUN_CASE naming none). Every test program's main() ends with it. */
int tc_run(Suite *s);

#endif
