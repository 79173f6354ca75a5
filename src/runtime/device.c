/* Device discovery, the selector grammar and the `auto` choice (pure functions over
 * descriptors), and the ctx: context, compute and transfer queues, counters and host waits. */
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include "runtime/ctx_internal.h"
#include "runtime/internal.h"
#include "runtime/profile_internal.h"
#include "runtime/program_internal.h"

#include "cltrain/alloc.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

atomic_long clt__live_ctxs, clt__live_buffers, clt__live_tensors, clt__live_pinned,
    clt__live_programs;

struct clt__live_objects clt__live_objects(void)
{
    struct clt__live_objects o = {
        .ctxs = atomic_load(&clt__live_ctxs),
        .buffers = atomic_load(&clt__live_buffers),
        .tensors = atomic_load(&clt__live_tensors),
        .pinned = atomic_load(&clt__live_pinned),
        .programs = atomic_load(&clt__live_programs),
    };
    return o;
}

const char *clt_device_type_name(clt_device_type t)
{
    switch (t) {
    case CLT_DEVICE_GPU: return "gpu";
    case CLT_DEVICE_ACCELERATOR: return "accelerator";
    case CLT_DEVICE_CPU: return "cpu";
    case CLT_DEVICE_OTHER: return "other";
    }
    return "other";
}

/* ---- discovery ---------------------------------------------------------------------------- */

static void info_string(cl_device_id d, cl_device_info what, char *dst, size_t n)
{
    dst[0] = '\0';
    if (clGetDeviceInfo(d, what, n, dst, NULL) != CL_SUCCESS) dst[0] = '\0';
    dst[n - 1] = '\0';
}

static bool has_extension(cl_device_id d, const char *ext)
{
    size_t len = 0;
    if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &len) != CL_SUCCESS || len == 0)
        return false;
    char *s = malloc(len + 1);
    if (!s) return false;
    bool found = false;
    if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, len, s, NULL) == CL_SUCCESS) {
        s[len] = '\0';
        size_t el = strlen(ext);
        for (char *p = strstr(s, ext); p && !found; p = strstr(p + 1, ext))
            found = (p == s || p[-1] == ' ') && (p[el] == ' ' || p[el] == '\0');
    }
    free(s);
    return found;
}

static void describe(clt_device_info *info, cl_platform_id p, cl_device_id d)
{
    info->platform = p;
    info->device = d;
    clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof info->platform_name, info->platform_name, NULL);
    clGetPlatformInfo(p, CL_PLATFORM_VERSION, sizeof info->platform_version,
                      info->platform_version, NULL);
    info->platform_name[sizeof info->platform_name - 1] = '\0';
    info->platform_version[sizeof info->platform_version - 1] = '\0';
    info_string(d, CL_DEVICE_NAME, info->device_name, sizeof info->device_name);
    info_string(d, CL_DEVICE_VENDOR, info->vendor, sizeof info->vendor);
    info_string(d, CL_DRIVER_VERSION, info->driver_version, sizeof info->driver_version);
    info_string(d, CL_DEVICE_OPENCL_C_VERSION, info->opencl_c_version,
                sizeof info->opencl_c_version);

    cl_device_type type = 0;
    cl_uint cu = 0, clock = 0;
    cl_ulong gmem = 0, maxalloc = 0, lmem = 0;
    size_t wg = 0;
    cl_device_fp_config dbl = 0;
    clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
    clGetDeviceInfo(d, CL_DEVICE_MAX_CLOCK_FREQUENCY, sizeof clock, &clock, NULL);
    clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof gmem, &gmem, NULL);
    clGetDeviceInfo(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof maxalloc, &maxalloc, NULL);
    clGetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_SIZE, sizeof lmem, &lmem, NULL);
    clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
    clGetDeviceInfo(d, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof dbl, &dbl, NULL);

    if (type & CL_DEVICE_TYPE_GPU) info->type = CLT_DEVICE_GPU;
    else if (type & CL_DEVICE_TYPE_ACCELERATOR) info->type = CLT_DEVICE_ACCELERATOR;
    else if (type & CL_DEVICE_TYPE_CPU) info->type = CLT_DEVICE_CPU;
    else info->type = CLT_DEVICE_OTHER;
    info->compute_units = cu;
    info->clock_mhz = clock;
    info->global_mem = gmem;
    info->max_alloc = maxalloc;
    info->local_mem = lmem;
    info->max_work_group = wg;
    info->fp16 = has_extension(d, "cl_khr_fp16");
    info->fp64 = dbl != 0 || has_extension(d, "cl_khr_fp64");
    /* The one platform quirk, kept here so no other module knows platforms by name: Oclgrind's
     * queues and event maps have no locks, and enqueues and flushes from two threads corrupt
     * its heap (backtraces and a standalone reproduction in tests/data/test_loader.c). */
    info->serial_runtime = strstr(info->platform_name, "Oclgrind") != NULL;
}

