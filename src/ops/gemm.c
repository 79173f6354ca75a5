/* GEMM on row-major f32 tensors, enqueued on the ctx's compute queue without waiting: the
 * dispatch between cltrain's own kernels (cl/gemm.cl) and CLBlast's C API, per layout, as the
 * ctx's tuning data says (src/ops/tune.c). The three layouts a linear layer needs are (N,T)
 * forward, (N,N) for the input gradient and (T,N) for the weight gradient. */
#include "ops/ops_internal.h"

#include "runtime/ctx_internal.h"
#include "runtime/internal.h"
#include "runtime/profile_internal.h"
#include "runtime/program_internal.h"
#include "ops/tune_internal.h"

#include <clblast_c.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

/* --sync-debug: wait for the GEMM and report its failure by name. */
static clt_status sync_debug(clt_ctx *ctx, const char *name)
{
    if (!ctx->sync_debug) return CLT_OK;
    ctx->stats.host_waits[CLT_WAIT_DEBUG]++;
    ctx->stats.host_waits_total++;
    cl_int err = clFinish(ctx->compute);
    if (err == CL_SUCCESS) return CLT_OK;
    return clt__fail(ctx, CLT_ERR_OPENCL, "%s failed on %s (--sync-debug): %s (%d)", name,
                     ctx->dev.device_name, clt_cl_error_name(err), err);
}

static clt_status check_operand(const clt_tensor *t, size_t rows, size_t cols, const char *name)
{
    clt_dtype d = clt_tensor_dtype(t);
    if (d != CLT_DTYPE_F32 && d != CLT_DTYPE_F16 && d != CLT_DTYPE_BF16)
        return clt__fail(clt_tensor_ctx(t), CLT_ERR_SHAPE,
                         "gemm: %s must be f32, f16 or bf16, got %s", name, clt_dtype_name(d));
    if (clt_tensor_numel(t) < rows * cols)
        return clt__fail(clt_tensor_ctx(t), CLT_ERR_SHAPE,
                         "gemm: %s holds %zu elements, the shapes need %zu x %zu", name,
                         clt_tensor_numel(t), rows, cols);
    return CLT_OK;
}

/* CLBlast's Sgemm. On a profiling ctx it is timed by wall clock between two finishes, under
 * "gemm_clblast_<layout>" (its event was seen to cover only part of its work). */
static clt_status run_clblast(clt_ctx *ctx, clt_trans ta, clt_trans tb, size_t M, size_t N,
                              size_t K, float alpha, const clt_tensor *A, const clt_tensor *B,
                              float beta, clt_tensor *C)
{
    static const char *names[] = {"gemm_clblast_nn", "gemm_clblast_nt", "gemm_clblast_tn",
                                  "gemm_clblast_tt"};
    clt_status st = CLT_OK;
    cl_command_queue q = clt_ctx_compute_queue(ctx);
    size_t a_cols = ta ? M : K, b_cols = tb ? K : N;
    double t0 = 0;
    if (ctx->profiling) {
        CLT_TRY(clt_ctx_finish(ctx, CLT_WAIT_TIMING));
        t0 = now_ms();
    }
    struct clt__ops_ctx *o = NULL;
    CLT_TRY(clt__ops_ctx(ctx, &o));
    o->used_clblast = true; /* CLBlast's cache now holds programs of our context */
    CLBlastStatusCode rc = CLBlastSgemm(
        CLBlastLayoutRowMajor, ta ? CLBlastTransposeYes : CLBlastTransposeNo,
        tb ? CLBlastTransposeYes : CLBlastTransposeNo, M, N, K, alpha, clt_tensor_mem(A),
        clt_tensor_offset(A), a_cols, clt_tensor_mem(B), clt_tensor_offset(B), b_cols, beta,
        clt_tensor_mem(C), clt_tensor_offset(C), N, &q, NULL);
    if (rc != CLBlastSuccess) {
        bool oom = rc == CLBlastTempBufferAllocFailure || rc == CLBlastOpenCLOutOfResources ||
                   rc == CLBlastOpenCLOutOfHostMemory;
        CLT_FAIL(ctx, oom ? CLT_ERR_OUT_OF_MEMORY : CLT_ERR_CLBLAST,
                 "gemm (M=%zu N=%zu K=%zu, %s%s) on %s: CLBlast returned %s (%d)", M, N, K,
                 ta ? "T" : "N", tb ? "T" : "N", clt_ctx_device(ctx)->device_name,
                 clt_clblast_error_name(rc), (int)rc);
    }
    if (ctx->profiling) {
        CLT_TRY(clt_ctx_finish(ctx, CLT_WAIT_TIMING));
        clt__profile_wall(ctx, names[ta * 2 + tb], now_ms() - t0);
    }
    CLT_TRY(sync_debug(ctx, names[ta * 2 + tb]));
fail:
    return st;
}

static size_t ceil_div(size_t a, size_t b)
{
    return (a + b - 1) / b;
}

/* The kernel of choice c for the layout and the operand dtypes: from the ctx's GEMM slots
 * (a memcmp of the packed key each), else built (options formatted only then) and given a slot,
 * the oldest when all are taken (its kernel stays in the ctx's kernel cache). */
