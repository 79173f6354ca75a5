/* Tests of the ctx and the program module on a real device: ctx create/free and the
 * live-object counters, a bad selector or CLTRAIN_GEMM, the in-memory program cache, the on-disk
 * binary cache (hits, corrupt files rejected and rewritten, a FIFO, directory or huge sparse file
 * at a cache path a bounded miss, off switch), build failures carrying the compiler's log
 * (CLTRAIN_KERNEL_DIR at tests/broken), missing sources, counted host waits, kernel-argument
 * failures naming the kernel and the index, and the kernel slots. */
#include "common.h"
#include "ops/family_internal.h"
#include "runtime/program_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>

/* Options of the f32 elementwise program, as clt_op_fill builds it, so that a program built
 * here is the one the op then uses (and the op proves the cached binary runs). */
#define EW_F32 "-DX_DTYPE=0"

/* A ctx with its disk cache in `dir` (NULL: off). */
static clt_ctx *ctx_cached(const char *dir)
{
    struct clt_ctx_params p = clt_ctx_default_params();
    p.cache_dir = dir;
    p.disk_cache = dir ? 1 : 0;
    return tc_ctx_with(&p);
}

/* Fills a small f32 tensor through the elementwise program and checks the values: proves that
 * whatever program the ctx holds (compiled or loaded from disk) runs correctly. */
static void check_fill_works(clt_ctx *ctx)
{
    enum { N = 17 };
    float back[N];
    clt_tensor *t = tc_tensor(ctx, CLT_DTYPE_F32, N);
    tc_poison(t);
    TC_OK(ctx, clt_op_fill(t, 2.5f));
    tc_read(t, back);
    for (int i = 0; i < N; i++)
        ck_assert_msg(back[i] == 2.5f, "element %d: %g", i, back[i]);
    clt_tensor_free(t);
}

static struct clt_ctx_stats stats_of(clt_ctx *ctx)
{
    return clt_ctx_stats(ctx);
}

START_TEST(test_ctx_lifecycle)
{
    clt_ctx *ctx = tc_ctx();
    struct clt__live_objects o = clt__live_objects();
    ck_assert_int_eq(o.ctxs, 1);
    ck_assert_int_eq(o.tensors + o.buffers + o.pinned + o.programs, 0);
    const clt_device_info *d = clt_ctx_device(ctx);
    ck_assert_ptr_nonnull(d);
    ck_assert_uint_gt(strlen(d->device_name), 0);
    ck_assert_uint_gt(d->compute_units, 0);
    ck_assert_uint_gt(d->global_mem, 0);
    ck_assert_uint_gt(d->max_work_group, 0);
    ck_assert_ptr_nonnull(clt_ctx_cl_context(ctx));
    ck_assert_ptr_nonnull(clt_ctx_compute_queue(ctx));
    ck_assert_ptr_nonnull(clt_ctx_transfer_queue(ctx));
    ck_assert(clt_ctx_compute_queue(ctx) != clt_ctx_transfer_queue(ctx));
    ck_assert(!clt_ctx_profiling(ctx));
    ck_assert_str_eq(clt_ctx_errmsg(ctx), "");
    struct clt_ctx_stats s = stats_of(ctx);
    ck_assert_int_eq(s.compiles + s.disk_cache_hits + s.disk_cache_rejects, 0);
    ck_assert_int_eq(s.host_waits_total, 0);

    /* Two ctxs at once are independent. */
    struct clt_ctx_params p = clt_ctx_default_params();
    p.profiling = true;
    clt_ctx *ctx2 = tc_ctx_with(&p);
    ck_assert(clt_ctx_profiling(ctx2));
    ck_assert_int_eq(clt__live_objects().ctxs, 2);
    clt_ctx_free(ctx2);
    ck_assert_int_eq(clt__live_objects().ctxs, 1);
    clt_ctx_free(ctx);
    clt_ctx_free(NULL); /* accepted */
    tc_assert_no_live();
}
END_TEST