clt_status clt_device_list(clt_device_info **out, int *n)
{
    clt_status st = CLT_OK;
    cl_platform_id *plats = NULL;
    cl_device_id *devs = NULL;
    clt_device_info *list = NULL;
    int count = 0;
    cl_uint np = 0;
    *out = NULL;
    *n = 0;

    cl_int err = clGetPlatformIDs(0, NULL, &np);
    /* -1001 is CL_PLATFORM_NOT_FOUND_KHR: the ICD loader found no platform at all */
    if (err == -1001 || np == 0) return CLT_OK;
    CLT_CHECK_CL(NULL, err, "clGetPlatformIDs");
    CLT_ALLOC(NULL, plats, np);
    CLT_CHECK_CL(NULL, clGetPlatformIDs(np, plats, NULL), "clGetPlatformIDs");

    for (cl_uint p = 0; p < np; p++) {
        cl_uint nd = 0;
        err = clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd);
        if (err == CL_DEVICE_NOT_FOUND || nd == 0) continue;
        CLT_CHECK_CL(NULL, err, "clGetDeviceIDs");
        free(devs);
        devs = NULL;
        CLT_ALLOC(NULL, devs, nd);
        CLT_CHECK_CL(NULL, clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, nd, devs, NULL),
                     "clGetDeviceIDs");
        clt_device_info *grown = realloc(list, (size_t)(count + (int)nd) * sizeof *list);
        if (!grown) CLT_FAIL(NULL, CLT_ERR_HOST_MEMORY, "out of host memory listing devices");
        list = grown;
        for (cl_uint d = 0; d < nd; d++) {
            clt_device_info *info = &list[count];
            memset(info, 0, sizeof *info);
            info->index = count;
            info->platform_index = (int)p;
            info->device_index = (int)d;
            describe(info, plats[p], devs[d]);
            count++;
        }
    }
    *out = list;
    *n = count;
    list = NULL;
fail:
    free(list);
    free(devs);
    free(plats);
    return st;
}

/* ---- selection (pure) ---------------------------------------------------------------------- */

const char *clt_device_default_selector(void)
{
    const char *env = getenv("CLTRAIN_DEVICE");
    return env && *env ? env : "auto";
}

static bool better(const clt_device_info *a, const clt_device_info *b)
{
    uint64_t sa = (uint64_t)a->compute_units * a->clock_mhz;
    uint64_t sb = (uint64_t)b->compute_units * b->clock_mhz;
    if (sa != sb) return sa > sb;
    return a->global_mem > b->global_mem;
}

static int best_of_type(const clt_device_info *devs, int n, clt_device_type t)
{
    int best = -1;
    for (int i = 0; i < n; i++)
        if (devs[i].type == t && (best < 0 || better(&devs[i], &devs[best]))) best = i;
    return best;
}