static clt_status own_kernel(clt_ctx *ctx, const struct clt_gemm_choice *c, clt_trans ta,
                             clt_trans tb, clt_dtype a, clt_dtype b, clt_dtype cd, int bias,
                             bool epi, int part, const char *name, cl_kernel *k)
{
    struct clt__gemm_key key;
    memset(&key, 0, sizeof key); /* padding included: compared with memcmp */
    key.c = *c;
    key.ta = (int)ta;
    key.tb = (int)tb;
    key.a = (int)a;
    key.b = (int)b;
    key.cd = (int)cd;
    key.part = part;
    key.bias = bias;
    key.epi = epi;
    struct clt__ops_ctx *o = NULL;
    clt_status st = clt__ops_ctx(ctx, &o);
    if (st != CLT_OK) return st;
    for (int i = 0; i < CLT__GEMM_SLOTS && o->gemm_slots[i].kernel; i++)
        if (memcmp(&o->gemm_slots[i].key, &key, sizeof key) == 0) {
            *k = o->gemm_slots[i].kernel;
            return CLT_OK;
        }
    char opts[320];
    clt__opts_gemm(opts, sizeof opts, c, ta, tb, a, b, cd, bias, epi);
    st = clt__kernel(ctx, clt__gemm_program(c, epi), opts, name, k);
    if (st != CLT_OK) return st;
    struct clt__gemm_slot *slot = &o->gemm_slots[o->gemm_next];
    o->gemm_next = (o->gemm_next + 1) % CLT__GEMM_SLOTS;
    slot->key = key;
    slot->kernel = *k;
    return CLT_OK;
}

/* The fused epilogue's kernel arguments (cl/gemm.cl, cl/gemm_panel.cl) for e (NULL: none); a
 * bias or z not given is `any` buffer. zmode: 0, or cl/act_fn.cl's CLT_EPI_Z_STORE (1: z keeps
 * the pre-activation) or CLT_EPI_Z_GRAD (2: z holds what the activation's backward reads). */
struct epi_args {
    cl_mem bias, z, sums;
    cl_ulong bias_off, z_off, sums_off;
    cl_int act, zmode, sums_on;
    float slope, sums_beta;
};
static struct epi_args epi_args(const struct clt_gemm_epilogue *e, cl_mem any)
{
    const clt_tensor *z = !e || e->act < 0 ? NULL : e->saved ? e->saved : e->z;
    const clt_tensor *sums = e ? e->sums : NULL;
    return (struct epi_args){.bias = e && e->bias ? clt_tensor_mem(e->bias) : any,
                             .bias_off = e && e->bias ? clt_tensor_offset(e->bias) : 0,
                             .z = z ? clt_tensor_mem(z) : any,
                             .z_off = z ? clt_tensor_offset(z) : 0,
                             .sums = sums ? clt_tensor_mem(sums) : any,
                             .sums_off = sums ? clt_tensor_offset(sums) : 0,
                             .act = e ? e->act : -1,
                             .zmode = !z ? 0 : e->saved ? 2 : 1,
                             .sums_on = sums != NULL,
                             .slope = e ? e->slope : 0.0f,
                             .sums_beta = sums ? e->sums_beta : 0.0f};
}

/* cl/gemm.cl with the choice's defines, and with e (NULL: none) in its store, which the caller
 * has checked the choice takes (clt__gemm_fuses_epilogue; the direct forms an f32 bias); every
 * argument fits an int (checked by the caller). */
static clt_status run_own(clt_ctx *ctx, const struct clt_gemm_choice *c, clt_trans ta, clt_trans tb,
                          size_t M, size_t N, size_t K, float alpha, const clt_tensor *A,
                          const clt_tensor *B, float beta, clt_tensor *C,
                          const struct clt_gemm_epilogue *e)
{
    static const char *const names[2][4] = {
        {"gemm_direct_nn", "gemm_direct_nt", "gemm_direct_tn", "gemm_direct_tt"},
        {"gemm_tiled_nn", "gemm_tiled_nt", "gemm_tiled_tn", "gemm_tiled_tt"}};
    clt_status st = CLT_OK;
    cl_kernel k;
    bool tiled = c->kernel == CLT_GEMM_TILED;
    const char *name = names[tiled][ta * 2 + tb];
    const int bias = e && e->bias ? (int)clt_tensor_dtype(e->bias) : -1;
    CLT_TRY(own_kernel(ctx, c, ta, tb, clt_tensor_dtype(A), clt_tensor_dtype(B),
                       clt_tensor_dtype(C), bias, e != NULL, 0, name, &k));

    /* cl/gemm.cl's GEMM_ARGS: the scalars in three vectors, then the buffers (GEMM_EPI_ARGS
     * after them with e) */
    const cl_int lda = (cl_int)(ta ? M : K), ldb = (cl_int)(tb ? K : N), ldc = (cl_int)N;
    cl_mem am = clt_tensor_mem(A), bm = clt_tensor_mem(B), cm = clt_tensor_mem(C);
    const struct epi_args x = epi_args(e, cm);
    cl_int16 gd = {{(cl_int)M, (cl_int)N, (cl_int)K, lda, ldb, ldc, x.act, x.zmode, x.sums_on}};
    cl_float4 gs = {{alpha, beta, x.slope, x.sums_beta}};
    cl_ulong8 go = {{clt_tensor_offset(A), clt_tensor_offset(B), clt_tensor_offset(C), x.bias_off,
                     x.z_off, x.sums_off}};
    const struct clt__arg args[] = {
        CLT__ARG(gd),     CLT__ARG(gs), CLT__ARG(go), CLT__ARG(am), CLT__ARG(bm), CLT__ARG(cm),
        CLT__ARG(x.bias), CLT__ARG(x.z), CLT__ARG(x.sums)};
    CLT_TRY(clt__set_args(ctx, k, 0, args, e ? 9 : 6));

    size_t global[2], local[2];
    if (tiled) {
        local[0] = (size_t)c->wgn;
        local[1] = (size_t)c->wgm;
        global[0] = ceil_div(N, (size_t)(c->wgn * c->tn)) * local[0];
        global[1] = ceil_div(M, (size_t)(c->wgm * c->tm)) * local[1];
    } else {
        int md = c->mdim;
        local[md] = (size_t)c->wgm;
        local[1 - md] = (size_t)c->wgn;
        size_t rows = (size_t)(c->tm * c->bm), cols = (size_t)(c->tn * c->bn);
        global[md] = ceil_div(ceil_div(M, rows), local[md]) * local[md];
        global[1 - md] = ceil_div(ceil_div(N, cols), local[1 - md]) * local[1 - md];
    }
    cl_event ev = NULL;
    cl_int err = clEnqueueNDRangeKernel(ctx->compute, k, 2, NULL, global, local, 0, NULL,
                                        ctx->profiling ? &ev : NULL);
    if (err != CL_SUCCESS) { /* the message names the program: its options, formatted now */
        char opts[320], what[400];
        clt__opts_gemm(opts, sizeof opts, c, ta, tb, clt_tensor_dtype(A), clt_tensor_dtype(B),
                       clt_tensor_dtype(C), bias, e != NULL);
        snprintf(what, sizeof what, "gemm: launching %s (%s)", name, opts);
        CLT_CHECK_CL(ctx, err, what);
    }
    if (ev) clt__profile_event(ctx, name, CLT_PROFILE_KERNEL, 0, ev); /* the profiler owns it */
    CLT_TRY(sync_debug(ctx, name));
fail:
    return st;
}