START_TEST(test_no_device)
{
    struct clt_ctx_params p = clt_ctx_default_params();
    p.device = "nosuchdevice";
    clt_ctx *ctx = (clt_ctx *)&p; /* must be overwritten with NULL */
    clt_status st = clt_ctx_create(&ctx, &p);
    ck_assert_int_eq(st, CLT_ERR_NO_DEVICE);
    ck_assert_ptr_null(ctx);
    const char *msg = clt_last_errmsg();
    ck_assert_msg(tc_contains(msg, "nosuchdevice"), "names the selector: %s", msg);
    ck_assert_msg(tc_contains(msg, "found"), "lists what was found: %s", msg);
    tc_assert_no_live();

    /* The same through $CLTRAIN_DEVICE when params name no device. */
    const char *was = getenv("CLTRAIN_DEVICE");
    char *saved = was ? strdup(was) : NULL; /* restored: with CK_FORK=no later tests run here */
    setenv("CLTRAIN_DEVICE", "nosuchdevice", 1);
    ctx = NULL;
    st = clt_ctx_create(&ctx, NULL);
    if (saved) setenv("CLTRAIN_DEVICE", saved, 1);
    else unsetenv("CLTRAIN_DEVICE");
    free(saved);
    ck_assert_int_eq(st, CLT_ERR_NO_DEVICE);
    ck_assert_ptr_null(ctx);
    tc_assert_no_live();

    /* An index past the end. */
    p.device = "9";
    st = clt_ctx_create(&ctx, &p);
    ck_assert_int_eq(st, CLT_ERR_NO_DEVICE);
    tc_assert_no_live();
}
END_TEST

/* A bad CLTRAIN_GEMM fails the ctx's creation, naming the variable, the value and what is
 * expected; the accepted values pass in any case, and empty means unset. */
START_TEST(test_bad_env_choice)
{
    const char *bad[] = {"fastest", "own ", "clblas", "0"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        setenv("CLTRAIN_GEMM", bad[i], 1);
        clt_ctx *ctx = (clt_ctx *)bad; /* must be overwritten with NULL */
        clt_status st = clt_ctx_create(&ctx, NULL);
        const char *msg = clt_last_errmsg();
        ck_assert_msg(st == CLT_ERR_INVALID_ARG, "CLTRAIN_GEMM=%s: %s", bad[i],
                      clt_status_name(st));
        ck_assert_ptr_null(ctx);
        char want[64];
        snprintf(want, sizeof want, "CLTRAIN_GEMM=\"%s\"", bad[i]);
        ck_assert_msg(tc_contains(msg, want), "names the variable and the value: %s", msg);
        ck_assert_msg(tc_contains(msg, "expected own, clblast or auto"), "%s", msg);
        tc_assert_no_live();
    }
    const char *good[] = {"own", "CLBlast", "auto", ""};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        setenv("CLTRAIN_GEMM", good[i], 1);
        clt_ctx *ctx = tc_ctx();
        clt_ctx_free(ctx);
    }
    unsetenv("CLTRAIN_GEMM");
    tc_assert_no_live();
}
END_TEST

START_TEST(test_build_twice_compiles_once)
{
    clt_ctx *ctx = ctx_cached(NULL);
    ck_assert_ptr_null(clt_ctx_cache_dir(ctx));
    TC_OK(ctx, clt_program_build(ctx, "elementwise", EW_F32));
    TC_OK(ctx, clt_program_build(ctx, "elementwise", EW_F32));
    struct clt_ctx_stats s = stats_of(ctx);
    ck_assert_int_eq(s.compiles, 1);
    ck_assert_int_eq(s.disk_cache_hits, 0);
    ck_assert_int_eq(clt__live_objects().programs, 1);
    /* The op finds the same program: still one compile. */
    check_fill_works(ctx);
    ck_assert_int_eq(stats_of(ctx).compiles, 1);
    ck_assert_int_eq(clt__live_objects().programs, 1);
    /* Other options are another program. */
    TC_OK(ctx, clt_program_build(ctx, "elementwise", "-DX_DTYPE=1"));
    ck_assert_int_eq(stats_of(ctx).compiles, 2);
    ck_assert_int_eq(clt__live_objects().programs, 2);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_sources_embedded)
{
    size_t len = 0;
    const char *src = clt_program_source("elementwise", &len);
    ck_assert_ptr_nonnull(src);
    ck_assert_uint_eq(strlen(src), len);
    ck_assert(tc_contains(src, "kernel void axpy"));
    ck_assert_ptr_nonnull(clt_program_source("common", NULL));
    ck_assert_ptr_nonnull(clt_program_source("cast", NULL));
    len = 12345;
    ck_assert_ptr_null(clt_program_source("nosuchstem", &len));
    ck_assert_uint_eq(len, 12345); /* untouched when there is no such file */
}
END_TEST

