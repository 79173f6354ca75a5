/* Device buffers and their accounting: allocation against the cap, the out-of-memory message
 * (requested, current, peak, cap, device total), touching new buffers so that lazy drivers fail
 * at allocation time, and size parsing and formatting. */
#include "runtime/alloc_internal.h"

#include "runtime/internal.h"

#include "cltrain/alloc.h"

#include <ctype.h>
#include <math.h>
#include <string.h>

clt_status clt_parse_size(const char *s, uint64_t *out)
{
    /* DIGITS ["." DIGITS] [K|M|G|T ["i"]] ["B"], case-insensitive units: the digits go through
     * the library's strict integer parser (no sign, spaces, hex or exponent); a fraction needs a
     * unit ("1.5" bytes is refused) and is rounded to the nearest byte. */
    char whole[24], frac[24] = "";
    size_t nw = strspn(s ? s : "", "0123456789"), nf = 0;
    const char *end = s ? s + nw : NULL;
    uint64_t w = 0, f = 0, mult = 1, bytes = 0;
    double fscale = 1.0;
    if (!s || nw == 0 || nw >= sizeof whole) return CLT_ERR_INVALID_ARG;
    memcpy(whole, s, nw);
    whole[nw] = '\0';
    if (*end == '.') {
        nf = strspn(end + 1, "0123456789");
        if (nf == 0 || nf >= sizeof frac) return CLT_ERR_INVALID_ARG;
        memcpy(frac, end + 1, nf);
        frac[nf] = '\0';
        end += 1 + nf;
    }
    switch (toupper((unsigned char)*end)) {
    case 'K': mult = 1ull << 10; end++; break;
    case 'M': mult = 1ull << 20; end++; break;
    case 'G': mult = 1ull << 30; end++; break;
    case 'T': mult = 1ull << 40; end++; break;
    default: break;
    }
    if (mult > 1 && toupper((unsigned char)*end) == 'I') end++; /* "MiB" */
    if (toupper((unsigned char)*end) == 'B') end++;             /* "MB", "12B" */
    if (*end != '\0' || !clt__parse_u64(whole, 0, UINT64_MAX / mult, &w))
        return CLT_ERR_INVALID_ARG;
    bytes = w * mult;
    if (nf) {
        if (mult == 1 || !clt__parse_u64(frac, 0, UINT64_MAX, &f)) return CLT_ERR_INVALID_ARG;
        for (size_t i = 0; i < nf; i++) fscale *= 10.0;
        uint64_t part = (uint64_t)llround((double)f / fscale * (double)mult); /* <= mult */
        if (part > UINT64_MAX - bytes) return CLT_ERR_INVALID_ARG;
        bytes += part;
    }
    *out = bytes;
    return CLT_OK;
}

void clt_format_bytes(uint64_t bytes, char *dst, size_t n)
{
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0) snprintf(dst, n, "%llu B", (unsigned long long)bytes);
    else snprintf(dst, n, "%.1f %s", v, units[u]);
}

const char *clt_mem_category_name(clt_mem_category c)
{
    static const char *names[CLT_MEM__COUNT] = {
        "parameters", "gradients", "optimizer state", "activations",
        "staging",    "workspace", "data",            "other"};
    return (unsigned)c < CLT_MEM__COUNT ? names[c] : "unknown";
}

struct clt_mem_stats clt_ctx_mem_stats(const clt_ctx *ctx)
{
    struct clt_mem_stats s;
    memset(&s, 0, sizeof s);
    s.current = ctx->mem_total_current;
    s.peak = ctx->mem_peak;
    memcpy(s.by_category, ctx->mem_current, sizeof s.by_category);
    memcpy(s.peak_by_category, ctx->mem_peak_by_cat, sizeof s.peak_by_category);
    s.cap = ctx->mem_cap;
    s.cap_from_user = ctx->mem_cap_from_user;
    s.device_total = ctx->dev.global_mem;
    return s;
}

void clt_ctx_mem_reset_peak(clt_ctx *ctx)
{
    ctx->mem_peak = ctx->mem_total_current;
    memcpy(ctx->mem_peak_by_cat, ctx->mem_current, sizeof ctx->mem_peak_by_cat);
}

void clt_mem_report(const clt_ctx *ctx, char *dst, size_t n)
{
    char total[32], cap[32], cur[32], peak[32];
    size_t used = 0;
    clt_format_bytes(ctx->dev.global_mem, total, sizeof total);
    clt_format_bytes(ctx->mem_cap, cap, sizeof cap);
    clt_format_bytes(ctx->mem_total_current, cur, sizeof cur);
    clt_format_bytes(ctx->mem_peak, peak, sizeof peak);
    int w = snprintf(dst, n, "device memory on %s: total %s, cap %s%s; allocated %s, peak %s\n",
                     ctx->dev.device_name, total, cap,
                     ctx->mem_cap_from_user ? " (CLTRAIN_MAX_MEMORY)" : " (the device's)", cur,
                     peak);
    used = w > 0 ? (size_t)w : 0;
    for (int c = 0; c < CLT_MEM__COUNT && used < n; c++) {
        if (!ctx->mem_peak_by_cat[c]) continue;
        clt_format_bytes(ctx->mem_current[c], cur, sizeof cur);
        clt_format_bytes(ctx->mem_peak_by_cat[c], peak, sizeof peak);
        w = snprintf(dst + used, n - used, "  %-16s %12s now, %12s peak\n",
                     clt_mem_category_name((clt_mem_category)c), cur, peak);
        used += w > 0 ? (size_t)w : 0;
    }
}

