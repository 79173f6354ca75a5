/* Helpers shared by the runtime's test programs (see common.h): ctx creation inside a test,
 * per-test seeds, the tolerance check, poisoning, temporary folders and the suite runner. */
#include "common.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

clt_ctx *tc_ctx_with(const struct clt_ctx_params *p)
{
    clt_ctx *ctx = NULL;
    clt_status st = clt_ctx_create(&ctx, p);
    ck_assert_msg(st == CLT_OK, "clt_ctx_create(device \"%s\") -> %s: %s",
                  p && p->device ? p->device : clt_device_default_selector(), clt_status_name(st),
                  clt_last_errmsg());
    ck_assert_ptr_nonnull(ctx);
    return ctx;
}

clt_ctx *tc_ctx(void)
{
    struct clt_ctx_params p = clt_ctx_default_params();
    return tc_ctx_with(&p);
}

void tc_assert_no_live(void)
{
    struct clt__live_objects o = clt__live_objects();
    ck_assert_msg(o.ctxs == 0 && o.buffers == 0 && o.tensors == 0 && o.pinned == 0 &&
                      o.programs == 0,
                  "live objects left: ctxs %ld, buffers %ld, tensors %ld, pinned %ld, programs %ld",
                  o.ctxs, o.buffers, o.tensors, o.pinned, o.programs);
}

tc_rng tc_rng_for(const char *name)
{
    tc_rng r;
    const char *env = getenv("CLTRAIN_TEST_SEED");
    uint64_t h = 0xcbf29ce484222325ull;
    if (env && *env) h ^= strtoull(env, NULL, 0); /* another seed for every test */
    for (const char *p = name; *p; p++) {
        h ^= (unsigned char)*p;
        h *= 0x100000001b3ull;
    }
    r.seed = h;
    r.state = h;
    return r;
}

uint64_t tc_u64(tc_rng *r)
{
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint32_t tc_u32(tc_rng *r)
{
    return (uint32_t)(tc_u64(r) >> 32);
}

double tc_uniform(tc_rng *r, double lo, double hi)
{
    return lo + (hi - lo) * ((double)(tc_u64(r) >> 11) * 0x1.0p-53);
}

void tc_fill_nonzero(tc_rng *r, float *x, size_t n, float lo, float hi)
{
    ck_assert(lo > 0.0f && hi > lo);
    for (size_t i = 0; i < n; i++) {
        float v = (float)tc_uniform(r, lo, hi);
        if (v < lo) v = lo; /* rounding to float may land just below lo */
        x[i] = (tc_u64(r) & 1) ? -v : v;
    }
}

void tc_fill_bytes(tc_rng *r, void *dst, size_t n)
{
    unsigned char *d = dst;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = tc_u64(r);
        size_t k = n - i < 8 ? n - i : 8;
        memcpy(d + i, &v, k);
    }
}

void tc_check_close(const float *got, const double *ref, size_t n, double atol, double rtol,
                    const char *what, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        double g = got[i], tol = atol + rtol * fabs(ref[i]);
        /* written so that a NaN in got fails */
        if (!(fabs(g - ref[i]) <= tol))
            ck_abort_msg("%s: element %zu of %zu: got %.9g, reference %.9g (|diff| %.3g > %.3g); "
                         "seed %llu",
                         what, i, n, g, ref[i], fabs(g - ref[i]), tol, (unsigned long long)seed);
    }
}

void tc_poison(clt_tensor *t)
{
    size_t bytes = clt_tensor_nbytes(t);
    unsigned char *p = malloc(bytes ? bytes : 1);
    ck_assert_ptr_nonnull(p);
    memset(p, 0xff, bytes);
    tc_write(t, p);
    free(p);
}

void tc_write(clt_tensor *t, const void *src)
{
    clt_ctx *ctx = clt_tensor_ctx(t);
    TC_OK(ctx, clt_tensor_write(t, src, true, NULL));
}

void tc_read(const clt_tensor *t, void *dst)
{
    clt_ctx *ctx = clt_tensor_ctx(t);
    TC_OK(ctx, clt_tensor_read(t, dst, true, NULL));
}

clt_tensor *tc_tensor(clt_ctx *ctx, clt_dtype dtype, size_t n)
{
    clt_tensor *t = NULL;
    TC_OK(ctx, clt_tensor_create(&t, ctx, dtype, 1, &n, CLT_MEM_OTHER));
    return t;
}

bool tc_contains(const char *hay, const char *needle)
{
    return hay && needle && strstr(hay, needle) != NULL;
}

void tc_mkdtemp(char *dst, size_t n)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dst, n, "%s/cltrain-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    ck_assert_msg(mkdtemp(dst) != NULL, "mkdtemp(%s) failed", dst);
}

void tc_rmdir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            remove(path);
        }
        closedir(d);
    }
    rmdir(dir);
}

int tc_count_files(const char *dir, char *first, size_t n)
{
    int count = 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[4096];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        if (count == 0 && first) snprintf(first, n, "%s", path);
        count++;
    }
    closedir(d);
    return count;
}

TCase *tc_tcase(const char *name)
{
    TCase *tc = tcase_create(name);
    const char *env = getenv("CK_DEFAULT_TIMEOUT");
    if (!(env && *env)) tcase_set_timeout(tc, 300);
    return tc;
}

void tc_skip_case(const char *name, const char *why)
{
    printf("skipped: %s: %s\n", name, why);
    fflush(stdout); /* before check forks */
}

int tc_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int ran = srunner_ntests_run(sr), failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (ran == 0) {
        printf("skipped: no test ran, so none passed\n");
        return TC_EXIT_SKIP;
    }
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