/* The panel family's launches for one chunk of K: pack the chunk's B panels (once per N chunk
 * and K chunk), then per M chunk pack A's and run the micro-kernel. */
struct panel_run {
    clt_ctx *ctx;
    cl_kernel pack_a, pack_b, micro;
    cl_mem ws;
};

static clt_status panel_pack(struct panel_run *r, cl_kernel k, const clt_tensor *X, int ld,
                             int o0, int olim, int k0, int kc, size_t panel, cl_ulong off,
                             bool panels_first, const char *what)
{
    clt_status st = CLT_OK;
    cl_mem xm = clt_tensor_mem(X);
    cl_ulong xo = clt_tensor_offset(X);
    CLT_TRY(CLT__ARGS(r->ctx, k, CLT__ARG(xm), CLT__ARG(xo), CLT__ARG(ld), CLT__ARG(o0),
                      CLT__ARG(olim), CLT__ARG(k0), CLT__ARG(kc), CLT__ARG(r->ws), CLT__ARG(off)));
    /* an item per PACK_KT k of a panel, panels along dimension 0 for A^T (cl/gemm_panel.cl) */
    const size_t blocks = ceil_div((size_t)kc, CLT__PANEL_PACK_KT),
                 panels = ceil_div((size_t)(olim - o0), panel);
    size_t global[2] = {panels_first ? panels : blocks, panels_first ? blocks : panels};
    size_t local[2] = {1, 1};
    CLT_TRY(clt__enqueue_nd(r->ctx, k, 2, global, local, what));
fail:
    return st;
}

/* The panel family (cl/gemm_panel.cl) through the ctx's workspace, created here at the first
 * call. *fits is false, with nothing launched, when the operands cannot be cut into chunks that
 * fit it: a 16-bit C (whose K range is not cut, so that no partial sum is rounded to 16 bits)
 * with K deeper than CLT_GEMM_WS_FLOATS / (tm + tn), or / tn with op(A) read in place. */
