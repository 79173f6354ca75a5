/* Runtime compilation of the embedded cl/ sources: assembly (defines, common.cl, the op files),
 * the in-memory cache per ctx, the on-disk binary cache with validation and atomic writes, and
 * the kernel cache and 1-D launch helper used by the ops. */
#include "runtime/program_internal.h"

#include "runtime/ctx_internal.h"
#include "runtime/internal.h"
#include "runtime/profile_internal.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct clt__program_entry {
    struct clt__program_entry *next;
    char *key; /* files + '\n' + options */
    cl_program program;
};

struct clt__kernel_entry {
    struct clt__kernel_entry *next;
    cl_program program;
    char *name;
    cl_kernel kernel;
};

#define CACHE_MAGIC "CLTBIN01"
/* A cached binary larger than this is a miss, never read (device binaries are a few MiB). */
#define CACHE_FILE_MAX ((size_t)256 << 20)
/* A .cl file in CLTRAIN_KERNEL_DIR larger than this is not read (the embedded copy is used). */
#define SOURCE_FILE_MAX ((size_t)16 << 20)
struct cache_header {
    char magic[8];
    uint64_t key_lo, key_hi; /* two 64-bit hashes of the key material */
    uint64_t binary_len;
    uint64_t binary_sum;    /* hash of the binary */
};

/* ---- sources ------------------------------------------------------------------------------ */

const char *clt_program_source(const char *stem, size_t *len)
{
    for (const struct clt__cl_source *s = clt__cl_sources; s->name; s++) {
        if (strcmp(s->name, stem) == 0) {
            if (len) *len = s->len;
            return s->data;
        }
    }
    return NULL;
}

/* Appends `n` bytes to a growing string. */
static clt_status append(clt_ctx *ctx, char **buf, size_t *len, size_t *cap, const char *s,
                         size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t ncap = (*len + n + 1) * 2;
        char *g = realloc(*buf, ncap);
        if (!g) return clt__fail(ctx, CLT_ERR_HOST_MEMORY, "out of host memory building source");
        *buf = g;
        *cap = ncap;
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = '\0';
    return CLT_OK;
}

/* Appends the source of one stem: $CLTRAIN_KERNEL_DIR/<stem>.cl if that folder is set and has
 * the file, else the embedded copy. */
static clt_status append_stem(clt_ctx *ctx, const char *stem, char **buf, size_t *len,
                              size_t *cap)
{
    const char *dir = getenv("CLTRAIN_KERNEL_DIR");
    if (dir && *dir) {
        char path[4096];
        size_t n = 0;
        snprintf(path, sizeof path, "%s/%s.cl", dir, stem);
        char *text = clt__read_file(path, SOURCE_FILE_MAX, &n);
        if (text) {
            clt_status st = append(ctx, buf, len, cap, text, n);
            free(text);
            return st;
        }
    }
    size_t n = 0;
    const char *src = clt_program_source(stem, &n);
    if (!src)
        return clt__fail(ctx, CLT_ERR_IO, "no OpenCL source cl/%s.cl (embedded or in "
                                          "CLTRAIN_KERNEL_DIR)", stem);
    return append(ctx, buf, len, cap, src, n);
}

/* common.cl, then each comma-separated stem, each starting at its own line 1. */
static clt_status assemble(clt_ctx *ctx, const char *files, char **out)
{
    clt_status st = CLT_OK;
    char *buf = NULL, stem[64];
    size_t len = 0, cap = 0;
    CLT_TRY(append_stem(ctx, "common", &buf, &len, &cap));
    for (const char *p = files; *p;) {
        size_t n = strcspn(p, ",");
        if (n == 0 || n >= sizeof stem)
            CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "bad program name \"%s\"", files);
        memcpy(stem, p, n);
        stem[n] = '\0';
        char line[96];
        int w = snprintf(line, sizeof line, "\n#line 1 \"%s.cl\"\n", stem); /* logs name it */
        CLT_TRY(append(ctx, &buf, &len, &cap, line, (size_t)w));
        CLT_TRY(append_stem(ctx, stem, &buf, &len, &cap));
        p += n;
        if (*p == ',') p++;
    }
    *out = buf;
    buf = NULL;
fail:
    free(buf);
    return st;
}

