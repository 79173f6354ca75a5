/* Tensors (dtype, shape, a view into a shared device buffer), host<->device copies on the
 * transfer queue ordered against the compute queue by events, and pinned host buffers. */
#include "runtime/alloc_internal.h"
#include "runtime/half_internal.h"
#include "runtime/internal.h"
#include "runtime/profile_internal.h"

#include "cltrain/tensor.h"

#include <string.h>
#include <strings.h>

struct clt_tensor {
    clt_ctx *ctx;
    struct clt__buffer *buf;
    clt_dtype dtype;
    int ndim;
    size_t dims[CLT_MAX_DIMS];
    size_t offset; /* elements */
};

struct clt_pinned {
    clt_ctx *ctx;
    struct clt__buffer *buf;
    void *ptr;
    size_t bytes;
};

size_t clt_dtype_size(clt_dtype d)
{
    static const size_t sizes[CLT_DTYPE__COUNT] = {4, 2, 2, 4, 1, 2};
    return (unsigned)d < CLT_DTYPE__COUNT ? sizes[d] : 0;
}

const char *clt_dtype_name(clt_dtype d)
{
    static const char *names[CLT_DTYPE__COUNT] = {"f32", "f16", "bf16", "i32", "u8", "u16"};
    return (unsigned)d < CLT_DTYPE__COUNT ? names[d] : "unknown";
}

clt_status clt_dtype_parse(const char *s, clt_dtype *out)
{
    static const struct {
        const char *name;
        clt_dtype d;
    } names[] = {{"f32", CLT_DTYPE_F32},   {"fp32", CLT_DTYPE_F32},      {"float32", CLT_DTYPE_F32},
                 {"f16", CLT_DTYPE_F16},   {"fp16", CLT_DTYPE_F16},      {"float16", CLT_DTYPE_F16},
                 {"bf16", CLT_DTYPE_BF16}, {"bfloat16", CLT_DTYPE_BF16}, {"i32", CLT_DTYPE_I32},
                 {"int32", CLT_DTYPE_I32}, {"u8", CLT_DTYPE_U8},         {"uint8", CLT_DTYPE_U8},
                 {"u16", CLT_DTYPE_U16},   {"uint16", CLT_DTYPE_U16}};
    for (size_t i = 0; s && i < sizeof names / sizeof *names; i++) {
        if (strcasecmp(s, names[i].name) == 0) {
            *out = names[i].d;
            return CLT_OK;
        }
    }
    return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                     "unknown dtype \"%s\"; expected f32, f16, bf16, i32, u8 or u16", s ? s : "");
}

static clt_status check_shape(clt_ctx *ctx, clt_dtype dtype, int ndim, const size_t *dims,
                              size_t *numel)
{
    if ((unsigned)dtype >= CLT_DTYPE__COUNT)
        return clt__fail(ctx, CLT_ERR_INVALID_ARG, "invalid dtype %d", (int)dtype);
    if (ndim < 0 || ndim > CLT_MAX_DIMS)
        return clt__fail(ctx, CLT_ERR_SHAPE, "a tensor has 0 to %d dimensions, not %d",
                         CLT_MAX_DIMS, ndim);
    size_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] != 0 && n > SIZE_MAX / dims[i])
            return clt__fail(ctx, CLT_ERR_SHAPE, "tensor shape overflows size_t");
        n *= dims[i];
    }
    *numel = n;
    return CLT_OK;
}

static clt_status wrap(clt_tensor **out, clt_ctx *ctx, struct clt__buffer *buf, clt_dtype dtype,
                       int ndim, const size_t *dims, size_t offset)
{
    clt_tensor *t = calloc(1, sizeof *t);
    if (!t) return clt__fail(ctx, CLT_ERR_HOST_MEMORY, "out of host memory (tensor)");
    t->ctx = ctx;
    t->buf = buf;
    t->dtype = dtype;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->dims[i] = dims[i];
    t->offset = offset;
    atomic_fetch_add(&clt__live_tensors, 1);
    *out = t;
    return CLT_OK;
}

clt_status clt_tensor_create(clt_tensor **out, clt_ctx *ctx, clt_dtype dtype, int ndim,
                             const size_t *dims, clt_mem_category cat)
{
    clt_status st = CLT_OK;
    struct clt__buffer *buf = NULL;
    size_t numel = 0;
    CLT_ASSERT(out && ctx);
    *out = NULL;
    CLT_TRY(check_shape(ctx, dtype, ndim, dims, &numel));
    CLT_TRY(clt__buffer_alloc(ctx, numel * clt_dtype_size(dtype), cat, CL_MEM_READ_WRITE, &buf));
    CLT_TRY(wrap(out, ctx, buf, dtype, ndim, dims, 0));
    buf = NULL;
fail:
    clt__buffer_release(buf);
    return st;
}

clt_status clt_tensor_zeros(clt_tensor **out, clt_ctx *ctx, clt_dtype dtype, int ndim,
                            const size_t *dims, clt_mem_category cat)
{
    /* New buffers are touched with zero bytes, which is 0 in every dtype. */
    return clt_tensor_create(out, ctx, dtype, ndim, dims, cat);
}