static clt_status run_panel(clt_ctx *ctx, const struct clt_gemm_choice *c, clt_trans ta,
                            clt_trans tb, size_t M, size_t N, size_t K, float alpha,
                            const clt_tensor *A, const clt_tensor *B, float beta, clt_tensor *C,
                            const struct clt_gemm_epilogue *e, bool *fits)
{
    clt_status st = CLT_OK;
    const size_t S = CLT_GEMM_WS_FLOATS, MR = (size_t)c->tm, NR = (size_t)c->tn;
    /* With op(A) read in place (ia) only B's panels take room: M is never cut. */
    const size_t Mp = ceil_div(M, MR) * MR, Np = ceil_div(N, NR) * NR, Ma = c->ia ? 0 : Mp;
    const bool c16 = clt_tensor_dtype(C) != CLT_DTYPE_F32;
    /* Chunks: all of K when the panels fit (or must: a 16-bit C), else K cut in cache-block
     * multiples while M and N stay whole, else also M and N cut (B's chunk at most half). */
    size_t kc = K, mc = Mp, nc = Np;
    if (K * (Ma + Np) > S) {
        size_t kfit = S / (Ma + Np) / (size_t)c->kb * (size_t)c->kb;
        if (!c16 && kfit >= (size_t)c->kb) {
            kc = kfit;
        } else {
            kc = (size_t)c->kb * ceil_div(512, (size_t)c->kb);
            if (c16 || kc > K) kc = K;
            nc = (c->ia ? S : S / 2) / kc / NR * NR;
            if (nc > Np) nc = Np;
            mc = c->ia ? Mp : nc ? (S - nc * kc) / kc / MR * MR : 0;
            if (mc > Mp) mc = Mp;
            if (nc == 0 || mc == 0) { /* a 16-bit C with a K too deep: another kernel */
                *fits = false;
                return CLT_OK;
            }
        }
    }
    *fits = true;
    struct clt__ops_ctx *o = NULL;
    CLT_TRY(clt__ops_ctx(ctx, &o));
    if (!o->gemm_ws_lent && !o->gemm_ws) {
        size_t n = S;
        CLT_TRY(clt_tensor_create(&o->gemm_ws, ctx, CLT_DTYPE_F32, 1, &n, CLT_MEM_WORKSPACE));
    }
    clt_dtype ad = clt_tensor_dtype(A), bd = clt_tensor_dtype(B), cd = clt_tensor_dtype(C);
    struct panel_run r = {.ctx = ctx,
                          .ws = clt_tensor_mem(o->gemm_ws_lent ? o->gemm_ws_lent : o->gemm_ws)};
    const clt_tensor *bias = e ? e->bias : NULL;
    const int bdt = bias ? (int)clt_tensor_dtype(bias) : -1;
    CLT_TRY(own_kernel(ctx, c, ta, tb, ad, bd, cd, bdt, false, 0, "gemm_panel", &r.micro));
    if (!c->ia)
        CLT_TRY(own_kernel(ctx, c, ta, tb, ad, bd, cd, bdt, false, 1, "gemm_pack_a", &r.pack_a));
    CLT_TRY(own_kernel(ctx, c, ta, tb, ad, bd, cd, bdt, false, 2, "gemm_pack_b", &r.pack_b));
    /* without a bias or z the kernel's argument is any buffer: the workspace */
    const struct epi_args x = epi_args(e, r.ws);
    const int lda = (int)(ta ? M : K), ldb = (int)(tb ? K : N), ldc = (int)N;
    const cl_ulong bp_off = 0, ap_off = (cl_ulong)(nc * kc);
    cl_mem cm = clt_tensor_mem(C), am = clt_tensor_mem(A);
    cl_ulong co = clt_tensor_offset(C), ao = clt_tensor_offset(A);
    /* The order of the micro-kernel's items (cl/gemm_panel.cl). Along N first, consecutive
     * items share op(A)'s rows and each reads a B panel: while B's chunk stays in a core's
     * cache, both operands come from memory once. A larger B is read again for every row of
     * items, (M / (tm bm)) N K floats, while along M first op(A) is read again for every
     * column of items, (N / (tn bn)) M K: fewer where an item is at least as wide (tn bn) as
     * it is tall (tm bm). NT 512x1024x1024 on 2 AVX-512 cores: 330 -> 384 GFLOP/s
     * (commit 7b75793; today's figures: BENCHMARKS.md, "GEMM against OpenBLAS"). */
    const int mfirst = nc * kc * sizeof(float) > CLT__PANEL_B_CACHED &&
                       NR * (size_t)c->bn >= MR * (size_t)c->bm;
    for (size_t n0 = 0; n0 < N; n0 += nc) {
        const int in0 = (int)n0, nlim = (int)(n0 + nc < N ? n0 + nc : N);
        const int nq = (int)ceil_div((size_t)nlim - n0, NR);
        for (size_t k0 = 0; k0 < K; k0 += kc) {
            const int ik0 = (int)k0, kcur = (int)(k0 + kc < K ? kc : K - k0);
            const int first = k0 == 0, last = k0 + kc >= K;
            CLT_TRY(panel_pack(&r, r.pack_b, B, ldb, in0, nlim, ik0, kcur, NR, bp_off, false,
                               "gemm_pack_b"));
            for (size_t m0 = 0; m0 < M; m0 += mc) {
                const int im0 = (int)m0, mlim = (int)(m0 + mc < M ? m0 + mc : M);
                const int np = (int)ceil_div((size_t)mlim - m0, MR);
                if (!c->ia)
                    CLT_TRY(panel_pack(&r, r.pack_a, A, lda, im0, mlim, ik0, kcur, MR, ap_off,
                                       ta == CLT_TRANS, "gemm_pack_a"));
                CLT_TRY(CLT__ARGS(ctx, r.micro, CLT__ARG(mlim), CLT__ARG(nlim), CLT__ARG(kcur),
                                  CLT__ARG(alpha), CLT__ARG(r.ws), CLT__ARG(ap_off),
                                  CLT__ARG(bp_off), CLT__ARG(beta), CLT__ARG(cm), CLT__ARG(co),
                                  CLT__ARG(ldc), CLT__ARG(im0), CLT__ARG(in0), CLT__ARG(np),
                                  CLT__ARG(nq), CLT__ARG(mfirst), CLT__ARG(first), CLT__ARG(last),
                                  CLT__ARG(x.bias), CLT__ARG(x.bias_off), CLT__ARG(am),
                                  CLT__ARG(ao), CLT__ARG(lda), CLT__ARG(ik0), CLT__ARG(x.act),
                                  CLT__ARG(x.slope), CLT__ARG(x.z), CLT__ARG(x.z_off),
                                  CLT__ARG(x.zmode)));
                const size_t items_n = ceil_div((size_t)nq, (size_t)c->bn),
                             items_m = ceil_div((size_t)np, (size_t)c->bm);
                size_t global[2] = {mfirst ? items_m : items_n, mfirst ? items_n : items_m};
                size_t local[2] = {1, 1};
                CLT_TRY(clt__enqueue_nd(ctx, r.micro, 2, global, local, "gemm_panel"));
            }
        }
    }
fail:
    return st;
}

clt_status clt__gemm_ws_reserve(clt_ctx *ctx, clt_tensor **out)
{
    clt_status st = CLT_OK;
    struct clt__ops_ctx *o = NULL;
    *out = NULL;
    CLT_TRY(clt__ops_ctx(ctx, &o));
    if (o->gemm_ws_lent || clt__gemm_ws_bytes(ctx) == 0) return CLT_OK;
    size_t n = CLT_GEMM_WS_FLOATS;
    CLT_TRY(clt_tensor_create(out, ctx, CLT_DTYPE_F32, 1, &n, CLT_MEM_WORKSPACE));
    o->gemm_ws_lent = *out;
fail:
    return st;
}

void clt__gemm_ws_return(clt_ctx *ctx, clt_tensor *ws)
{
    if (!ws) return;
    struct clt__ops_ctx *o = ctx->ops.state; /* exists: the reservation made it */
    if (o && o->gemm_ws_lent == ws) o->gemm_ws_lent = NULL;
    clt_tensor_free(ws); /* the device keeps it while queued GEMMs use it */
}

bool clt__gemm_takes_16bit(const struct clt_gemm_choice *c)
{
    return c->kernel == CLT_GEMM_TILED || c->kernel == CLT_GEMM_PANEL ||
           (c->kernel == CLT_GEMM_DIRECT && c->kb > 0 && !c->veck);
}

struct clt_gemm_choice clt__gemm_mixed_choice(const clt_device_info *dev)
{
    /* Where the device's own choice is the panel family (CPUs), outer products over packed
     * slices in the register blocks of the tuner's table for its vector width: not the panel
     * family, as this is also its fallback for a 16-bit C too deep in K. (4 x 4 blocks of 4
     * floats, used before, ran MLP-S's 16-bit products 3 to 20 times slower on AVX-512.) */
    static const struct clt_gemm_choice packed16 = CLT_GEMM_CHOICE_PACKED(8, 32, 16, 64, 8, 2),
                                        packed8 = CLT_GEMM_CHOICE_PACKED(6, 16, 8, 128, 4, 4),
                                        small = CLT_GEMM_CHOICE_PACKED(4, 4, 4, 16, 1, 1);
    struct clt_gemm_choice c = clt_gemm_own_default(dev, CLT_GEMM_TT, CLT_GEMM_LARGE);
    if (c.kernel == CLT_GEMM_PANEL) return c.vw >= 16 ? packed16 : c.vw >= 8 ? packed8 : small;
    return clt__gemm_takes_16bit(&c) ? c : small;
}