clt_status clt_program_assemble(const char *files, char **out)
{
    *out = NULL;
    return assemble(NULL, files, out);
}

/* Device-specific defines every program sees, then the caller's options. */
void clt_program_options(const clt_device_info *dev, const char *options, char *dst, size_t n)
{
    size_t wg = dev->max_work_group < 256 ? dev->max_work_group : 256;
    snprintf(dst, n, "-cl-std=CL1.2 -DCLT_DEVICE_%s=1 -DCLT_HAS_FP16=%d -DCLT_HAS_FP64=%d "
                     "-DCLT_WG=%zu %s",
             dev->type == CLT_DEVICE_GPU   ? "GPU"
             : dev->type == CLT_DEVICE_CPU ? "CPU"
                                           : "OTHER",
             dev->fp16, dev->fp64, wg ? wg : 1, options ? options : "");
}

/* ---- disk cache --------------------------------------------------------------------------- */

static int mkdir_p(const char *path)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(tmp, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

bool clt__cache_dir_resolve(const char *given, char *dir, size_t n)
{
    const char *env = getenv("CLTRAIN_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"),
               *home = getenv("HOME");
    int len;
    if (given && *given) len = snprintf(dir, n, "%s", given);
    else if (env && *env) len = snprintf(dir, n, "%s", env);
    else if (xdg && *xdg) len = snprintf(dir, n, "%s/cltrain", xdg);
    else if (home && *home) len = snprintf(dir, n, "%s/.cache/cltrain", home);
    else return false; /* nowhere to keep it */
    if (len < 0 || (size_t)len >= n) return false;
    return mkdir_p(dir) == 0; /* an unwritable cache only costs time */
}

clt_status clt__program_cache_init(clt_ctx *ctx, const struct clt_ctx_params *p)
{
    const char *off = getenv("CLTRAIN_CACHE");
    bool on = p->disk_cache == 1 || (p->disk_cache < 0 && !(off && strcmp(off, "0") == 0));
    if (!on) return CLT_OK;
    char dir[4096];
    if (!clt__cache_dir_resolve(p->cache_dir, dir, sizeof dir)) return CLT_OK; /* compile every time */
    ctx->cache_dir = strdup(dir);
    return ctx->cache_dir ? CLT_OK : clt__fail(ctx, CLT_ERR_HOST_MEMORY, "out of host memory");
}

const char *clt_ctx_cache_dir(const clt_ctx *ctx)
{
    return ctx->cache_dir;
}

static void cache_key(const clt_ctx *ctx, const char *source, const char *options,
                      uint64_t key[2])
{
    const char *parts[] = {"cltrain-program-v1", source, options, ctx->dev.device_name,
                           ctx->dev.driver_version, ctx->dev.platform_version};
    uint64_t lo = CLT__FNV_SEED, hi = 0x84222325cbf29ce4ull;
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        size_t n = strlen(parts[i]) + 1; /* the terminator separates the parts */
        lo = clt__hash(lo, parts[i], n);
        hi = clt__hash(hi, parts[i], n);
        hi = clt__hash(hi, &lo, sizeof lo);
    }
    key[0] = lo;
    key[1] = hi;
}

static void cache_path(const clt_ctx *ctx, const uint64_t key[2], char *dst, size_t n)
{
    snprintf(dst, n, "%s/%016llx%016llx.clbin", ctx->cache_dir, (unsigned long long)key[0],
             (unsigned long long)key[1]);
}

bool clt__cache_file_ok(const unsigned char *data, size_t len, const uint64_t key[2])
{
    struct cache_header h;
    if (len < sizeof h) return false;
    memcpy(&h, data, sizeof h);
    return memcmp(h.magic, CACHE_MAGIC, 8) == 0 && h.key_lo == key[0] && h.key_hi == key[1] &&
           h.binary_len == len - sizeof h && h.binary_len > 0 &&
           h.binary_sum == clt__hash(CLT__FNV_SEED, data + sizeof h, (size_t)h.binary_len);
}

/* Loads and builds a cached binary; returns NULL (and counts a reject if a file was there)
 * when there is none or it does not validate. */