static bool all_digits(const char *s, size_t len)
{
    if (len == 0) return false;
    for (size_t i = 0; i < len; i++)
        if (!isdigit((unsigned char)s[i])) return false;
    return true;
}

static bool contains_nocase(const char *hay, const char *needle)
{
    size_t nl = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < nl && hay[i] &&
               tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == nl) return true;
    }
    return nl == 0;
}

/* What to install for a selector that matched nothing, fitting what is present: PoCL only
 * when no CPU device is listed and the selector could have meant one (cpu, auto, a name);
 * for a GPU, an accelerator or a name, the vendor's OpenCL driver. Indices and P:D get none:
 * the list says what exists. */
static const char *install_hint(const clt_device_info *devs, int n, const char *selector)
{
    bool cpu = false, pocl = false;
    for (int i = 0; i < n; i++) {
        cpu = cpu || devs[i].type == CLT_DEVICE_CPU;
        pocl = pocl || contains_nocase(devs[i].platform_version, "pocl");
    }
    bool wants_cpu = strcasecmp(selector, "cpu") == 0;
    bool wants_pocl = contains_nocase(selector, "pocl");
    bool by_number = all_digits(selector, strlen(selector)) || strchr(selector, ':');
    if ((wants_cpu && !cpu) || (wants_pocl && !pocl))
        return "; for a CPU device install PoCL: apt-get install pocl-opencl-icd";
    if (by_number || wants_cpu || wants_pocl) return "";
    return "; a device missing from this list needs its vendor's OpenCL driver (an ICD file in "
           "/etc/OpenCL/vendors)";
}

static clt_status no_device(const clt_device_info *devs, int n, const char *selector)
{
    char found[4096];
    size_t used = 0;
    found[0] = '\0';
    for (int i = 0; i < n && used < sizeof found; i++) {
        int w = snprintf(found + used, sizeof found - used, "%s[%d] %s: %s (%s)", i ? "; " : "",
                         devs[i].index, devs[i].platform_name, devs[i].device_name,
                         clt_device_type_name(devs[i].type));
        if (w < 0) break;
        used += (size_t)w;
    }
    if (n == 0)
        return clt__fail(NULL, CLT_ERR_NO_DEVICE,
                         "no OpenCL platform or device found (selector \"%s\"); for a CPU "
                         "device install PoCL: apt-get install pocl-opencl-icd; for a GPU, its "
                         "vendor's OpenCL driver",
                         selector);
    return clt__fail(NULL, CLT_ERR_NO_DEVICE,
                     "no OpenCL device matches \"%s\"; found %d: %s; selectors: auto, gpu, cpu, "
                     "accelerator, N, P:D or part of a name%s",
                     selector, n, found, install_hint(devs, n, selector));
}

/* A selector, parsed once for both the single choice and the list of matches. */
struct selector {
    char text[256]; /* blanks trimmed */
    enum { SEL_TYPE, SEL_INDEX, SEL_PD, SEL_NAME, SEL_NONE } kind;
    clt_device_type type; /* SEL_TYPE (auto resolved to the first type present) */
    int64_t index, p, d;  /* SEL_INDEX, SEL_PD */
};