struct clt_gemm_choice clt__gemm_narrowed(const struct clt_gemm_choice *c, size_t N)
{
    struct clt_gemm_choice n = *c;
    if (n.kernel != CLT_GEMM_DIRECT || n.veck || n.kb > 0) return n;
    /* An outer-product block wider than twice N computes mostly padding (a convolution's 32
     * output channels in a 64-wide block): the same registers as a taller, narrower block
     * (tm8 tn32 against tm4 tn64: 0.5 against 1.4 ms for the CNN preset's first conv on
     * PoCL). */
    while (N * 2 <= (size_t)n.tn && n.tn / 2 >= n.vw && n.tm * 2 <= 16) {
        n.tn /= 2;
        n.tm *= 2;
    }
    return n;
}

struct clt_gemm_choice clt__gemm_for_a(const struct clt_gemm_choice *c, clt_dtype a)
{
    struct clt_gemm_choice p = *c;
    if (p.kernel == CLT_GEMM_PANEL && a != CLT_DTYPE_F32) p.ia = 0;
    return p;
}

/* *rows = the first M rows of N of t: t itself when it has no more, else a new view. */
static clt_status first_rows(clt_tensor *t, size_t M, size_t N, clt_tensor **rows)
{
    size_t dims[2] = {M, N};
    *rows = t;
    if (clt_tensor_numel(t) == M * N) return CLT_OK;
    return clt_tensor_view(rows, t, 0, 2, dims);
}

/* The epilogue e by kernels of its own, for GEMMs without it in their store: the product is
 * in e->z when given (then C = act(z)), else in C (the backward form: in place). The sums
 * (layout TN) are A's (K, M) column sums. */
static clt_status unfused_epilogue(clt_tensor *C, size_t M, size_t N, size_t K,
                                   const clt_tensor *A, const struct clt_gemm_epilogue *e)
{
    clt_status st = CLT_OK;
    clt_tensor *c = NULL, *z = NULL, *sv = NULL;
    if (e->sums) { /* as rows of M, whatever A's shape */
        clt_tensor *a = NULL;
        const size_t dims[2] = {K, M};
        CLT_TRY(clt_tensor_view(&a, A, 0, 2, dims));
        st = clt_op_bias_grad(e->sums, a, e->sums_beta);
        clt_tensor_free(a);
        return st;
    }
    CLT_TRY(first_rows(C, M, N, &c));
    if (e->saved) { /* the backward form */
        const clt_tensor *s = e->saved;
        size_t dims[2] = {M, N};
        if (clt_tensor_numel(s) != M * N) CLT_TRY(clt_tensor_view(&sv, s, 0, 2, dims));
        CLT_TRY(clt_op_act_backward_alpha((clt_act)e->act, e->slope, c, c, sv ? sv : s,
                                          sv ? sv : s));
    } else {
        if (e->z) CLT_TRY(first_rows(e->z, M, N, &z));
        if (e->bias) CLT_TRY(clt_op_bias_add(z ? z : c, e->bias));
        if (e->act >= 0)
            CLT_TRY(clt_op_act_forward_alpha((clt_act)e->act, e->slope, c, z ? z : c));
    }
fail:
    if (c != C) clt_tensor_free(c);
    if (z != e->z) clt_tensor_free(z);
    clt_tensor_free(sv);
    return st;
}