static cl_program cache_load(clt_ctx *ctx, const uint64_t key[2], const char *options)
{
    char path[4200];
    size_t len = 0;
    cl_program prog = NULL;
    cache_path(ctx, key, path, sizeof path);
    /* Only a regular file of a sane size is read: a directory, a FIFO (never opened for a
     * blocking read) or a huge (e.g. sparse) file is a miss, and the build writes a fresh one. */
    unsigned char *data = (unsigned char *)clt__read_file(path, CACHE_FILE_MAX, &len);
    if (!data) {
        if (errno != ENOENT) ctx->stats.disk_cache_rejects++;
        return NULL;
    }
    if (clt__cache_file_ok(data, len, key)) {
        const unsigned char *bin = data + sizeof(struct cache_header);
        size_t bin_len = len - sizeof(struct cache_header);
        cl_int bin_status = CL_SUCCESS, err = CL_SUCCESS;
        prog = clCreateProgramWithBinary(ctx->context, 1, &ctx->dev.device, &bin_len, &bin,
                                         &bin_status, &err);
        if (err != CL_SUCCESS || bin_status != CL_SUCCESS) {
            if (prog) clReleaseProgram(prog);
            prog = NULL;
        } else if (clBuildProgram(prog, 1, &ctx->dev.device, options, NULL, NULL) != CL_SUCCESS) {
            clReleaseProgram(prog);
            prog = NULL;
        }
    }
    if (!prog) ctx->stats.disk_cache_rejects++;
    free(data);
    return prog;
}

/* Best effort: a cache that cannot be written only costs a compile next time. */
static void cache_store(clt_ctx *ctx, const uint64_t key[2], cl_program prog)
{
    size_t bin_len = 0;
    unsigned char *bin = NULL;
    char path[4200], tmp[4300];
    FILE *f = NULL;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof bin_len, &bin_len, NULL) !=
            CL_SUCCESS ||
        bin_len == 0)
        return;
    if (!(bin = malloc(bin_len))) return;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) != CL_SUCCESS)
        goto done;
    struct cache_header h;
    memcpy(h.magic, CACHE_MAGIC, 8);
    h.key_lo = key[0];
    h.key_hi = key[1];
    h.binary_len = bin_len;
    h.binary_sum = clt__hash(CLT__FNV_SEED, bin, bin_len);
    cache_path(ctx, key, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (!(f = fopen(tmp, "wb"))) goto done;
    bool ok = fwrite(&h, sizeof h, 1, f) == 1 && fwrite(bin, 1, bin_len, f) == bin_len &&
              fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) remove(tmp);
done:
    free(bin);
}

/* ---- building ----------------------------------------------------------------------------- */

static clt_status build_failure(clt_ctx *ctx, cl_program prog, cl_int err, const char *files)
{
    size_t n = 0;
    char *log = NULL;
    clGetProgramBuildInfo(prog, ctx->dev.device, CL_PROGRAM_BUILD_LOG, 0, NULL, &n);
    if (n > 0 && (log = malloc(n + 1))) {
        if (clGetProgramBuildInfo(prog, ctx->dev.device, CL_PROGRAM_BUILD_LOG, n, log, NULL) !=
            CL_SUCCESS)
            n = 0;
        log[n] = '\0';
    }
    clt_status st = clt__fail(ctx, CLT_ERR_BUILD, "building OpenCL program \"%s\" for %s failed "
                                                  "with %s (%d); compiler log:\n%s",
                              files, ctx->dev.device_name, clt_cl_error_name(err), err,
                              log && *log ? log : "(empty)");
    free(log);
    return st;
}

/* $CLTRAIN_PROGRAM_LOG: every program a ctx builds or loads is appended as "files<TAB>options"
 * (one write per line, so concurrent processes do not interleave within a line). The portability
 * guard checks that what real runs build is in clt_ops_program_variants' list. Best effort. */
static void log_program(const char *files, const char *options)
{
    const char *path = getenv("CLTRAIN_PROGRAM_LOG");
    if (!path || !*path) return;
    char line[2048];
    int n = snprintf(line, sizeof line, "%s\t%s\n", files, options ? options : "");
    if (n <= 0 || (size_t)n >= sizeof line) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    fwrite(line, 1, (size_t)n, f);
    fclose(f);
}