START_TEST(test_disk_cache_hit)
{
    char dir[512];
    tc_mkdtemp(dir, sizeof dir);
    clt_ctx *a = ctx_cached(dir);
    ck_assert_str_eq(clt_ctx_cache_dir(a), dir);
    TC_OK(a, clt_program_build(a, "elementwise", EW_F32));
    struct clt_ctx_stats s = stats_of(a);
    ck_assert_int_eq(s.compiles, 1);
    ck_assert_int_eq(s.disk_cache_hits, 0);
    ck_assert_int_eq(s.disk_cache_rejects, 0);
    clt_ctx_free(a);
    /* Exactly one file: the binary, and no temporary left behind. */
    char file[4096];
    ck_assert_int_eq(tc_count_files(dir, file, sizeof file), 1);
    ck_assert_msg(tc_contains(file, ".clbin") && !tc_contains(file, ".tmp"), "%s", file);

    clt_ctx *b = ctx_cached(dir);
    TC_OK(b, clt_program_build(b, "elementwise", EW_F32));
    s = stats_of(b);
    ck_assert_int_eq(s.compiles, 0);
    ck_assert_int_eq(s.disk_cache_hits, 1);
    ck_assert_int_eq(s.disk_cache_rejects, 0);
    check_fill_works(b); /* the loaded binary runs */
    ck_assert_int_eq(stats_of(b).compiles, 0);
    clt_ctx_free(b);
    ck_assert_int_eq(tc_count_files(dir, NULL, 0), 1);
    tc_rmdir(dir);
    tc_assert_no_live();
}
END_TEST

static long file_size(const char *path)
{
    struct stat sb;
    ck_assert_msg(stat(path, &sb) == 0, "stat %s", path);
    return (long)sb.st_size;
}

static unsigned char *slurp(const char *path, long *n)
{
    *n = file_size(path);
    unsigned char *d = malloc((size_t)*n);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(d);
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fread(d, 1, (size_t)*n, f), (size_t)*n);
    fclose(f);
    return d;
}

static void spill(const char *path, const unsigned char *d, long n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(d, 1, (size_t)n, f), (size_t)n);
    ck_assert_int_eq(fclose(f), 0);
}

enum corruption { TRUNCATE_HALF, TRUNCATE_HEADER, FLIP_MIDDLE, GARBAGE, CORRUPTION_COUNT };
static const char *corruption_name[] = {"truncated to half", "truncated inside the header",
                                        "bytes overwritten in the middle",
                                        "garbage of the right size"};