/* The shared checks and the dispatch; `c` NULL means the ctx's choice for the layout. */
static clt_status gemm(const struct clt_gemm_choice *c, clt_trans ta, clt_trans tb, size_t M,
                       size_t N, size_t K, float alpha, const clt_tensor *A, const clt_tensor *B,
                       float beta, clt_tensor *C, const struct clt_gemm_epilogue *e)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = clt_tensor_ctx(C);
    struct clt_gemm_choice fallback, narrow, packed_a;
    char why[128];
    CLT_TRY(clt_tensor_same_ctx(C, A));
    CLT_TRY(clt_tensor_same_ctx(C, B));
    CLT_ASSERT((ta == CLT_NO_TRANS || ta == CLT_TRANS) && (tb == CLT_NO_TRANS || tb == CLT_TRANS));
    size_t a_rows = ta ? K : M, a_cols = ta ? M : K, b_rows = tb ? N : K, b_cols = tb ? K : N;
    CLT_TRY(check_operand(A, a_rows, a_cols, "A"));
    CLT_TRY(check_operand(B, b_rows, b_cols, "B"));
    CLT_TRY(check_operand(C, M, N, "C"));
    if (c && clt_gemm_choice_check(c, &ctx->dev, why, sizeof why) != CLT_OK)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "gemm: invalid kernel choice: %s", why);
    if (M == 0 || N == 0) return CLT_OK;
    bool mixed = clt_tensor_dtype(A) != CLT_DTYPE_F32 || clt_tensor_dtype(B) != CLT_DTYPE_F32 ||
                 clt_tensor_dtype(C) != CLT_DTYPE_F32;
    if (!c) { /* the tuning data's choice for the layout, size class and dtypes */
        struct clt__ops_ctx *o;
        CLT_TRY(clt__ops_ctx(ctx, &o));
        /* M * N * K in floating point: no overflow, and exact enough for a threshold */
        bool large = (double)M * (double)N * (double)K >= (double)o->tune.gemm_large_macs;
        const int l = ta * 2 + tb, z = large ? CLT_GEMM_LARGE : CLT_GEMM_SMALL;
        c = mixed ? &o->tune.gemm16[l][z] : &o->tune.gemm[l][z];
    }
    /* The own kernels index with ints; CLBlast rejects K = 0, where C = beta * C (and beta = 0
     * must give zeros even over NaN, which a scal would not). */
    bool fits = M <= INT_MAX && N <= INT_MAX && K <= INT_MAX;
    if (K == 0 && fits) { /* the packed kernel loops over K slices: none would store */
        static const struct clt_gemm_choice one = {.kernel = CLT_GEMM_DIRECT,
                                                   .tm = 1,
                                                   .tn = 1,
                                                   .vw = 1,
                                                   .wgm = 1,
                                                   .wgn = 1,
                                                   .bm = 1,
                                                   .bn = 1};
        c = &one;
    }
    narrow = clt__gemm_narrowed(c, N);
    c = &narrow;
    if (mixed) {
        if (!fits)
            CLT_FAIL(ctx, CLT_ERR_UNSUPPORTED,
                     "gemm: 16-bit operands with M=%zu N=%zu K=%zu beyond int range", M, N, K);
        if (!clt__gemm_takes_16bit(c)) {
            fallback = clt__gemm_mixed_choice(&ctx->dev);
            c = &fallback;
        }
        packed_a = clt__gemm_for_a(c, clt_tensor_dtype(A));
        c = &packed_a;
    }
    /* the epilogue in the kernel's store where it takes it (the direct kernels with f32
     * operands an f32 bias only), the sums in the kernel; else kernels after it */
    const bool fused = e && fits &&
                       (e->sums ? clt__gemm_sums_in_kernel(c)
                                : clt__gemm_fuses_epilogue(c, ta, tb) &&
                                      (c->kernel != CLT_GEMM_DIRECT || mixed || !e->bias ||
                                       clt_tensor_dtype(e->bias) == CLT_DTYPE_F32));
    if (e && !fused) {
        CLT_TRY(gemm(c, ta, tb, M, N, K, alpha, A, B, beta, e->z ? e->z : C, NULL));
        CLT_TRY(unfused_epilogue(C, M, N, K, A, e));
    } else if (c->kernel == CLT_GEMM_CLBLAST || !fits) {
        if (K == 0)
            CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "gemm: K = 0 with M=%zu, N=%zu beyond int range", M,
                     N);
        CLT_TRY(run_clblast(ctx, ta, tb, M, N, K, alpha, A, B, beta, C));
    } else if (c->kernel == CLT_GEMM_PANEL) {
        bool done = false;
        CLT_TRY(run_panel(ctx, c, ta, tb, M, N, K, alpha, A, B, beta, C, e, &done));
        if (!done) {
            fallback = clt__gemm_mixed_choice(&ctx->dev);
            CLT_TRY(run_own(ctx, &fallback, ta, tb, M, N, K, alpha, A, B, beta,
                            e && e->z ? e->z : C, NULL));
            if (e) CLT_TRY(unfused_epilogue(C, M, N, K, A, e));
        }
    } else {
        CLT_TRY(run_own(ctx, c, ta, tb, M, N, K, alpha, A, B, beta, C, e));
    }
fail:
    return st;
}

clt_status clt_op_gemm(clt_trans ta, clt_trans tb, size_t M, size_t N, size_t K, float alpha,
                       const clt_tensor *A, const clt_tensor *B, float beta, clt_tensor *C)
{
    return gemm(NULL, ta, tb, M, N, K, alpha, A, B, beta, C, NULL);
}

clt_status clt_op_gemm_epilogue(clt_trans ta, clt_trans tb, size_t M, size_t N, size_t K,
                                const clt_tensor *A, const clt_tensor *B,
                                const struct clt_gemm_epilogue *e, clt_tensor *C)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = clt_tensor_ctx(C);
    CLT_ASSERT(e != NULL);
    if (e->saved) {
        if (e->act < 0 || e->bias || e->z)
            CLT_FAIL(ctx, CLT_ERR_INVALID_ARG,
                     "gemm: the backward epilogue (saved) needs an activation, and no bias or z");
        CLT_TRY(clt_tensor_same_ctx(C, e->saved));
        if (clt_tensor_dtype(e->saved) != clt_tensor_dtype(C) ||
            clt_tensor_numel(e->saved) < M * N || e->saved == C)
            CLT_FAIL(ctx, CLT_ERR_SHAPE,
                     "gemm: saved must be another tensor of C's dtype (%s) with at least %zu x %zu "
                     "elements",
                     clt_dtype_name(clt_tensor_dtype(C)), M, N);
    }
    if (e->bias) {
        clt_dtype d = clt_tensor_dtype(e->bias);
        CLT_TRY(clt_tensor_same_ctx(C, e->bias));
        if (d != CLT_DTYPE_F32 && d != CLT_DTYPE_F16 && d != CLT_DTYPE_BF16)
            CLT_FAIL(ctx, CLT_ERR_SHAPE, "gemm: the bias must be f32, f16 or bf16, got %s",
                     clt_dtype_name(d));
        if (clt_tensor_numel(e->bias) != N)
            CLT_FAIL(ctx, CLT_ERR_SHAPE, "gemm: the bias holds %zu elements, C has %zu columns",
                     clt_tensor_numel(e->bias), N);
    }
    if (e->act < -1 || e->act >= CLT_ACT__COUNT)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "gemm: unknown activation %d in the epilogue", e->act);
    if (e->act == CLT_ACT_LEAKYRELU && !isfinite(e->slope))
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "gemm: leakyrelu slope must be finite, got %g",
                 (double)e->slope);
    if (e->z) {
        if (e->act < 0)
            CLT_FAIL(ctx, CLT_ERR_INVALID_ARG,
                     "gemm: the epilogue keeps the pre-activation z only with an activation");
        CLT_TRY(clt_tensor_same_ctx(C, e->z));
        if (clt_tensor_dtype(e->z) != clt_tensor_dtype(C) || clt_tensor_numel(e->z) < M * N ||
            e->z == C)
            CLT_FAIL(ctx, CLT_ERR_SHAPE,
                     "gemm: z must be another tensor of C's dtype (%s) with at least %zu x %zu "
                     "elements",
                     clt_dtype_name(clt_tensor_dtype(C)), M, N);
    }
    st = gemm(NULL, ta, tb, M, N, K, 1.0f, A, B, 0.0f, C, e);