/* The bit pattern of `value` in dtype, for clEnqueueFillBuffer. */
static void pattern_of(clt_dtype dtype, double value, unsigned char pat[4])
{
    float f = (float)value;
    uint16_t h;
    int32_t i;
    switch (dtype) {
    case CLT_DTYPE_F32: memcpy(pat, &f, 4); break;
    case CLT_DTYPE_F16: h = clt_f32_to_f16(f); memcpy(pat, &h, 2); break;
    case CLT_DTYPE_BF16: h = clt_f32_to_bf16(f); memcpy(pat, &h, 2); break;
    case CLT_DTYPE_I32: i = (int32_t)value; memcpy(pat, &i, 4); break;
    default: pat[0] = (unsigned char)value; break;
    }
}

clt_status clt_tensor_filled(clt_tensor **out, clt_ctx *ctx, clt_dtype dtype, int ndim,
                             const size_t *dims, double value, clt_mem_category cat)
{
    clt_status st = CLT_OK;
    clt_tensor *t = NULL;
    unsigned char pat[4] = {0};
    CLT_TRY(clt_tensor_create(&t, ctx, dtype, ndim, dims, cat));
    size_t es = clt_dtype_size(dtype), n = clt_tensor_numel(t);
    pattern_of(dtype, value, pat);
    if (n > 0)
        CLT_CHECK_CL(ctx, clEnqueueFillBuffer(ctx->compute, t->buf->mem, pat, es, 0, n * es, 0,
                                              NULL, NULL),
                     "clEnqueueFillBuffer");
    *out = t;
    t = NULL;
fail:
    clt_tensor_free(t);
    return st;
}

clt_status clt_tensor_like(clt_tensor **out, const clt_tensor *like)
{
    return clt_tensor_create(out, like->ctx, like->dtype, like->ndim, like->dims, like->buf->cat);
}

clt_status clt_tensor_view(clt_tensor **out, const clt_tensor *base, size_t offset, int ndim,
                           const size_t *dims)
{
    size_t numel = 0, es = clt_dtype_size(base->dtype);
    clt_status st = check_shape(base->ctx, base->dtype, ndim, dims, &numel);
    *out = NULL;
    if (st != CLT_OK) return st;
    if ((base->offset + offset + numel) * es > base->buf->bytes)
        return clt__fail(base->ctx, CLT_ERR_SHAPE,
                         "view of %zu elements at offset %zu runs past its buffer (%zu bytes)",
                         numel, base->offset + offset, base->buf->bytes);
    st = wrap(out, base->ctx, base->buf, base->dtype, ndim, dims, base->offset + offset);
    if (st == CLT_OK) clt__buffer_retain(base->buf);
    return st;
}

clt_status clt__tensor_view_as(clt_tensor **out, const clt_tensor *base, clt_dtype dtype,
                               int ndim, const size_t *dims)
{
    size_t numel = 0, es = clt_dtype_size(dtype), at = base->offset * clt_dtype_size(base->dtype);
    clt_status st = check_shape(base->ctx, dtype, ndim, dims, &numel);
    *out = NULL;
    if (st != CLT_OK) return st;
    CLT_ASSERT(at % es == 0);
    if (at + numel * es > base->buf->bytes)
        return clt__fail(base->ctx, CLT_ERR_SHAPE,
                         "view of %zu %s elements at byte %zu runs past its buffer (%zu bytes)",
                         numel, clt_dtype_name(dtype), at, base->buf->bytes);
    st = wrap(out, base->ctx, base->buf, dtype, ndim, dims, at / es);
    if (st == CLT_OK) clt__buffer_retain(base->buf);
    return st;
}

void clt_tensor_free(clt_tensor *t)
{
    if (!t) return;
    clt__buffer_release(t->buf);
    free(t);
    atomic_fetch_sub(&clt__live_tensors, 1);
}

clt_ctx *clt_tensor_ctx(const clt_tensor *t) { return t->ctx; }
clt_dtype clt_tensor_dtype(const clt_tensor *t) { return t->dtype; }
int clt_tensor_ndim(const clt_tensor *t) { return t->ndim; }
size_t clt_tensor_dim(const clt_tensor *t, int i) { return i < t->ndim ? t->dims[i] : 1; }
cl_mem clt_tensor_mem(const clt_tensor *t) { return t->buf->mem; }
size_t clt_tensor_offset(const clt_tensor *t) { return t->offset; }

size_t clt_tensor_numel(const clt_tensor *t)
{
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->dims[i];
    return n;
}

size_t clt_tensor_nbytes(const clt_tensor *t)
{
    return clt_tensor_numel(t) * clt_dtype_size(t->dtype);
}

