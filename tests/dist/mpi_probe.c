/* Run under mpirun by mpi_allreduce.sh, one process per rank. With no argument: the MPI
 * communicator's ranks and sizes, exact f32 sums and f64 sums and maxima of rank-dependent
 * values at awkward lengths, bit-identical results on every rank, and slices that tile.
 * "caller-init": MPI initialised by the caller stays initialised after clt_comm_free.
 * "thread-single": a caller's MPI_THREAD_SINGLE is refused. "abort": rank 1 aborts while
 * rank 0 waits in an allreduce; the script checks that mpirun ends, with a failure.
 * Each rank prints "rank R ok" when all its checks passed. */
#include "cltrain/dist.h"
#include "cltrain/errors.h"
#include "dist/comm_internal.h"

#include <mpi.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int world_rank = -1;

/* Prints the failure and ends every rank: a rank left waiting in a collective would hang. */
static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "rank %d: FAIL: ", world_rank);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    fflush(stderr);
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin) MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) fail(__VA_ARGS__);                                                            \
    } while (0)
#define CHECK_OK(expr)                                                                             \
    do {                                                                                           \
        clt_status st_ = (expr);                                                                   \
        CHECK(st_ == CLT_OK, "%s -> %s: %s", #expr, clt_status_name(st_), clt_last_errmsg());      \
    } while (0)

static uint64_t hash(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* Whether every rank passed the same value. */
static int same_on_all(uint64_t v)
{
    uint64_t lo = v, hi = v;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    return lo == hi;
}

static void check_sums(clt_comm *c)
{
    static const size_t sizes[] = {1, 17, 1000, 65537};
    int rank = clt_comm_rank(c), size = clt_comm_size(c);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        float *f = malloc(n * sizeof *f);
        double *d = malloc(n * sizeof *d), *m = malloc(n * sizeof *m);
        CHECK(f && d && m, "out of memory");
        for (size_t i = 0; i < n; i++) {
            /* small multiples of 1/4: every partial sum is exact, whatever the order */
            f[i] = (float)((rank + 1) * (int)(i % 7 + 1)) * 0.25f;
            d[i] = (double)(rank + 1) * (double)(i % 5) - 3.0;
            /* the maximum is on the last rank for even i, on rank 0 for odd i */
            m[i] = (i % 2 ? -1.0 : 1.0) * (double)rank + (double)i;
        }
        CHECK_OK(clt_comm_allreduce_f32(c, f, n));
        CHECK_OK(clt_comm_allreduce_f64(c, d, n, CLT_REDUCE_SUM));
        CHECK_OK(clt_comm_allreduce_f64(c, m, n, CLT_REDUCE_MAX));
        double ranks = (double)size * (size + 1) / 2; /* sum of rank + 1 */
        for (size_t i = 0; i < n; i++) {
            CHECK(f[i] == (float)(ranks * (double)(i % 7 + 1) * 0.25), "f32 sum [%zu] of %zu: %g",
                  i, n, (double)f[i]);
            CHECK(d[i] == ranks * (double)(i % 5) - 3.0 * size, "f64 sum [%zu] of %zu: %g", i, n,
                  d[i]);
            CHECK(m[i] == (double)i + (i % 2 ? 0.0 : (double)(size - 1)),
                  "f64 max [%zu] of %zu: %g", i, n, m[i]);
        }
        free(f);
        free(d);
        free(m);
    }
    /* inexact sums: every rank must still get the same bits */
    size_t n = 4099;
    float *f = malloc(n * sizeof *f);
    CHECK(f != NULL, "out of memory");
    uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(rank + 1);
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        f[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5) * 1e3f;
    }
    CHECK_OK(clt_comm_allreduce_f32(c, f, n));
    CHECK(same_on_all(hash(0xcbf29ce484222325ull, f, n * sizeof *f)),
          "f32 sums differ between ranks");
    free(f);
    CHECK_OK(clt_comm_allreduce_f32(c, NULL, 0)); /* nothing to sum is no error */
}