fail:
    return st;
}

clt_status clt_op_gemm_tn_sums(size_t M, size_t N, size_t K, float alpha, const clt_tensor *A,
                               const clt_tensor *B, float beta, clt_tensor *C, clt_tensor *sums,
                               float sums_beta)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = clt_tensor_ctx(C);
    CLT_ASSERT(A && B && sums);
    CLT_TRY(clt_tensor_same_ctx(C, sums));
    if (clt_tensor_dtype(sums) != CLT_DTYPE_F32 || clt_tensor_numel(sums) != M)
        CLT_FAIL(ctx, CLT_ERR_SHAPE,
                 "gemm: the sums must be f32 with %zu elements, got %s with %zu", M,
                 clt_dtype_name(clt_tensor_dtype(sums)), clt_tensor_numel(sums));
    const struct clt_gemm_epilogue e = {.act = -1, .sums = sums, .sums_beta = sums_beta};
    if (N == 0 && M > 0) return unfused_epilogue(C, M, N, K, A, &e); /* sums alone */
    st = gemm(NULL, CLT_TRANS, CLT_NO_TRANS, M, N, K, alpha, A, B, beta, C, &e);
fail:
    return st;
}

clt_status clt_op_gemm_bias(clt_trans ta, clt_trans tb, size_t M, size_t N, size_t K,
                            const clt_tensor *A, const clt_tensor *B, const clt_tensor *bias,
                            clt_tensor *C)
{
    CLT_ASSERT(bias != NULL);
    const struct clt_gemm_epilogue e = {.bias = bias, .act = -1};
    return clt_op_gemm_epilogue(ta, tb, M, N, K, A, B, &e, C);
}

clt_status clt_op_gemm_with(const struct clt_gemm_choice *c, clt_trans ta, clt_trans tb, size_t M,
                            size_t N, size_t K, float alpha, const clt_tensor *A,
                            const clt_tensor *B, float beta, clt_tensor *C)
{
    CLT_ASSERT(c != NULL);
    return gemm(c, ta, tb, M, N, K, alpha, A, B, beta, C, NULL);
}

/* ---- the family: its programs ------------------------------------------------------------- */

const char *clt__gemm_program(const struct clt_gemm_choice *c, bool epi)
{
    return c->kernel == CLT_GEMM_PANEL ? "act_fn,gemm_panel" : epi ? "act_fn,gemm" : "gemm";
}

bool clt__gemm_fuses_epilogue(const struct clt_gemm_choice *c, clt_trans ta, clt_trans tb)
{
    (void)tb;
    if (c->kernel == CLT_GEMM_PANEL) return true;
    if (c->kernel == CLT_GEMM_TILED) return !ta; /* NN and NT: fewer programs to check */
    return c->kernel == CLT_GEMM_DIRECT && !ta;  /* NN and NT */
}

bool clt__gemm_sums_in_kernel(const struct clt_gemm_choice *c)
{
    return c->kernel == CLT_GEMM_DIRECT && !c->veck; /* the outer-product forms */
}

void clt__opts_gemm(char *dst, size_t n, const struct clt_gemm_choice *c, clt_trans ta,
                    clt_trans tb, clt_dtype a, clt_dtype b, clt_dtype cd, int bias, bool epi)
{
    bool tiled = c->kernel == CLT_GEMM_TILED;
    int len;
    if (c->kernel == CLT_GEMM_PANEL)
        len = snprintf(dst, n,
                       "-DGEMM_TA=%d -DGEMM_TB=%d -DPANEL_MR=%d -DPANEL_NR=%d -DGEMM_VW=%d "
                       "-DGEMM_KB=%d -DGEMM_BM=%d -DGEMM_BN=%d -DPANEL_IA=%d -DPACK_KT=%d",
                       (int)ta, (int)tb, c->tm, c->tn, c->vw, c->kb, c->bm, c->bn, c->ia,
                       CLT__PANEL_PACK_KT);
    else
        len = snprintf(
            dst, n,
            "-DGEMM_TA=%d -DGEMM_TB=%d -DGEMM_TILED=%d -DGEMM_TM=%d -DGEMM_TN=%d -DGEMM_VW=%d "
            "-DGEMM_VECK=%d -DGEMM_MDIM=%d -DGEMM_WGM=%d -DGEMM_WGN=%d -DGEMM_KB=%d -DGEMM_BM=%d "
            "-DGEMM_BN=%d",
            (int)ta, (int)tb, tiled, c->tm, c->tn, tiled ? 1 : c->vw, tiled ? 0 : c->veck,
            tiled ? 0 : c->mdim, c->wgm, c->wgn, c->kb, tiled ? 1 : c->bm, tiled ? 1 : c->bn);
    /* all-f32 GEMMs have no dtype defines (the same programs as before 16-bit storage) */
    if (len > 0 && (size_t)len < n &&
        (a != CLT_DTYPE_F32 || b != CLT_DTYPE_F32 || cd != CLT_DTYPE_F32))
        len += snprintf(dst + len, n - (size_t)len,
                        " -DGEMM_A_DTYPE=%d -DGEMM_B_DTYPE=%d -DGEMM_C_DTYPE=%d", (int)a, (int)b,
                        (int)cd);
    if (len > 0 && (size_t)len < n && bias >= 0 && c->kernel == CLT_GEMM_PANEL)
        len += snprintf(dst + len, n - (size_t)len, " -DGEMM_BIAS=1 -DGEMM_BIAS_DTYPE=%d", bias);
    /* the direct and tiled kernels' epilogue (the direct kernel's bias is f32) */
    if (len > 0 && (size_t)len < n && epi && c->kernel != CLT_GEMM_PANEL)
        snprintf(dst + len, n - (size_t)len, " -DGEMM_EPI=1 -DGEMM_BIAS=%d -DGEMM_BIAS_DTYPE=%d",
                 bias >= 0, bias >= 0 ? bias : (int)CLT_DTYPE_F32);
}

