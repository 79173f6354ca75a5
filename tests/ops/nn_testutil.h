/* Helpers for the tests of the neural-network layer ops (test_activation.c, test_loss.c,
 * test_linear_ops.c, test_dropout.c, test_input.c), on top of tests/common.h: tensors that are
 * views at a non-zero offset (so every op is exercised through (buffer, offset)), host arrays,
 * the normalized-MSE check of reductions, and re-launching an op's kernel with other local
 * sizes to show that its bits do not depend on them. Header-only (static functions). */
#ifndef CLTRAIN_TESTS_NN_TESTUTIL_H
#define CLTRAIN_TESTS_NN_TESTUTIL_H

#include "../common.h"

#include "runtime/half_internal.h"
#include "runtime/rng_internal.h"
#include "runtime/program_internal.h" /* clt__kernel: the WG-size tests fetch the op's cached
                                       * kernel */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NT_ATOL 1e-5 /* fp32 tolerances of the style guide */
#define NT_RTOL 1e-4
#define NT_NMSE 1e-7

/* A tensor of `dims` that is a view starting 5 elements into a larger buffer (whose other
 * elements are left undefined); the view keeps the buffer alive. */
static inline clt_tensor *nt_tensor(clt_ctx *ctx, clt_dtype d, int ndim, const size_t *dims)
{
    size_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= dims[i];
    size_t total = n + 8;
    clt_tensor *base = NULL, *view = NULL;
    TC_OK(ctx, clt_tensor_create(&base, ctx, d, 1, &total, CLT_MEM_OTHER));
    TC_OK(ctx, clt_tensor_view(&view, base, 5, ndim, dims));
    clt_tensor_free(base);
    return view;
}

static inline clt_tensor *nt_tensor1(clt_ctx *ctx, clt_dtype d, size_t n)
{
    return nt_tensor(ctx, d, 1, &n);
}

static inline clt_tensor *nt_tensor2(clt_ctx *ctx, clt_dtype d, size_t d0, size_t d1)
{
    const size_t dims[2] = {d0, d1};
    return nt_tensor(ctx, d, 2, dims);
}

static inline void *nt_alloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    ck_assert_ptr_nonnull(p);
    return p;
}
#define NT_FLOATS(n) ((float *)nt_alloc((n), sizeof(float)))
#define NT_DOUBLES(n) ((double *)nt_alloc((n), sizeof(double)))

static inline void nt_widen(const float *x, double *d, size_t n)
{
    for (size_t i = 0; i < n; i++)
        d[i] = x[i];
}

/* Fails unless sum (got - ref)^2 / sum ref^2 <= NT_NMSE (a reduction's overall accuracy). */
static inline void nt_check_nmse(const float *got, const double *ref, size_t n, const char *what,
                                 uint64_t seed)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    double nmse = den > 0.0 ? num / den : num;
    ck_assert_msg(nmse <= NT_NMSE, "%s: normalized MSE %.3g > %.3g; seed %llu", what, nmse, NT_NMSE,
                  (unsigned long long)seed);
}

/* Both checks of a reduction's output. */
static inline void nt_check_reduction(const float *got, const double *ref, size_t n,
                                      const char *what, uint64_t seed)
{
    tc_check_close(got, ref, n, NT_ATOL, NT_RTOL, what, seed);
    nt_check_nmse(got, ref, n, what, seed);
}

/* The op's kernel from the ctx's cache (the op must have run once, setting its arguments). */
static inline cl_kernel nt_kernel(clt_ctx *ctx, const char *files, const char *options,
                                  const char *name)
{
    cl_kernel k = NULL;
    TC_OK(ctx, clt__kernel(ctx, files, options, name, &k));
    return k;
}

/* Enqueues `groups` work-groups of `local` items of k (arguments as the op left them) and
 * finishes the queue. Returns false (launching nothing) when the kernel cannot take `local`. */
static inline bool nt_launch_local(clt_ctx *ctx, cl_kernel k, size_t groups, size_t local)
{
    size_t kmax = 0, global = groups * local;
    cl_int err = clGetKernelWorkGroupInfo(k, clt_ctx_device(ctx)->device, CL_KERNEL_WORK_GROUP_SIZE,
                                          sizeof kmax, &kmax, NULL);
    ck_assert_int_eq(err, CL_SUCCESS);
    if (local > kmax) return false;
    err = clEnqueueNDRangeKernel(clt_ctx_compute_queue(ctx), k, 1, NULL, &global, &local, 0, NULL,
                                 NULL);
    ck_assert_msg(err == CL_SUCCESS, "clEnqueueNDRangeKernel(local %zu): %d", local, err);
    TC_OK(ctx, clt_ctx_finish(ctx, CLT_WAIT_DEBUG));
    return true;
}

/* The local sizes the WG-independence tests try (every size the launcher or a tuner may pick,
 * and odd ones). */
static const size_t nt_local_sizes[] = {1, 3, 32, 64, 100, 128, 256, 1024};
#define NT_N_LOCAL_SIZES (sizeof nt_local_sizes / sizeof *nt_local_sizes)

static inline bool nt_same_bits(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof *a) == 0;
}

/* Writes v (n values) into t in t's dtype (f32, or f16/bf16 rounded to nearest even) and keeps
 * what t then holds in held. */
static inline void nt_write_as(clt_tensor *t, const float *v, double *held, size_t n)
{
    const clt_dtype d = clt_tensor_dtype(t);
    if (d == CLT_DTYPE_F32) {
        tc_write(t, v);
        nt_widen(v, held, n);
        return;
    }
    uint16_t *h = nt_alloc(n, sizeof *h);
    for (size_t i = 0; i < n; i++) {
        h[i] = d == CLT_DTYPE_F16 ? clt_f32_to_f16(v[i]) : clt_f32_to_bf16(v[i]);
        held[i] = d == CLT_DTYPE_F16 ? clt_f16_to_f32(h[i]) : clt_bf16_to_f32(h[i]);
    }
    tc_write(t, h);
    free(h);
}

/* The n values of t (f32, f16 or bf16) as f32. */
static inline void nt_read_as_f32(const clt_tensor *t, float *out, size_t n)
{
    const clt_dtype d = clt_tensor_dtype(t);
    if (d == CLT_DTYPE_F32) {
        tc_read(t, out);
        return;
    }
    uint16_t *h = nt_alloc(n, sizeof *h);
    tc_read(t, h);
    for (size_t i = 0; i < n; i++)
        out[i] = d == CLT_DTYPE_F16 ? clt_f16_to_f32(h[i]) : clt_bf16_to_f32(h[i]);
    free(h);
}

#endif