static void parse_selector(const clt_device_info *devs, int n, const char *selector,
                           struct selector *out)
{
    char *sel = out->text;
    const char *s = selector ? selector : "auto";
    while (isspace((unsigned char)*s)) s++;
    snprintf(sel, sizeof out->text, "%s", s);
    for (size_t len = strlen(sel); len > 0 && isspace((unsigned char)sel[len - 1]); len--)
        sel[len - 1] = '\0';
    out->kind = SEL_TYPE;
    out->index = out->p = out->d = -1;
    if (sel[0] == '\0' || strcasecmp(sel, "auto") == 0) {
        /* the first type present of: GPU, accelerator, CPU, other */
        const clt_device_type order[] = {CLT_DEVICE_GPU, CLT_DEVICE_ACCELERATOR, CLT_DEVICE_CPU,
                                         CLT_DEVICE_OTHER};
        out->kind = SEL_NONE;
        for (size_t i = 0; i < 4 && out->kind == SEL_NONE; i++)
            if (best_of_type(devs, n, order[i]) >= 0) {
                out->kind = SEL_TYPE;
                out->type = order[i];
            }
    } else if (strcasecmp(sel, "gpu") == 0) {
        out->type = CLT_DEVICE_GPU;
    } else if (strcasecmp(sel, "cpu") == 0) {
        out->type = CLT_DEVICE_CPU;
    } else if (strcasecmp(sel, "accelerator") == 0) {
        out->type = CLT_DEVICE_ACCELERATOR;
    } else if (all_digits(sel, strlen(sel))) {
        /* Digits only: an index, never a name; one too large for any list matches nothing. */
        out->kind = clt__parse_i64(sel, 0, INT_MAX, &out->index) ? SEL_INDEX : SEL_NONE;
    } else {
        char *colon = strchr(sel, ':');
        if (colon && all_digits(sel, (size_t)(colon - sel)) &&
            all_digits(colon + 1, strlen(colon + 1))) {
            /* "P:D", both digits only ("1:0junk" or "-1:0" fall to the name match below). */
            *colon = '\0';
            bool ok = clt__parse_i64(sel, 0, INT_MAX, &out->p) &&
                      clt__parse_i64(colon + 1, 0, INT_MAX, &out->d);
            *colon = ':';
            out->kind = ok ? SEL_PD : SEL_NONE;
        } else {
            out->kind = SEL_NAME;
        }
    }
}

static bool selector_matches(const struct selector *s, const clt_device_info *d)
{
    switch (s->kind) {
    case SEL_TYPE:
        return d->type == s->type;
    case SEL_INDEX:
        return d->index == s->index;
    case SEL_PD:
        return d->platform_index == s->p && d->device_index == s->d;
    case SEL_NAME:
        return contains_nocase(d->device_name, s->text) ||
               contains_nocase(d->platform_name, s->text) ||
               /* PoCL says "PoCL" only in its version ("OpenCL 3.0 PoCL 3.1 ...") */
               contains_nocase(d->platform_version, s->text);
    case SEL_NONE:
        break;
    }
    return false;
}

clt_status clt_device_select(const clt_device_info *devs, int n, const char *selector,
                             int *chosen)
{
    struct selector s;
    parse_selector(devs, n, selector, &s);
    *chosen = -1;
    int pick = -1;
    if (s.kind == SEL_TYPE) {
        pick = best_of_type(devs, n, s.type);
    } else {
        /* an index or P:D matches one device; a name: the first in listing order */
        for (int i = 0; i < n && pick < 0; i++)
            if (selector_matches(&s, &devs[i])) pick = i;
    }
    if (pick < 0) return no_device(devs, n, s.text);
    *chosen = pick;
    return CLT_OK;
}

clt_status clt_device_matches(const clt_device_info *devs, int n, const char *selector, int *idx,
                              int *count)
{
    struct selector s;
    parse_selector(devs, n, selector, &s);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (selector_matches(&s, &devs[i])) idx[k++] = i;
    /* A type (auto too): best first, as clt_device_select ranks them; an insertion sort keeps
     * ties in listing order. Names, indices and P:D stay in listing order. */
    for (int i = 1; s.kind == SEL_TYPE && i < k; i++)
        for (int j = i; j > 0 && better(&devs[idx[j]], &devs[idx[j - 1]]); j--) {
            int tmp = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = tmp;
        }
    *count = k;
    return k > 0 ? CLT_OK : no_device(devs, n, s.text);
}

/* ---- ctx ----------------------------------------------------------------------------------- */