#define CAND_CAP 128

/* The GEMM choices a ctx on dev may use: the tuner's table (any of which a tuning file may name,
 * for any layout with --all), the built-in own defaults, the 16-bit fallback and their narrowed
 * forms (clt__gemm_narrowed) and forms for a 16-bit op(A) (clt__gemm_for_a), each once, if it
 * fits dev. */
static int gemm_choices(const clt_device_info *dev, struct clt_gemm_choice *out, int cap)
{
    int nv = 0, n = 0;
    const struct clt_gemm_choice *table = clt_gemm_variants(&nv);
    struct clt_gemm_choice cand[CAND_CAP];
    int nc = 0;
    for (int i = 0; i < nv && nc < CAND_CAP; i++)
        cand[nc++] = table[i];
    for (int l = 0; l < CLT_GEMM__LAYOUTS; l++)
        for (int z = 0; z < CLT_GEMM__SIZES && nc < CAND_CAP; z++)
            cand[nc++] = clt_gemm_own_default(dev, (clt_gemm_layout)l, (clt_gemm_size)z);
    if (nc < CAND_CAP) cand[nc++] = clt__gemm_mixed_choice(dev);
    /* and what the dispatch narrows each of them to for narrow products */
    for (int i = 0, base = nc; i < base; i++)
        for (int N = cand[i].tn / 2; N >= 1 && nc < CAND_CAP; N /= 2) {
            struct clt_gemm_choice nw = clt__gemm_narrowed(&cand[i], (size_t)N);
            if (nw.tn != cand[i].tn) cand[nc++] = nw;
        }
    for (int i = 0, base = nc; i < base && nc < CAND_CAP; i++) {
        struct clt_gemm_choice a16 = clt__gemm_for_a(&cand[i], CLT_DTYPE_BF16);
        if (a16.ia != cand[i].ia) cand[nc++] = a16;
    }
    for (int i = 0; i < nc && n < cap; i++) {
        if (cand[i].kernel == CLT_GEMM_CLBLAST) continue;
        if (clt_gemm_choice_check(&cand[i], dev, NULL, 0) != CLT_OK) continue;
        char a[256], b[256];
        clt_gemm_choice_format(&cand[i], a, sizeof a);
        bool seen = false;
        for (int j = 0; j < n && !seen; j++) {
            clt_gemm_choice_format(&out[j], b, sizeof b);
            seen = strcmp(a, b) == 0;
        }
        if (!seen) out[n++] = cand[i];
    }
    return n;
}

static void gemm_variants(const clt_device_info *dev, clt_program_variant_fn fn, void *user)
{
    char o[512];
    clt_dtype triples[16][3]; /* [0] is all-f32 */
    int nt = clt__mixed_triples(triples);
    struct clt_gemm_choice choices[128];
    int nc = gemm_choices(dev, choices, (int)(sizeof choices / sizeof *choices));
    for (int c = 0; c < nc; c++)
        for (int l = 0; l < CLT_GEMM__LAYOUTS; l++)
            for (int t = 0; t < (clt__gemm_takes_16bit(&choices[c]) ? nt : 1); t++) {
                const clt_trans ta = (clt_trans)(l >> 1), tb = (clt_trans)(l & 1);
                if (clt__gemm_for_a(&choices[c], triples[t][0]).ia != choices[c].ia)
                    continue; /* never run: its packing form runs instead */
                clt__opts_gemm(o, sizeof o, &choices[c], ta, tb, triples[t][0], triples[t][1],
                               triples[t][2], -1, false);
                fn(clt__gemm_program(&choices[c], false), o, user);
                if (choices[c].kernel == CLT_GEMM_PANEL) {
                    /* a linear layer's forward (NT) with its bias fused, stored as its weight */
                    if (l != CLT_GEMM_NT) continue;
                    clt__opts_gemm(o, sizeof o, &choices[c], ta, tb, triples[t][0], triples[t][1],
                                   triples[t][2], (int)triples[t][1], false);
                    fn(clt__gemm_program(&choices[c], false), o, user);
                } else if (l == CLT_GEMM_TN && clt__gemm_sums_in_kernel(&choices[c])) {
                    /* a linear layer's weight gradient with its bias gradient's sums */
                    clt__opts_gemm(o, sizeof o, &choices[c], ta, tb, triples[t][0], triples[t][1],
                                   triples[t][2], -1, true);
                    fn(clt__gemm_program(&choices[c], true), o, user);
                } else if (clt__gemm_fuses_epilogue(&choices[c], ta, tb)) {
                    /* the direct kernel with the epilogue, without and with an f32 bias; the
                     * tiled one and the direct one with 16-bit operands also with a bias
                     * stored as the weight */
                    const int wb = (int)triples[t][1];
                    const bool any_bias = choices[c].kernel == CLT_GEMM_TILED || t > 0;
                    const int biases[] = {-1, (int)CLT_DTYPE_F32, wb};
                    const int nbias = any_bias && wb != (int)CLT_DTYPE_F32 ? 3 : 2;
                    for (int i = 0; i < nbias; i++) {
                        clt__opts_gemm(o, sizeof o, &choices[c], ta, tb, triples[t][0],
                                       triples[t][1], triples[t][2], biases[i], true);
                        fn(clt__gemm_program(&choices[c], true), o, user);
                    }
                }
            }
}

const struct clt__op_family clt__family_gemm = {
    .name = "gemm",
    .sources = "act_fn,gemm,gemm_panel",
    .slots = 0, /* its kernels are keyed by their choice (struct clt__gemm_slot, the ops' state) */
    .variants = gemm_variants,
};