static clt_status get_program(clt_ctx *ctx, const char *files, const char *options,
                              cl_program *out)
{
    clt_status st = CLT_OK;
    char *source = NULL, *key = NULL, opts[2048];
    cl_program prog = NULL;
    struct clt__program_entry *e = NULL;
    size_t flen = strlen(files), klen = flen + strlen(options ? options : "") + 2;

    for (e = ctx->programs; e; e = e->next) { /* key "files\noptions", compared in place */
        if (strncmp(e->key, files, flen) == 0 && e->key[flen] == '\n' &&
            strcmp(e->key + flen + 1, options ? options : "") == 0) {
            *out = e->program;
            return CLT_OK;
        }
    }
    CLT_ALLOC(ctx, key, klen);
    snprintf(key, klen, "%s\n%s", files, options ? options : "");
    CLT_TRY(assemble(ctx, files, &source));
    clt_program_options(&ctx->dev, options, opts, sizeof opts);

    uint64_t hkey[2];
    cache_key(ctx, source, opts, hkey);
    if (ctx->cache_dir && (prog = cache_load(ctx, hkey, opts))) {
        ctx->stats.disk_cache_hits++;
    } else {
        cl_int err = CL_SUCCESS;
        const char *srcs[] = {source};
        prog = clCreateProgramWithSource(ctx->context, 1, srcs, NULL, &err);
        CLT_CHECK_CL(ctx, err, "clCreateProgramWithSource");
        ctx->stats.compiles++;
        err = clBuildProgram(prog, 1, &ctx->dev.device, opts, NULL, NULL);
        if (err != CL_SUCCESS) {
            st = build_failure(ctx, prog, err, files);
            goto fail;
        }
        if (ctx->cache_dir) cache_store(ctx, hkey, prog);
    }
    CLT_ALLOC(ctx, e, 1);
    e->key = key;
    e->program = prog;
    e->next = ctx->programs;
    ctx->programs = e;
    atomic_fetch_add(&clt__live_programs, 1);
    log_program(files, options);
    *out = prog;
    key = NULL;
    prog = NULL;
fail:
    if (prog) clReleaseProgram(prog);
    free(key);
    free(source);
    return st;
}

clt_status clt_program_build(clt_ctx *ctx, const char *files, const char *options)
{
    cl_program prog;
    return get_program(ctx, files, options, &prog);
}

clt_status clt__kernel(clt_ctx *ctx, const char *files, const char *options, const char *kernel,
                       cl_kernel *out)
{
    clt_status st = CLT_OK;
    cl_program prog = NULL;
    struct clt__kernel_entry *e = NULL;
    CLT_TRY(get_program(ctx, files, options, &prog));
    for (e = ctx->kernels; e; e = e->next) {
        if (e->program == prog && strcmp(e->name, kernel) == 0) {
            *out = e->kernel;
            return CLT_OK;
        }
    }
    cl_int err = CL_SUCCESS;
    CLT_ALLOC(ctx, e, 1);
    e->kernel = clCreateKernel(prog, kernel, &err);
    if (err != CL_SUCCESS) {
        st = clt__fail(ctx, CLT_ERR_OPENCL, "kernel \"%s\" in program \"%s\": %s (%d)", kernel,
                       files, clt_cl_error_name(err), err);
        goto fail;
    }
    if (!(e->name = strdup(kernel))) CLT_FAIL(ctx, CLT_ERR_HOST_MEMORY, "out of host memory");
    e->program = prog;
    e->next = ctx->kernels;
    ctx->kernels = e;
    *out = e->kernel;
    e = NULL;
fail:
    if (e) {
        if (e->kernel) clReleaseKernel(e->kernel);
        free(e);
    }
    return st;
}

clt_status clt__set_args(clt_ctx *ctx, cl_kernel k, cl_uint first, const struct clt__arg *args,
                         size_t n)
{
    for (size_t i = 0; i < n; i++) {
        cl_uint index = first + (cl_uint)i;
        cl_int err = clSetKernelArg(k, index, args[i].size, args[i].value);
        if (err == CL_SUCCESS) continue;
        char name[64] = "?", what[160];
        if (clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, sizeof name, name, NULL) != CL_SUCCESS)
            snprintf(name, sizeof name, "?");
        snprintf(what, sizeof what, "kernel %s: clSetKernelArg(%u, %zu bytes)", name, index,
                 args[i].size);
        return clt__fail_cl(ctx, err, what);
    }
    return CLT_OK;
}