static void check_slices(clt_comm *c)
{
    static const size_t sizes[] = {0, 1, 2, 3, 17, 1000};
    int size = clt_comm_size(c);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k], prev = 0;
        for (int r = 0; r < size; r++) {
            size_t b, e;
            clt_comm_slice(c, r, n, &b, &e);
            CHECK(b == prev && e >= b, "slice %d of %zu: [%zu, %zu) after %zu", r, n, b, e, prev);
            /* equal shares: every slice within one of n / size */
            CHECK(e - b == n / (size_t)size || e - b == n / (size_t)size + 1,
                  "slice %d of %zu has %zu items", r, n, e - b);
            if (n == 1000) { /* the slice of max, or one more (a smaller batch's rounding) */
                size_t mx = clt__comm_slice_max(c, r, n);
                CHECK(mx == e - b || mx == e - b + 1, "slice_max %d of %zu: %zu", r, n, mx);
            }
            prev = e;
        }
        CHECK(prev == n, "slices of %zu end at %zu", n, prev);
    }
}

static int run_default(void)
{
    clt_comm *c = NULL;
    CHECK_OK(clt_comm_mpi_create(&c));
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    world_rank = rank;
    CHECK(clt_comm_rank(c) == rank && clt_comm_size(c) == size, "rank %d of %d, MPI: %d of %d",
          clt_comm_rank(c), clt_comm_size(c), rank, size);
    CHECK(strcmp(clt_comm_kind(c), "mpi") == 0, "kind %s", clt_comm_kind(c));
    /* mpirun on one machine: every rank shares it, in rank order */
    CHECK(clt_comm_local_rank(c) == rank && clt_comm_local_size(c) == size, "local %d of %d",
          clt_comm_local_rank(c), clt_comm_local_size(c));
    CHECK(!clt_comm_aborted(c), "aborted");
    check_sums(c);
    check_slices(c);
    clt_comm_free(c); /* finalises MPI: create initialised it */
    int fin = 0;
    MPI_Finalized(&fin);
    CHECK(fin, "MPI not finalised by clt_comm_free");
    printf("rank %d ok\n", rank);
    return 0;
}

static int run_caller_init(void)
{
    int provided;
    MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    clt_comm *c = NULL;
    CHECK_OK(clt_comm_mpi_create(&c));
    float x = 1.0f;
    CHECK_OK(clt_comm_allreduce_f32(c, &x, 1));
    CHECK(x == (float)clt_comm_size(c), "sum %g", (double)x);
    clt_comm_free(c);
    int fin = 0;
    MPI_Finalized(&fin);
    CHECK(!fin, "clt_comm_free finalised the caller's MPI");
    CHECK(MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS, "MPI unusable after clt_comm_free");
    MPI_Finalize();
    printf("rank %d ok\n", world_rank);
    return 0;
}

static int run_thread_single(void)
{
    int provided;
    MPI_Init(NULL, NULL);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_SERIALIZED) {
        clt_comm *c = NULL;
        clt_status st = clt_comm_mpi_create(&c);
        CHECK(st == CLT_ERR_UNSUPPORTED && c == NULL, "create -> %s", clt_status_name(st));
        CHECK(strstr(clt_last_errmsg(), "MPI_THREAD_SERIALIZED") != NULL, "message: %s",
              clt_last_errmsg());
        int fin = 0;
        MPI_Finalized(&fin);
        CHECK(!fin, "a failed create finalised the caller's MPI");
    }
    MPI_Finalize();
    printf("rank %d ok\n", world_rank);
    return 0;
}

static int run_abort(void)
{
    clt_comm *c = NULL;
    CHECK_OK(clt_comm_mpi_create(&c));
    world_rank = clt_comm_rank(c);
    float x = 1.0f;
    CHECK_OK(clt_comm_allreduce_f32(c, &x, 1));
    if (world_rank == 1) {
        /* the caller's line, then the abort. mpirun gives stdout a terminal, which flushes at
         * a newline: without one the text stays buffered unless the abort flushes it. */
        printf("rank 1: failing on purpose");
        clt_comm_abort(c, "failing on purpose");
        fail("clt_comm_abort returned");
    }
    /* the other ranks wait for rank 1, which never comes: MPI_Abort must end them */
    clt_status st = clt_comm_allreduce_f32(c, &x, 1);
    fail("allreduce after rank 1 aborted returned %s", clt_status_name(st));
    return 1;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!*mode) return run_default();
    if (strcmp(mode, "caller-init") == 0) return run_caller_init();
    if (strcmp(mode, "thread-single") == 0) return run_thread_single();
    if (strcmp(mode, "abort") == 0) return run_abort();
    fprintf(stderr, "usage: mpi_probe [caller-init | thread-single | abort]\n");
    return 2;
}