struct clt_ctx_params clt_ctx_default_params(void)
{
    struct clt_ctx_params p = {
        .device = NULL,
        .profiling = false,
        .sync_debug = false,
        .cache_dir = NULL,
        .disk_cache = -1,
        .max_memory = 0,
    };
    return p;
}

static clt_status create_queue(clt_ctx *ctx, cl_command_queue *q)
{
    cl_int err = CL_SUCCESS;
    cl_command_queue_properties props = ctx->profiling ? CL_QUEUE_PROFILING_ENABLE : 0;
    /* The 1.2 call on every platform: clCreateCommandQueueWithProperties (2.0) is not exported
     * by Apple's 1.2 framework, so even a runtime-guarded call would stop the binary linking
     * there; 2.0+ platforms still provide clCreateCommandQueue
     * (tests/portability/cl_symbols.sh). */
    *q = clCreateCommandQueue(ctx->context, ctx->dev.device, props, &err);
    return err == CL_SUCCESS ? CLT_OK : clt__fail_cl(ctx, err, "creating a command queue");
}

/* Environment variables that the layers above read later (at a ctx's first use of what they
 * choose), checked here so that a bad value fails the ctx's creation, as CLTRAIN_MAX_MEMORY
 * does, and not a run whose data has loaded. Unset or empty: no choice. Values ignore case. */
static const struct env_choice {
    const char *name, *values[4], *expected;
} env_choices[] = {
    {"CLTRAIN_GEMM", {"own", "clblast", "auto", NULL}, "own, clblast or auto"},
};

static clt_status check_env_choices(void)
{
    for (size_t i = 0; i < sizeof env_choices / sizeof env_choices[0]; i++) {
        const struct env_choice *e = &env_choices[i];
        const char *v = getenv(e->name);
        bool ok = !v || !*v;
        for (int k = 0; !ok && e->values[k]; k++) ok = strcasecmp(v, e->values[k]) == 0;
        if (!ok)
            return clt__fail(NULL, CLT_ERR_INVALID_ARG, "%s=\"%s\": expected %s", e->name, v,
                             e->expected);
    }
    return CLT_OK;
}

clt_status clt_ctx_create(clt_ctx **out, const struct clt_ctx_params *params)
{
    clt_status st = CLT_OK;
    clt_device_info *devs = NULL;
    clt_ctx *ctx = NULL;
    int n = 0, pick = -1;
    struct clt_ctx_params p = params ? *params : clt_ctx_default_params();
    *out = NULL;

    CLT_TRY(clt_device_list(&devs, &n));
    CLT_TRY(clt_device_select(devs, n, p.device ? p.device : clt_device_default_selector(),
                              &pick));
    CLT_ALLOC(NULL, ctx, 1);
    atomic_fetch_add(&clt__live_ctxs, 1);
    ctx->dev = devs[pick];
    ctx->profiling = p.profiling;
    ctx->sync_debug = p.sync_debug;

    uint64_t cap = p.max_memory;
    const char *env_cap = getenv("CLTRAIN_MAX_MEMORY");
    if (cap == 0 && env_cap && *env_cap) {
        if (clt_parse_size(env_cap, &cap) != CLT_OK || cap == 0)
            CLT_FAIL(NULL, CLT_ERR_INVALID_ARG,
                     "CLTRAIN_MAX_MEMORY=\"%s\": expected a size such as 512M, 2G or 1048576",
                     env_cap);
    }
    CLT_TRY(check_env_choices());
    ctx->mem_cap_from_user = cap != 0;
    ctx->mem_cap = cap != 0 && cap < ctx->dev.global_mem ? cap : ctx->dev.global_mem;

    cl_int err = CL_SUCCESS;
    cl_context_properties cp[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)ctx->dev.platform,
                                  0};
    ctx->context = clCreateContext(cp, 1, &ctx->dev.device, NULL, NULL, &err);
    if (err != CL_SUCCESS) {
        st = clt__fail_cl(NULL, err, "creating an OpenCL context");
        goto fail;
    }
    CLT_TRY(create_queue(ctx, &ctx->compute));
    CLT_TRY(create_queue(ctx, &ctx->transfer));
    CLT_TRY(clt__program_cache_init(ctx, &p));
    *out = ctx;
    ctx = NULL;
