/* Event-based profiling: events recorded at enqueue time are folded into a per-name table as
 * they complete (checked without waiting whenever many are pending), or all at once by
 * clt_profile_collect; and the printed table. */
#include "runtime/profile_internal.h"

#include "runtime/internal.h"

#include <string.h>

#define PENDING_HARVEST 1024 /* check completed events once this many are pending */

static struct clt__profile_row *row_for(struct clt__profiler *p, const char *name,
                                        clt_profile_kind kind)
{
    for (int i = 0; i < p->nrows; i++)
        if (p->rows[i].r.kind == kind && strcmp(p->rows[i].r.name, name) == 0)
            return &p->rows[i];
    if (p->nrows == p->cap_rows) {
        int cap = p->cap_rows ? 2 * p->cap_rows : 32;
        struct clt__profile_row *g = realloc(p->rows, (size_t)cap * sizeof *g);
        if (!g) return NULL;
        p->rows = g;
        p->cap_rows = cap;
    }
    struct clt__profile_row *r = &p->rows[p->nrows++];
    memset(r, 0, sizeof *r);
    snprintf(r->r.name, sizeof r->r.name, "%s", name);
    r->r.kind = kind;
    return r;
}

static bool end_of(cl_event ev, cl_ulong *end)
{
    return clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof *end, end, NULL) ==
           CL_SUCCESS;
}

/* Folds a completed event into its row and releases it. */
static void fold(struct clt__profiler *p, struct clt__pending *e)
{
    cl_ulong start = 0, end = 0;
    struct clt__profile_row *r = row_for(p, e->name, e->kind);
    if (e->kind == CLT_PROFILE_DATA_WAIT) {
        cl_ulong last = 0, ready = 0, u = 0;
        bool ok = r && end_of(e->ev, &ready);
        for (int i = 0; i < 2 && e->after[i]; i++) {
            ok = ok && end_of(e->after[i], &u);
            if (u > last) last = u;
            clReleaseEvent(e->after[i]);
        }
        if (ok) {
            r->r.calls++;
            r->r.total_ms += last > ready ? (double)(last - ready) * 1e-6 : 0.0;
        }
        clReleaseEvent(e->ev);
        return;
    }
    if (r && clGetEventProfilingInfo(e->ev, CL_PROFILING_COMMAND_START, sizeof start, &start,
                                     NULL) == CL_SUCCESS &&
        clGetEventProfilingInfo(e->ev, CL_PROFILING_COMMAND_END, sizeof end, &end, NULL) ==
            CL_SUCCESS) {
        r->r.calls++;
        r->r.total_ms += end > start ? (double)(end - start) * 1e-6 : 0.0;
        r->r.bytes += (double)e->bytes;
    }
    clReleaseEvent(e->ev);
}

static bool done(cl_event ev)
{
    cl_int status = CL_QUEUED;
    clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
    return status == CL_COMPLETE || status < 0;
}

/* Folds the events that have completed, keeping the others; never waits. */
static void harvest(struct clt__profiler *p)
{
    int kept = 0;
    for (int i = 0; i < p->npending; i++) {
        const struct clt__pending *e = &p->pending[i];
        if (done(e->ev) && (!e->after[0] || done(e->after[0])) &&
            (!e->after[1] || done(e->after[1])))
            fold(p, &p->pending[i]);
        else p->pending[kept++] = p->pending[i];
    }
    p->npending = kept;
}

static struct clt__pending *push(clt_ctx *ctx, cl_event ev);

void clt__profile_event(clt_ctx *ctx, const char *name, clt_profile_kind kind, size_t bytes,
                        cl_event ev)
{
    struct clt__pending *e = push(ctx, ev);
    if (!e) return;
    snprintf(e->name, sizeof e->name, "%s", name);
    e->kind = kind;
    e->bytes = bytes;
}

void clt__profile_data_wait(clt_ctx *ctx, const char *name, cl_event ready, cl_uint n,
                            const cl_event *uploads)
{
    struct clt__pending *e = push(ctx, ready);
    if (!e) return;
    snprintf(e->name, sizeof e->name, "%s", name);
    e->kind = CLT_PROFILE_DATA_WAIT;
    for (cl_uint i = 0; i < n && i < 2; i++)
        if (clRetainEvent(uploads[i]) == CL_SUCCESS) e->after[i] = uploads[i];
}

/* A new pending entry owning ev, or NULL (ev released) when out of memory: profiling is best
 * effort and never fails a step. */