START_TEST(test_disk_cache_corrupt)
{
    tc_rng rng = tc_rng_for(__func__);
    char dir[512], file[4096];
    tc_mkdtemp(dir, sizeof dir);
    clt_ctx *ctx = ctx_cached(dir);
    TC_OK(ctx, clt_program_build(ctx, "elementwise", EW_F32));
    clt_ctx_free(ctx);
    ck_assert_int_eq(tc_count_files(dir, file, sizeof file), 1);
    long good_n = 0;
    unsigned char *good = slurp(file, &good_n);
    ck_assert_int_gt(good_n, 64);

    for (int c = 0; c < CORRUPTION_COUNT; c++) {
        long n = good_n;
        unsigned char *bad = malloc((size_t)n);
        ck_assert_ptr_nonnull(bad);
        memcpy(bad, good, (size_t)n);
        switch ((enum corruption)c) {
        case TRUNCATE_HALF:
            n /= 2;
            break;
        case TRUNCATE_HEADER:
            n = 10;
            break;
        case FLIP_MIDDLE:
            for (long i = n / 2; i < n / 2 + 16; i++)
                bad[i] ^= 0x5a;
            break;
        case GARBAGE:
            tc_fill_bytes(&rng, bad, (size_t)n);
            break;
        case CORRUPTION_COUNT:
            break;
        }
        spill(file, bad, n);
        free(bad);

        ctx = ctx_cached(dir);
        TC_OK(ctx, clt_program_build(ctx, "elementwise", EW_F32));
        struct clt_ctx_stats s = stats_of(ctx);
        ck_assert_msg(s.compiles == 1 && s.disk_cache_hits == 0 && s.disk_cache_rejects >= 1,
                      "%s: compiles %ld, hits %ld, rejects %ld", corruption_name[c], s.compiles,
                      s.disk_cache_hits, s.disk_cache_rejects);
        check_fill_works(ctx);
        clt_ctx_free(ctx);

        /* Rewritten valid: the next ctx loads it. (Not necessarily byte-identical to the first
         * file: PoCL's binaries also carry the kernels it has specialised so far.) */
        ck_assert_int_eq(tc_count_files(dir, NULL, 0), 1);
        ck_assert_int_ge(file_size(file), 64);
        ctx = ctx_cached(dir);
        TC_OK(ctx, clt_program_build(ctx, "elementwise", EW_F32));
        s = stats_of(ctx);
        ck_assert_msg(s.compiles == 0 && s.disk_cache_hits == 1 && s.disk_cache_rejects == 0,
                      "after %s: compiles %ld, hits %ld, rejects %ld", corruption_name[c],
                      s.compiles, s.disk_cache_hits, s.disk_cache_rejects);
        check_fill_works(ctx);
        clt_ctx_free(ctx);
    }
    free(good);
    tc_rmdir(dir);
    tc_assert_no_live();
}
END_TEST

/* What sits at a cache file's path instead of a binary. */
enum squatter { SQUAT_FIFO, SQUAT_DIR, SQUAT_SPARSE, SQUAT_COUNT };
static const char *squatter_name[] = {"a FIFO", "a directory", "a 1 GiB sparse file"};

static long max_rss_kib(void)
{
    struct rusage ru;
    ck_assert_int_eq(getrusage(RUSAGE_SELF, &ru), 0);
    return ru.ru_maxrss;
}

/* Something that is not a sane cache file at a cache path is a miss, never read: a FIFO is not
 * opened for a blocking read (it hung the build forever), a directory is not read (an ASan
 * abort, allocation-size-too-big, via ftell), a huge sparse file is not read whole (3 GB RSS).
 * The build compiles and works; a FIFO or a big file is replaced by a valid binary. alarm()
 * bounds the time: a hang fails the test in 120 s rather than at the tcase timeout. */