void clt__program_cache_free(clt_ctx *ctx)
{
    for (struct clt__kernel_entry *k = ctx->kernels, *next; k; k = next) {
        next = k->next;
        clReleaseKernel(k->kernel);
        free(k->name);
        free(k);
    }
    for (struct clt__program_entry *p = ctx->programs, *next; p; p = next) {
        next = p->next;
        clReleaseProgram(p->program);
        free(p->key);
        free(p);
        atomic_fetch_sub(&clt__live_programs, 1);
    }
    ctx->kernels = NULL;
    ctx->programs = NULL;
    free(ctx->cache_dir);
    ctx->cache_dir = NULL;
}

clt_status clt__enqueue(clt_ctx *ctx, cl_kernel k, size_t global, size_t local, const char *what)
{
    return clt__enqueue_nd(ctx, k, 1, &global, &local, what);
}

clt_status clt__enqueue_nd(clt_ctx *ctx, cl_kernel k, cl_uint dims, const size_t *global,
                           const size_t *local, const char *what)
{
    clt_status st = CLT_OK;
    cl_event ev = NULL;
    /* dimensions 1 and 2 in slices of at most CLT__MAX_GROUPS_YZ groups, at global offsets */
    size_t step[3] = {1, 1, 1}, off[3] = {0, 0, 0}, part[3] = {1, 1, 1};
    cl_int err = CL_SUCCESS;
    for (cl_uint d = 0; d < dims; d++) {
        if (global[d] == 0) return CLT_OK;
        step[d] = d > 0 && local && global[d] / local[d] > CLT__MAX_GROUPS_YZ
                      ? (size_t)CLT__MAX_GROUPS_YZ * local[d]
                      : global[d];
    }
    const size_t n1 = dims > 1 ? global[1] : 1, n2 = dims > 2 ? global[2] : 1;
    for (off[2] = 0; off[2] < n2; off[2] += step[2])
        for (off[1] = 0; off[1] < n1; off[1] += step[1]) {
            for (cl_uint d = 0; d < dims; d++)
                part[d] = global[d] - off[d] < step[d] ? global[d] - off[d] : step[d];
            err = clEnqueueNDRangeKernel(ctx->compute, k, dims, off, part, local, 0, NULL,
                                         ctx->profiling ? &ev : NULL);
            CLT_CHECK_CL(ctx, err, what);
            if (ev) {
                clt__profile_event(ctx, what, CLT_PROFILE_KERNEL, 0, ev);
                ev = NULL;
            }
        }
    if (ctx->sync_debug) {
        ctx->stats.host_waits[CLT_WAIT_DEBUG]++;
        ctx->stats.host_waits_total++;
        err = clFinish(ctx->compute);
        if (err != CL_SUCCESS)
            CLT_FAIL(ctx, CLT_ERR_OPENCL, "kernel %s failed on %s (--sync-debug): %s (%d)", what,
                     ctx->dev.device_name, clt_cl_error_name(err), err);
    }
fail:
    return st;
}

size_t clt__local_size(clt_ctx *ctx, cl_kernel k)
{
    size_t local = ctx->dev.max_work_group < 256 ? ctx->dev.max_work_group : 256, kmax = 0;
    if (clGetKernelWorkGroupInfo(k, ctx->dev.device, CL_KERNEL_WORK_GROUP_SIZE, sizeof kmax,
                                 &kmax, NULL) == CL_SUCCESS &&
        kmax > 0 && kmax < local)
        local = kmax;
    return local ? local : 1;
}

clt_status clt__launch_1d(clt_ctx *ctx, cl_kernel k, size_t n, const char *what)
{
    size_t wg = clt__local_size(ctx, k);
    return clt__enqueue(ctx, k, (n + wg - 1) / wg * wg, wg, what);
}

clt_status clt__launch_rows(clt_ctx *ctx, cl_kernel k, size_t per_row, size_t rows,
                            const char *what)
{
    if (per_row == 0 || rows == 0) return CLT_OK;
    const size_t wg = clt__local_size(ctx, k), l0 = per_row < wg ? per_row : wg;
    const size_t global[2] = {(per_row + l0 - 1) / l0 * l0, rows}, local[2] = {l0, 1};
    return clt__enqueue_nd(ctx, k, 2, global, local, what);
}