static struct clt__pending *push(clt_ctx *ctx, cl_event ev)
{
    struct clt__profiler *p = &ctx->prof;
    if (p->npending >= PENDING_HARVEST) harvest(p);
    if (p->npending == p->cap_pending) {
        int cap = p->cap_pending ? 2 * p->cap_pending : 256;
        struct clt__pending *g = realloc(p->pending, (size_t)cap * sizeof *g);
        if (!g) {
            clReleaseEvent(ev);
            return NULL;
        }
        p->pending = g;
        p->cap_pending = cap;
    }
    struct clt__pending *e = &p->pending[p->npending++];
    memset(e, 0, sizeof *e);
    e->ev = ev;
    return e;
}

void clt__profile_wall(clt_ctx *ctx, const char *name, double ms)
{
    struct clt__profile_row *r = row_for(&ctx->prof, name, CLT_PROFILE_WALL);
    if (!r) return;
    r->r.calls++;
    r->r.total_ms += ms;
}

clt_status clt_profile_collect(clt_ctx *ctx)
{
    struct clt__profiler *p = &ctx->prof;
    if (!ctx->profiling || p->npending == 0) return CLT_OK;
    clt_status st = clt_ctx_finish(ctx, CLT_WAIT_TIMING);
    for (int i = 0; i < p->npending; i++) fold(p, &p->pending[i]);
    p->npending = 0;
    return st;
}

static int by_total(const void *a, const void *b)
{
    double x = ((const struct clt__profile_row *)a)->r.total_ms,
           y = ((const struct clt__profile_row *)b)->r.total_ms;
    return (x < y) - (x > y);
}

int clt_profile_rows(const clt_ctx *ctx, struct clt_profile_row *rows, int max)
{
    const struct clt__profiler *p = &ctx->prof;
    qsort(p->rows, (size_t)p->nrows, sizeof *p->rows, by_total);
    for (int i = 0; i < p->nrows && i < max; i++) rows[i] = p->rows[i].r;
    return p->nrows;
}

clt_status clt_profile_print(clt_ctx *ctx, FILE *f)
{
    clt_status st = clt_profile_collect(ctx);
    struct clt__profiler *p = &ctx->prof;
    double device_ms = 0;
    qsort(p->rows, (size_t)p->nrows, sizeof *p->rows, by_total);
    for (int i = 0; i < p->nrows; i++) /* idle time is not device time */
        if (p->rows[i].r.kind != CLT_PROFILE_DATA_WAIT) device_ms += p->rows[i].r.total_ms;
    /* the title on its own line; the header's columns line up with the rows' */
    fprintf(f, "profile (%s):\n  %-40s %8s %11s %10s %6s %12s %8s\n", ctx->dev.device_name,
            "name", "calls", "total ms", "mean us", "share", "bytes", "GB/s");
    for (int i = 0; i < p->nrows; i++) {
        const struct clt_profile_row *r = &p->rows[i].r;
        const char *tag = r->kind == CLT_PROFILE_UPLOAD     ? " [upload]"
                          : r->kind == CLT_PROFILE_DOWNLOAD ? " [download]"
                          : r->kind == CLT_PROFILE_WALL     ? " [wall]"
                          : r->kind == CLT_PROFILE_DATA_WAIT ? " [compute idle]"
                                                             : "";
        char name[64];
        snprintf(name, sizeof name, "%s%s", r->name, tag);
        fprintf(f, "  %-40s %8ld %11.2f %10.1f %5.1f%%", name, r->calls, r->total_ms,
                r->calls ? 1e3 * r->total_ms / (double)r->calls : 0.0,
                device_ms > 0 && r->kind != CLT_PROFILE_DATA_WAIT ? 100.0 * r->total_ms / device_ms
                                                                  : 0.0);
        if (r->bytes > 0)
            fprintf(f, " %12.0f %8.2f", r->bytes,
                    r->total_ms > 0 ? r->bytes / (r->total_ms * 1e6) : 0.0);
        fputc('\n', f);
    }
    fprintf(f, "  %-40s %8s %11.2f  (kernels, copies and wall-timed GEMMs)\n", "total", "",
            device_ms);
    return st;
}

void clt__profile_free(clt_ctx *ctx)
{
    struct clt__profiler *p = &ctx->prof;
    for (int i = 0; i < p->npending; i++) {
        clReleaseEvent(p->pending[i].ev);
        for (int k = 0; k < 2; k++)
            if (p->pending[i].after[k]) clReleaseEvent(p->pending[i].after[k]);
    }
    free(p->pending);
    free(p->rows);
    memset(p, 0, sizeof *p);
}