static clt_status out_of_memory(clt_ctx *ctx, size_t bytes, clt_mem_category cat,
                                const char *why)
{
    char req[32], cur[32], peak[32], cap[32], total[32];
    clt_format_bytes(bytes, req, sizeof req);
    clt_format_bytes(ctx->mem_total_current, cur, sizeof cur);
    clt_format_bytes(ctx->mem_peak, peak, sizeof peak);
    clt_format_bytes(ctx->mem_cap, cap, sizeof cap);
    clt_format_bytes(ctx->dev.global_mem, total, sizeof total);
    return clt__fail(ctx, CLT_ERR_OUT_OF_MEMORY,
                     "out of device memory: %s requested for %s (%zu bytes; %s); %s allocated "
                     "now, peak %s, cap %s%s, device total %s on %s",
                     req, clt_mem_category_name(cat), bytes, why, cur, peak, cap,
                     ctx->mem_cap_from_user ? " (CLTRAIN_MAX_MEMORY)" : "", total,
                     ctx->dev.device_name);
}

clt_status clt__buffer_alloc(clt_ctx *ctx, size_t bytes, clt_mem_category cat, cl_mem_flags flags,
                             struct clt__buffer **out)
{
    clt_status st = CLT_OK;
    struct clt__buffer *b = NULL;
    CLT_ASSERT((unsigned)cat < CLT_MEM__COUNT);
    *out = NULL;
    size_t alloc_bytes = bytes ? bytes : 4; /* OpenCL has no empty buffers */
    if (ctx->mem_total_current + alloc_bytes > ctx->mem_cap)
        return out_of_memory(ctx, alloc_bytes, cat, "over the cap");
    if (alloc_bytes > ctx->dev.max_alloc)
        return out_of_memory(ctx, alloc_bytes, cat, "larger than the device's largest buffer");

    CLT_ALLOC(ctx, b, 1);
    cl_int err = CL_SUCCESS;
    b->mem = clCreateBuffer(ctx->context, flags, alloc_bytes, NULL, &err);
    if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES ||
        err == CL_OUT_OF_HOST_MEMORY || err == CL_INVALID_BUFFER_SIZE) {
        st = out_of_memory(ctx, alloc_bytes, cat, clt_cl_error_name(err));
        goto fail;
    }
    CLT_CHECK_CL(ctx, err, "clCreateBuffer");
    if (!(flags & CL_MEM_ALLOC_HOST_PTR)) {
        /* Touch the buffer so that drivers which allocate lazily fail now, not mid-step. */
        const cl_uchar zero = 0;
        err = clEnqueueFillBuffer(ctx->compute, b->mem, &zero, 1, 0, alloc_bytes, 0, NULL, NULL);
        if (err != CL_SUCCESS) {
            st = err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES
                     ? out_of_memory(ctx, alloc_bytes, cat, clt_cl_error_name(err))
                     : clt__fail_cl(ctx, err, "clEnqueueFillBuffer (touching a new buffer)");
            goto fail;
        }
    }
    b->ctx = ctx;
    b->bytes = alloc_bytes;
    b->cat = cat;
    b->refs = 1;
    ctx->mem_current[cat] += alloc_bytes;
    ctx->mem_total_current += alloc_bytes;
    if (ctx->mem_total_current > ctx->mem_peak) ctx->mem_peak = ctx->mem_total_current;
    if (ctx->mem_current[cat] > ctx->mem_peak_by_cat[cat])
        ctx->mem_peak_by_cat[cat] = ctx->mem_current[cat];
    atomic_fetch_add(&clt__live_buffers, 1);
    *out = b;
    b = NULL;
fail:
    if (b) {
        if (b->mem) clReleaseMemObject(b->mem);
        free(b);
    }
    return st;
}

void clt__buffer_retain(struct clt__buffer *b)
{
    b->refs++;
}

void clt__buffer_release(struct clt__buffer *b)
{
    if (!b || --b->refs > 0) return;
    clt_ctx *ctx = b->ctx;
    ctx->mem_current[b->cat] -= b->bytes;
    ctx->mem_total_current -= b->bytes;
    clReleaseMemObject(b->mem);
    free(b);
    atomic_fetch_sub(&clt__live_buffers, 1);
}