START_TEST(test_disk_cache_not_a_file)
{
    char dir[512], file[4096];
    tc_mkdtemp(dir, sizeof dir);
    clt_ctx *ctx = ctx_cached(dir);
    TC_OK(ctx, clt_program_build(ctx, "elementwise", EW_F32));
    clt_ctx_free(ctx);
    ck_assert_int_eq(tc_count_files(dir, file, sizeof file), 1);
    for (int c = 0; c < SQUAT_COUNT; c++) {
        ck_assert_int_eq(remove(file), 0);
        switch ((enum squatter)c) {
        case SQUAT_FIFO:
            ck_assert_int_eq(mkfifo(file, 0600), 0);
            break;
        case SQUAT_DIR:
            ck_assert_int_eq(mkdir(file, 0700), 0);
            break;
        case SQUAT_SPARSE: {
            FILE *f = fopen(file, "wb");
            ck_assert_ptr_nonnull(f);
            ck_assert_int_eq(ftruncate(fileno(f), (off_t)1 << 30), 0);
            ck_assert_int_eq(fclose(f), 0);
            break;
        }
        case SQUAT_COUNT:
            break;
        }
        long rss_before = max_rss_kib();
        alarm(120);
        ctx = ctx_cached(dir);
        TC_OK(ctx, clt_program_build(ctx, "elementwise", EW_F32));
        struct clt_ctx_stats s = stats_of(ctx);
        ck_assert_msg(s.compiles == 1 && s.disk_cache_hits == 0 && s.disk_cache_rejects == 1,
                      "%s: compiles %ld, hits %ld, rejects %ld", squatter_name[c], s.compiles,
                      s.disk_cache_hits, s.disk_cache_rejects);
        check_fill_works(ctx);
        clt_ctx_free(ctx);
        alarm(0);
        long grew = max_rss_kib() - rss_before;
        ck_assert_msg(grew < 256 * 1024, "%s: peak RSS grew by %ld KiB", squatter_name[c], grew);

        struct stat sb;
        ck_assert_int_eq(stat(file, &sb), 0);
        if (c == SQUAT_DIR) {
            ck_assert(S_ISDIR(sb.st_mode)); /* left alone; the build just works */
            ck_assert_int_eq(rmdir(file), 0);
            ctx = ctx_cached(dir); /* writes the binary again for the next case */
            TC_OK(ctx, clt_program_build(ctx, "elementwise", EW_F32));
            clt_ctx_free(ctx);
            continue;
        }
        /* Replaced by a valid binary: the next ctx loads it. */
        ck_assert_msg(S_ISREG(sb.st_mode) && sb.st_size < ((off_t)1 << 30), "%s not replaced",
                      squatter_name[c]);
        ctx = ctx_cached(dir);
        TC_OK(ctx, clt_program_build(ctx, "elementwise", EW_F32));
        s = stats_of(ctx);
        ck_assert_msg(s.compiles == 0 && s.disk_cache_hits == 1,
                      "after %s: compiles %ld, hits %ld", squatter_name[c], s.compiles,
                      s.disk_cache_hits);
        clt_ctx_free(ctx);
    }
    ck_assert_int_eq(tc_count_files(dir, NULL, 0), 1);
    tc_rmdir(dir);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_disk_cache_off)
{
    char dir[512];
    tc_mkdtemp(dir, sizeof dir);
    /* disk_cache = 0 with a folder given: nothing written. */
    struct clt_ctx_params p = clt_ctx_default_params();
    p.cache_dir = dir;
    p.disk_cache = 0;
    clt_ctx *ctx = tc_ctx_with(&p);
    ck_assert_ptr_null(clt_ctx_cache_dir(ctx));
    TC_OK(ctx, clt_program_build(ctx, "elementwise", EW_F32));
    ck_assert_int_eq(stats_of(ctx).compiles, 1);
    clt_ctx_free(ctx);
    ck_assert_int_eq(tc_count_files(dir, NULL, 0), 0);

    /* disk_cache = -1 follows CLTRAIN_CACHE=0. */
    setenv("CLTRAIN_CACHE", "0", 1);
    p.disk_cache = -1;
    ctx = tc_ctx_with(&p);
    unsetenv("CLTRAIN_CACHE");
    ck_assert_ptr_null(clt_ctx_cache_dir(ctx));
    TC_OK(ctx, clt_program_build(ctx, "elementwise", EW_F32));
    clt_ctx_free(ctx);
    ck_assert_int_eq(tc_count_files(dir, NULL, 0), 0);

    /* ...and without it, is on, in the folder given (over $CLTRAIN_CACHE_DIR). */
    ctx = tc_ctx_with(&p);
    ck_assert_ptr_nonnull(clt_ctx_cache_dir(ctx));
    ck_assert_str_eq(clt_ctx_cache_dir(ctx), dir);
    TC_OK(ctx, clt_program_build(ctx, "elementwise", EW_F32));
    clt_ctx_free(ctx);
    ck_assert_int_eq(tc_count_files(dir, NULL, 0), 1);

    /* $CLTRAIN_CACHE_DIR when params give no folder. */
    const char *env = getenv("CLTRAIN_CACHE_DIR");
    char dir2[512], *saved = env ? strdup(env) : NULL;
    tc_mkdtemp(dir2, sizeof dir2);
    setenv("CLTRAIN_CACHE_DIR", dir2, 1);
    p.cache_dir = NULL;
    ctx = tc_ctx_with(&p);
    if (saved)
        setenv("CLTRAIN_CACHE_DIR", saved, 1); /* for CK_FORK=no runs */
    else
        unsetenv("CLTRAIN_CACHE_DIR");
    free(saved);
    ck_assert_str_eq(clt_ctx_cache_dir(ctx), dir2);
    clt_ctx_free(ctx);
    tc_rmdir(dir2);
    tc_rmdir(dir);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_build_failure_log)
{
    const char *dir = getenv("CLTRAIN_TESTS_DIR");
    ck_assert_msg(dir && *dir, "CLTRAIN_TESTS_DIR is not set (run through meson test)");
    char broken[4096];
    snprintf(broken, sizeof broken, "%s/broken", dir);
    ck_assert_msg(access(broken, R_OK) == 0, "no folder %s", broken);
    setenv("CLTRAIN_KERNEL_DIR", broken, 1);

    clt_ctx *ctx = ctx_cached(NULL);
    clt_status st = clt_program_build(ctx, "elementwise", EW_F32);
    const char *msg = clt_ctx_errmsg(ctx);
    ck_assert_msg(st == CLT_ERR_BUILD, "got %s: %s", clt_status_name(st), msg);
    ck_assert_msg(tc_contains(msg, "clt_no_such_symbol"), "the compiler's log: %s", msg);
    ck_assert_msg(tc_contains(msg, "elementwise"), "names the program: %s", msg);
    ck_assert_msg(tc_contains(msg, "CL_BUILD_PROGRAM_FAILURE"), "names the code: %s", msg);
    ck_assert_str_eq(clt_last_errmsg(), msg);
    ck_assert_int_eq(clt__live_objects().programs, 0);
    /* An op that needs the program fails the same way and leaves no kernel behind. */
    clt_tensor *t = tc_tensor(ctx, CLT_DTYPE_F32, 4);
    ck_assert_int_eq(clt_op_fill(t, 1.0f), CLT_ERR_BUILD);

    /* Programs whose files are not in the folder still come from the embedded copies. */
    TC_OK(ctx, clt_program_build(ctx, "cast", NULL));

    /* Back to the embedded source: the same ctx now builds it. */
    unsetenv("CLTRAIN_KERNEL_DIR");
    TC_OK(ctx, clt_program_build(ctx, "elementwise", EW_F32));
    check_fill_works(ctx);
    clt_tensor_free(t);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_missing_stem)
{
    clt_ctx *ctx = ctx_cached(NULL);
    clt_status st = clt_program_build(ctx, "nosuchstem", NULL);
    ck_assert_msg(st == CLT_ERR_IO, "got %s", clt_status_name(st));
    ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), "nosuchstem"), "%s", clt_ctx_errmsg(ctx));
    st = clt_program_build(ctx, "elementwise,nosuchstem", NULL);
    ck_assert_msg(st == CLT_ERR_IO, "got %s", clt_status_name(st));
    st = clt_program_build(ctx, "elementwise,,cast", NULL);
    ck_assert_msg(st == CLT_ERR_INVALID_ARG, "got %s", clt_status_name(st));
    ck_assert_int_eq(stats_of(ctx).compiles, 0);
    ck_assert_int_eq(clt__live_objects().programs, 0);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_host_waits)
{
    clt_ctx *ctx = ctx_cached(NULL);
    TC_OK(ctx, clt_ctx_finish(ctx, CLT_WAIT_LOG));
    TC_OK(ctx, clt_ctx_finish(ctx, CLT_WAIT_LOG));
    TC_OK(ctx, clt_ctx_finish(ctx, CLT_WAIT_TIMING));
    TC_OK(ctx, clt_ctx_wait(ctx, CLT_WAIT_EVAL, 0, NULL)); /* nothing to wait for: not counted */
    struct clt_ctx_stats s = stats_of(ctx);
    ck_assert_int_eq(s.host_waits[CLT_WAIT_LOG], 2);
    ck_assert_int_eq(s.host_waits[CLT_WAIT_TIMING], 1);
    ck_assert_int_eq(s.host_waits[CLT_WAIT_EVAL], 0);
    ck_assert_int_eq(s.host_waits_total, 3);

    /* A blocking read counts as READ; a non-blocking one counts only when waited for. */
    float v[8] = {0};
    clt_tensor *t = tc_tensor(ctx, CLT_DTYPE_F32, 8);
    tc_read(t, v);
    s = stats_of(ctx);
    ck_assert_int_eq(s.host_waits[CLT_WAIT_READ], 1);
    ck_assert_int_eq(s.host_waits_total, 4);
    cl_event ev = NULL;
    TC_OK(ctx, clt_tensor_read(t, v, false, &ev));
    ck_assert_ptr_nonnull(ev);
    ck_assert_int_eq(stats_of(ctx).host_waits_total, 4);
    TC_OK(ctx, clt_ctx_wait(ctx, CLT_WAIT_EVAL, 1, &ev));
    clReleaseEvent(ev);
    s = stats_of(ctx);
    ck_assert_int_eq(s.host_waits[CLT_WAIT_EVAL], 1);
    ck_assert_int_eq(s.host_waits[CLT_WAIT_READ], 1);
    ck_assert_int_eq(s.host_waits_total, 5);
    long sum = 0;
    for (int r = 0; r < CLT_WAIT__COUNT; r++)
        sum += s.host_waits[r];
    ck_assert_int_eq(sum, s.host_waits_total);
    clt_tensor_free(t);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST
/* A wrong argument size on a real kernel: the message names the kernel, the index and the
 * size; the slot the op fills holds the same handle; the kernel still runs afterwards. */
START_TEST(test_kernel_arg_failure)
{
    clt_ctx *ctx = ctx_cached(NULL);
    cl_kernel k = NULL;
    TC_OK(ctx, clt__kernel(ctx, "elementwise", EW_F32, "fill", &k));
    cl_mem mem = NULL;
    cl_ulong off = 0, n = 1;
    double value = 1.0; /* the kernel's argument 3 is a 4-byte float */
    ck_assert_int_eq(CLT__ARGS(ctx, k, CLT__ARG(mem), CLT__ARG(off), CLT__ARG(n)), CLT_OK);
    clt_status st = CLT__ARGS_AT(ctx, k, 3, CLT__ARG(value));
    ck_assert_int_eq(st, CLT_ERR_OPENCL);
    const char *msg = clt_ctx_errmsg(ctx);
    ck_assert_msg(strstr(msg, "kernel fill: clSetKernelArg(3, 8 bytes): CL_INVALID_ARG_SIZE (-51)"),
                  "message: %s", msg);
    /* The op's slot (fill's slots come first, by dtype): empty before its first use, then this
     * kernel, and stable. */
    cl_kernel *slot = NULL, *again = NULL, *f16 = NULL;
    TC_OK(ctx, clt__op_slot(ctx, CLT__OPF_elementwise, CLT_DTYPE_F32, &slot));
    ck_assert_ptr_null(*slot);
    check_fill_works(ctx);
    ck_assert_ptr_eq(*slot, k);
    TC_OK(ctx, clt__op_slot(ctx, CLT__OPF_elementwise, CLT_DTYPE_F32, &again));
    ck_assert_ptr_eq(again, slot);
    TC_OK(ctx, clt__op_slot(ctx, CLT__OPF_elementwise, CLT_DTYPE_F16, &f16));
    ck_assert_ptr_null(*f16);
    check_fill_works(ctx);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("runtime");
    TCase *tc = tc_tcase("ctx");
    tcase_add_test(tc, test_ctx_lifecycle);
    tcase_add_test(tc, test_no_device);
    tcase_add_test(tc, test_bad_env_choice);
    tcase_add_test(tc, test_host_waits);
    suite_add_tcase(s, tc);
    TCase *prog = tc_tcase("program");
    tcase_add_test(prog, test_sources_embedded);
    tcase_add_test(prog, test_build_twice_compiles_once);
    tcase_add_test(prog, test_disk_cache_hit);
    tcase_add_test(prog, test_disk_cache_corrupt);
    tcase_add_test(prog, test_disk_cache_not_a_file);
    tcase_add_test(prog, test_disk_cache_off);
    tcase_add_test(prog, test_build_failure_log);
    tcase_add_test(prog, test_missing_stem);
    tcase_add_test(prog, test_kernel_arg_failure);
    suite_add_tcase(s, prog);
    return tc_run(s);
}