fail:
    if (ctx) {
        /* Keep the failure's message for the caller: clt_ctx_free does not touch it. */
        clt_ctx_free(ctx);
    }
    free(devs);
    return st;
}

void clt_ctx_free(clt_ctx *ctx)
{
    if (!ctx) return;
    if (ctx->compute) clFinish(ctx->compute);
    if (ctx->transfer) clFinish(ctx->transfer);
    if (ctx->ops.state) ctx->ops.release(ctx, ctx->ops.state);
    clt__program_cache_free(ctx);
    clt__profile_free(ctx);
    if (ctx->compute) clReleaseCommandQueue(ctx->compute);
    if (ctx->transfer) clReleaseCommandQueue(ctx->transfer);
    if (ctx->context) clReleaseContext(ctx->context);
    free(ctx);
    atomic_fetch_sub(&clt__live_ctxs, 1);
}

const char *clt_ctx_errmsg(const clt_ctx *ctx)
{
    return ctx ? ctx->errmsg : clt_last_errmsg();
}

const clt_device_info *clt_ctx_device(const clt_ctx *ctx)
{
    return &ctx->dev;
}

cl_context clt_ctx_cl_context(const clt_ctx *ctx)
{
    return ctx->context;
}

cl_command_queue clt_ctx_compute_queue(const clt_ctx *ctx)
{
    return ctx->compute;
}

cl_command_queue clt_ctx_transfer_queue(const clt_ctx *ctx)
{
    return ctx->transfer;
}

bool clt_ctx_profiling(const clt_ctx *ctx)
{
    return ctx->profiling;
}

struct clt_ctx_stats clt_ctx_stats(const clt_ctx *ctx)
{
    return ctx->stats;
}

const char *clt_wait_reason_name(clt_wait_reason r)
{
    static const char *names[CLT_WAIT__COUNT] = {"log", "eval", "save", "read",
                                                 "timing", "debug", "setup", "loader",
                                                 "reduce"};
    return (unsigned)r < CLT_WAIT__COUNT ? names[r] : "unknown";
}

static void count_wait(clt_ctx *ctx, clt_wait_reason why)
{
    CLT_ASSERT((unsigned)why < CLT_WAIT__COUNT);
    ctx->stats.host_waits[why]++;
    ctx->stats.host_waits_total++;
}

clt_status clt_ctx_finish(clt_ctx *ctx, clt_wait_reason why)
{
    clt_status st = CLT_OK;
    count_wait(ctx, why);
    CLT_CHECK_CL(ctx, clFinish(ctx->transfer), "waiting for the transfer queue");
    CLT_CHECK_CL(ctx, clFinish(ctx->compute), "waiting for the compute queue");
fail:
    return st;
}

clt_status clt__ctx_pace(clt_ctx *ctx, cl_event ev)
{
    clt_status st = CLT_OK;
    cl_int status = CL_COMPLETE;
    CLT_CHECK_CL(ctx, clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status,
                                     &status, NULL),
                 "querying a training step's progress");
    if (status == CL_COMPLETE) return CLT_OK;
    ctx->stats.paced++;
    CLT_CHECK_CL(ctx, clWaitForEvents(1, &ev), "waiting for an earlier training step");
fail:
    return st;
}

clt_status clt_ctx_wait(clt_ctx *ctx, clt_wait_reason why, cl_uint n, const cl_event *events)
{
    clt_status st = CLT_OK;
    if (n == 0) return CLT_OK;
    count_wait(ctx, why);
    CLT_CHECK_CL(ctx, clWaitForEvents(n, events), "waiting for device work");
fail:
    return st;
}