clt_status clt_tensor_same_ctx(const clt_tensor *a, const clt_tensor *b)
{
    if (a->ctx == b->ctx) return CLT_OK;
    const clt_device_info *da = clt_ctx_device(a->ctx), *db = clt_ctx_device(b->ctx);
    clt_status st = clt__fail(a->ctx, CLT_ERR_DEVICE_MISMATCH,
                     "device mismatch: one tensor lives on device %d (%s, ctx %p), the other on "
                     "device %d (%s, ctx %p); move both to one ctx",
                     da->index, da->device_name, (void *)a->ctx, db->index, db->device_name,
                     (void *)b->ctx);
    /* Report in both ctxs: either may be the one the caller reads. */
    return clt__fail(b->ctx, st, "%s", clt_ctx_errmsg(a->ctx));
}

/* One copy between host memory and t's bytes on the transfer queue: after a marker of the
 * compute queue (so it sees, and does not clobber, the compute work enqueued before it); an
 * upload also makes later compute work wait for it, through a barrier on its event. */
static clt_status transfer(const clt_tensor *t, void *host, bool upload, bool blocking,
                           cl_event *done)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = t->ctx;
    cl_event marker = NULL, ev = NULL;
    size_t es = clt_dtype_size(t->dtype), bytes = clt_tensor_nbytes(t);
    if (done) *done = NULL;
    if (bytes == 0) return CLT_OK;
    CLT_CHECK_CL(ctx, clEnqueueMarkerWithWaitList(ctx->compute, 0, NULL, &marker), "marker");
    CLT_CHECK_CL(ctx, clFlush(ctx->compute), "clFlush");
    cl_int err = upload ? clEnqueueWriteBuffer(ctx->transfer, t->buf->mem, CL_FALSE,
                                               t->offset * es, bytes, host, 1, &marker, &ev)
                        : clEnqueueReadBuffer(ctx->transfer, t->buf->mem, CL_FALSE,
                                              t->offset * es, bytes, host, 1, &marker, &ev);
    CLT_CHECK_CL(ctx, err, upload ? "clEnqueueWriteBuffer (host to device)"
                                  : "clEnqueueReadBuffer (device to host)");
    if (upload)
        CLT_CHECK_CL(ctx, clEnqueueBarrierWithWaitList(ctx->compute, 1, &ev, NULL), "barrier");
    CLT_CHECK_CL(ctx, clFlush(ctx->transfer), "clFlush");
    if (ctx->profiling && clRetainEvent(ev) == CL_SUCCESS)
        clt__profile_event(ctx, upload ? "host to device" : "device to host",
                           upload ? CLT_PROFILE_UPLOAD : CLT_PROFILE_DOWNLOAD, bytes, ev);
    if (blocking) CLT_TRY(clt_ctx_wait(ctx, CLT_WAIT_READ, 1, &ev));
    if (done) {
        *done = ev;
        ev = NULL;
    }
fail:
    if (marker) clReleaseEvent(marker);
    if (ev) clReleaseEvent(ev);
    return st;
}

clt_status clt_tensor_write(clt_tensor *t, const void *src, bool blocking, cl_event *done)
{
    /* the host memory is only read: the cast serves transfer()'s two directions */
    return transfer(t, (void *)src, true, blocking, done);
}

clt_status clt_tensor_read(const clt_tensor *t, void *dst, bool blocking, cl_event *done)
{
    return transfer(t, dst, false, blocking, done);
}

clt_status clt_pinned_create(clt_pinned **out, clt_ctx *ctx, size_t bytes)
{
    clt_status st = CLT_OK;
    clt_pinned *p = NULL;
    cl_int err = CL_SUCCESS;
    *out = NULL;
    CLT_ALLOC(ctx, p, 1);
    CLT_TRY(clt__buffer_alloc(ctx, bytes, CLT_MEM_STAGING,
                              CL_MEM_ALLOC_HOST_PTR | CL_MEM_READ_WRITE, &p->buf));
    p->ptr = clEnqueueMapBuffer(ctx->transfer, p->buf->mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE,
                                0, p->buf->bytes, 0, NULL, NULL, &err);
    CLT_CHECK_CL(ctx, err, "clEnqueueMapBuffer (pinned host buffer)");
    ctx->stats.host_waits[CLT_WAIT_SETUP]++;
    ctx->stats.host_waits_total++;
    p->ctx = ctx;
    p->bytes = bytes;
    atomic_fetch_add(&clt__live_pinned, 1);
    *out = p;
    p = NULL;
fail:
    if (p) {
        clt__buffer_release(p->buf);
        free(p);
    }
    return st;
}

void *clt_pinned_ptr(clt_pinned *p) { return p->ptr; }
size_t clt_pinned_size(const clt_pinned *p) { return p->bytes; }

void clt_pinned_free(clt_pinned *p)
{
    if (!p) return;
    clt_ctx *ctx = p->ctx;
    cl_event ev = NULL;
    if (clEnqueueUnmapMemObject(ctx->transfer, p->buf->mem, p->ptr, 0, NULL, &ev) == CL_SUCCESS) {
        clWaitForEvents(1, &ev);
        clReleaseEvent(ev);
    }
    clt__buffer_release(p->buf);
    free(p);
    atomic_fetch_sub(&clt__live_pinned, 1);
}
