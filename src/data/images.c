/* Folders of images as data sets (images:DIR): the class folders and their files listed in a
 * fixed order, every file decoded (image.c) into one (n, C, H, W) u8 tensor, the splits (the
 * train/ and test/ folders, or a seeded per-class hold-out), and the decoded tensor cached on
 * disk so that a second run skips the decoding. Also the images `predict` reads. */
#include "data/data_internal.h"
#include "io/crc32c.h"
#include "runtime/internal.h"

#include "cltrain/outfile.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CACHE_MAGIC "CLTIMG1\n"

/* One image file of the set: its path, the part of it after DIR/ (the cache key and the
 * split's draw use it), its class and folder (0 train, 1 test), and what stat says. */
struct entry {
    char *path, *rel;
    int32_t label;
    unsigned char root;
    long long size, mtime_ns;
};

struct listing {
    struct entry *e;
    size_t n, cap;
    char **names; /* the classes, sorted */
    int nclasses;
};

/* The decoded set: kept[i] for every file (0: skipped as bad), the kept files' pixels in file
 * order, (nsamples, C, H, W). */
struct decoded {
    unsigned char *kept, *px;
    size_t nsamples, H, W, skipped;
    int C;
    bool cached;
};

static void listing_free(struct listing *L)
{
    for (size_t i = 0; i < L->n; i++) {
        free(L->e[i].path);
        free(L->e[i].rel);
    }
    for (int c = 0; c < L->nclasses; c++) free(L->names[c]);
    free(L->e);
    free(L->names);
    memset(L, 0, sizeof *L);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s/%s", a, b);
    return s;
}

static bool is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* The names in `dir` that are folders (dirs true) or anything else (dirs false), sorted
 * bytewise; names starting with '.' are left out. */
static clt_status list_names(const char *dir, bool dirs, char ***out, size_t *n)
{
    clt_status st = CLT_OK;
    DIR *d = NULL;
    struct dirent *de;
    char **names = NULL, *path = NULL;
    size_t cap = 0;
    *n = 0;
    errno = 0;
    if (!(d = opendir(dir))) CLT_FAIL(NULL, CLT_ERR_IO, "%s: cannot open: %s", dir, strerror(errno));
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        if (!(path = join(dir, de->d_name))) CLT_FAIL(NULL, CLT_ERR_HOST_MEMORY, "out of host memory");
        bool sub = is_dir(path);
        free(path);
        path = NULL;
        if (sub != dirs) continue;
        if (*n == cap) {
            size_t ncap = cap ? 2 * cap : 64;
            char **grown = realloc(names, ncap * sizeof *grown);
            if (!grown) CLT_FAIL(NULL, CLT_ERR_HOST_MEMORY, "out of host memory");
            names = grown;
            cap = ncap;
        }
        if (!(names[*n] = strdup(de->d_name))) CLT_FAIL(NULL, CLT_ERR_HOST_MEMORY, "out of host memory");
        (*n)++;
    }
    if (*n) qsort(names, *n, sizeof *names, cmp_str);
fail:
    if (d) closedir(d);
    if (st != CLT_OK) {
        for (size_t i = 0; i < *n; i++) free(names[i]);
        free(names);
        names = NULL;
        *n = 0;
    }
    *out = names;
    return st;
}

static void free_names(char **names, size_t n)
{
    if (!names) return;
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
}

static clt_status add_entry(struct listing *L, const char *path, const char *rel, int32_t label,
                            unsigned char root)
{
    clt_status st = CLT_OK;
    struct stat sb;
    if (L->n == L->cap) {
        size_t ncap = L->cap ? 2 * L->cap : 256;
        struct entry *grown = realloc(L->e, ncap * sizeof *grown);
        if (!grown) CLT_FAIL(NULL, CLT_ERR_HOST_MEMORY, "out of host memory");
        L->e = grown;
        L->cap = ncap;
    }
    struct entry *e = &L->e[L->n];
    memset(e, 0, sizeof *e);
    e->label = label;
    e->root = root;
    if (stat(path, &sb) == 0) {
        e->size = (long long)sb.st_size;
        e->mtime_ns = (long long)sb.st_mtim.tv_sec * 1000000000ll + sb.st_mtim.tv_nsec;
    }
    e->path = strdup(path);
    e->rel = strdup(rel);
    L->n++;
    if (!e->path || !e->rel) CLT_FAIL(NULL, CLT_ERR_HOST_MEMORY, "out of host memory");
fail:
    return st;
}

/* Every file of the class folder root/<cls>, sorted; an empty class folder is an error. */
static clt_status add_class(struct listing *L, const char *root, const char *rootname,
                            const char *cls, int32_t label, unsigned char which)
{
    clt_status st = CLT_OK;
    char *dir = join(root, cls), **files = NULL, *path = NULL, *rel = NULL;
    size_t n = 0;
    if (!dir) CLT_FAIL(NULL, CLT_ERR_HOST_MEMORY, "out of host memory");
    CLT_TRY(list_names(dir, false, &files, &n));
    if (n == 0)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: an empty class folder: every class needs at least one "
                 "image (remove the folder or add images)", dir);
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(rootname) + strlen(cls) + strlen(files[i]) + 3;
        path = join(dir, files[i]);
        rel = malloc(len);
        if (!path || !rel) CLT_FAIL(NULL, CLT_ERR_HOST_MEMORY, "out of host memory");
        snprintf(rel, len, "%s%s%s/%s", rootname, *rootname ? "/" : "", cls, files[i]);
        CLT_TRY(add_entry(L, path, rel, label, which));
        free(path);
        free(rel);
        path = rel = NULL;
    }
fail:
    free(path);
    free(rel);
    free(dir);
    free_names(files, n);
    return st;
}

/* The files of DIR: with train/, train/<class>/FILE (the classes) then test/<class>/FILE (each a
 * training class); else DIR/<class>/FILE. */
static clt_status list_set(const char *dir, bool split_layout, struct listing *L)
{
    clt_status st = CLT_OK;
    char *train = NULL, *test = NULL, **names = NULL, **tnames = NULL;
    size_t n = 0, tn = 0;
    train = split_layout ? join(dir, "train") : strdup(dir);
    if (!train) CLT_FAIL(NULL, CLT_ERR_HOST_MEMORY, "out of host memory");
    CLT_TRY(list_names(train, true, &names, &n));
    if (n == 0)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: no class folders: expected %s/<class>/<image files>, "
                 "one folder per class", train, train);
    if (n > CLT_DATA_MAX_CLASSES)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: %zu class folders, more than %d", train, n,
                 CLT_DATA_MAX_CLASSES);
    for (size_t c = 0; c < n; c++)
        CLT_TRY(add_class(L, train, split_layout ? "train" : "", names[c], (int32_t)c, 0));
    if (split_layout && is_dir(test = join(dir, "test"))) {
        CLT_TRY(list_names(test, true, &tnames, &tn));
        for (size_t c = 0; c < tn; c++) {
            char **hit = bsearch(&tnames[c], names, n, sizeof *names, cmp_str);
            if (!hit)
                CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s/%s: a test class that %s does not have (the "
                         "classes are the training folders' names)", test, tnames[c], train);
            CLT_TRY(add_class(L, test, "test", tnames[c], (int32_t)(hit - names), 1));
        }
    }
    L->names = names;
    L->nclasses = (int)n;
    names = NULL;
fail:
    free_names(names, n);
    free_names(tnames, tn);
    free(train);
    free(test);
    return st;
}

/* ---- decoding ---------------------------------------------------------------------------- */

/* What every image becomes; fixed_c / fixed_size false: taken from the first image, and an
 * image that differs is a bad file. */
struct target {
    int C;
    size_t H, W;
    bool fixed_c, fixed_size;
    const char *first; /* the image that set what was not fixed */
};

/* Sets what the target leaves open from the first image; later images must agree. */
static clt_status fit_target(const char *path, const struct clt__image *im, struct target *t,
                             bool first)
{
    if (first) {
        if (!t->fixed_c) t->C = im->c;
        if (!t->fixed_size) {
            t->H = im->h;
            t->W = im->w;
        }
        t->first = path;
        return CLT_OK;
    }
    if (!t->fixed_c && im->c != t->C)
        return clt__fail(NULL, CLT_ERR_FORMAT, "%s: %s, but the first image, %s, is %s: give the "
                         "channel count (--channels 1 or 3) to convert every image", path,
                         im->c == 1 ? "grey" : "RGB", t->first, t->C == 1 ? "grey" : "RGB");
    if (!t->fixed_size && (im->h != t->H || im->w != t->W))
        return clt__fail(NULL, CLT_ERR_FORMAT, "%s: %zu x %zu pixels (W x H), but the first "
                         "image, %s, is %zu x %zu: give the size to resize every image to "
                         "(--image-size H,W)", path, im->w, im->h, t->first, t->W, t->H);
    return CLT_OK;
}

/* The buffer for n samples once the first image fixed (C, H, W); refused before allocating
 * when the set would be too large. */
static clt_status alloc_pixels(const char *path, size_t n, const struct target *t,
                               struct decoded *d)
{
    clt_status st = CLT_OK;
    double bytes = (double)n * (double)t->C * (double)t->H * (double)t->W;
    if (bytes > (double)CLT_DATA_IDX_MAX_BYTES)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: %zu images of %d x %zu x %zu would take more than "
                 "the %llu bytes a data set may hold", path, n, t->C, t->H, t->W,
                 (unsigned long long)CLT_DATA_IDX_MAX_BYTES);
    CLT_ALLOC(NULL, d->px, n * (size_t)t->C * t->H * t->W);
fail:
    return st;
}

/* Whether a failure of one file may be skipped: what is wrong with the file, not with us. */
static bool skippable(clt_status st)
{
    return st == CLT_ERR_FORMAT || st == CLT_ERR_IO;
}

/* Decodes the files into d, (nsamples, C, H, W) in file order: the first good image fixes
 * what the target leaves open and the buffer is sized for all files; a bad file fails, or is
 * skipped and counted with skip. */
static clt_status decode_files(char *const *paths, size_t n, struct target *t, bool skip,
                               struct decoded *d)
{
    clt_status st = CLT_OK;
    struct clt__image im = {0};
    CLT_ALLOC(NULL, d->kept, n);
    for (size_t i = 0; i < n; i++) {
        bool first = d->px == NULL;
        st = clt__image_decode(paths[i], &im);
        if (st == CLT_OK) st = fit_target(paths[i], &im, t, first);
        if (st != CLT_OK) {
            clt__image_free(&im);
            if (!skip || !skippable(st)) goto fail;
            st = CLT_OK;
            d->skipped++;
            continue;
        }
        if (first) CLT_TRY(alloc_pixels(paths[i], n, t, d));
        clt__image_to_chw(&im, t->C, t->H, t->W,
                          d->px + d->nsamples * (size_t)t->C * t->H * t->W);
        clt__image_free(&im);
        d->kept[i] = 1;
        d->nsamples++;
    }
    d->C = t->C;
    d->H = t->H;
    d->W = t->W;
fail:
    clt__image_free(&im);
    return st;
}

/* ---- the cache --------------------------------------------------------------------------- */

struct cache_head {
    char magic[8];
    uint32_t one, crc; /* one: 1 in the writer's byte order; crc: of the rest, crc 0 */
    uint64_t key[2], nfiles, nsamples, C, H, W, skipped;
};

static void fnv(uint64_t *h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h[0] = (h[0] ^ b[i]) * 0x100000001b3ull;
        h[1] = (h[1] ^ b[i]) * 0x100000001b3ull + 0x9e3779b97f4a7c15ull;
    }
}

/* The key: the options that change the pixels and every file's name, size and time. */
static void cache_key(const struct listing *L, const struct target *t, bool skip, uint64_t key[2])
{
    long long opts[5] = {t->fixed_c ? t->C : 0, t->fixed_size ? (long long)t->H : 0,
                         t->fixed_size ? (long long)t->W : 0, skip, L->nclasses};
    key[0] = 0xcbf29ce484222325ull;
    key[1] = 0x84222325cbf29ce4ull;
    fnv(key, CACHE_MAGIC, 8);
    fnv(key, opts, sizeof opts);
    for (size_t i = 0; i < L->n; i++) {
        const struct entry *e = &L->e[i];
        fnv(key, e->rel, strlen(e->rel) + 1);
        fnv(key, &e->size, sizeof e->size);
        fnv(key, &e->mtime_ns, sizeof e->mtime_ns);
        fnv(key, &e->label, sizeof e->label);
        fnv(key, &e->root, 1);
    }
}

/* The cache's two places: beside the data, and in the cache folder (NULL when none). */
static void cache_paths(const char *dir, const struct clt_data_params *p, const uint64_t key[2],
                        char *beside, char *other, size_t n)
{
    char cdir[4096];
    snprintf(beside, n, "%s/.cltrain-images-%016llx%016llx.cache", dir,
             (unsigned long long)key[0], (unsigned long long)key[1]);
    other[0] = '\0';
    if (clt__cache_dir_resolve(p->cache_dir, cdir, sizeof cdir))
        snprintf(other, n, "%s/images-%016llx%016llx.cache", cdir, (unsigned long long)key[0],
                 (unsigned long long)key[1]);
}

static uint32_t head_crc(struct cache_head h, const struct decoded *d, size_t nfiles, size_t F)
{
    h.crc = 0;
    uint32_t crc = clt__crc32c(0, &h, sizeof h);
    crc = clt__crc32c(crc, d->kept, nfiles);
    return clt__crc32c(crc, d->px, d->nsamples * F);
}

/* A cache file that matches key and the listing, whole and checked, into d; false otherwise
 * (a miss: the set is decoded again). */
static bool cache_read(const char *path, const uint64_t key[2], size_t nfiles, struct decoded *d)
{
    struct cache_head h;
    struct stat sb;
    bool ok = false;
    size_t kept = 0, F;
    uint64_t size = 0;
    int fd = -1;
    /* a FIFO at the cache path is a miss, refused before its open could block */
    if (clt__open_regular(path, "a cache file", &fd, &size) != CLT_OK) return false;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return false;
    }
    if (fstat(fileno(f), &sb) != 0 || fread(&h, sizeof h, 1, f) != 1 ||
        memcmp(h.magic, CACHE_MAGIC, 8) != 0 || h.one != 1 || h.key[0] != key[0] ||
        h.key[1] != key[1] || h.nfiles != nfiles || (h.C != 1 && h.C != 3) || h.H == 0 ||
        h.W == 0 || h.H > CLT_DATA_IMAGE_MAX_SIDE || h.W > CLT_DATA_IMAGE_MAX_SIDE ||
        h.nsamples > nfiles)
        goto done;
    F = (size_t)(h.C * h.H * h.W);
    if ((unsigned long long)sb.st_size != sizeof h + nfiles + h.nsamples * F) goto done;
    d->kept = malloc(nfiles ? nfiles : 1);
    d->px = malloc(h.nsamples > 0 ? h.nsamples * F : 1);
    if (!d->kept || !d->px || fread(d->kept, 1, nfiles, f) != nfiles ||
        fread(d->px, 1, h.nsamples * F, f) != h.nsamples * F)
        goto done;
    for (size_t i = 0; i < nfiles; i++) kept += d->kept[i] != 0;
    d->nsamples = (size_t)h.nsamples;
    d->C = (int)h.C;
    d->H = (size_t)h.H;
    d->W = (size_t)h.W;
    d->skipped = (size_t)h.skipped;
    ok = kept == h.nsamples && head_crc(h, d, nfiles, F) == h.crc;
done:
    fclose(f);
    if (!ok) {
        free(d->kept);
        free(d->px);
        memset(d, 0, sizeof *d);
    }
    d->cached = ok;
    return ok;
}

/* Writes d to path atomically (temporary file, sync, rename); false when it cannot. */
static bool cache_write(const char *path, const uint64_t key[2], size_t nfiles,
                        const struct decoded *d)
{
    struct cache_head h;
    clt_outfile *f = NULL;
    size_t F = (size_t)d->C * d->H * d->W;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, CACHE_MAGIC, 8);
    h.one = 1;
    h.key[0] = key[0];
    h.key[1] = key[1];
    h.nfiles = nfiles;
    h.nsamples = d->nsamples;
    h.C = (uint64_t)d->C;
    h.H = d->H;
    h.W = d->W;
    h.skipped = d->skipped;
    h.crc = head_crc(h, d, nfiles, F);
    if (clt_outfile_open(&f, path) != CLT_OK) return false;
    if (clt_outfile_write(f, &h, sizeof h) != CLT_OK ||
        clt_outfile_write(f, d->kept, nfiles) != CLT_OK ||
        clt_outfile_write(f, d->px, d->nsamples * F) != CLT_OK) {
        clt_outfile_discard(f);
        return false;
    }
    return clt_outfile_commit(f) == CLT_OK;
}

static bool cache_enabled(const struct clt_data_params *p)
{
    const char *off = getenv("CLTRAIN_CACHE");
    return p->image_cache && !(off && strcmp(off, "0") == 0);
}

/* d from the cache, else decoded from the files and then cached (beside the data, else in
 * the cache folder; a cache that cannot be written only costs time next run). */
static clt_status load_set(const char *dir, const struct listing *L,
                           const struct clt_data_params *p, struct decoded *d)
{
    clt_status st = CLT_OK;
    struct target t = {.C = p->channels, .H = p->image_h, .W = p->image_w,
                       .fixed_c = p->channels != 0, .fixed_size = p->image_h != 0};
    char **paths = NULL, beside[4608], other[4608];
    uint64_t key[2];
    bool cache = cache_enabled(p);
    cache_key(L, &t, p->skip_bad_images, key);
    if (cache) {
        cache_paths(dir, p, key, beside, other, sizeof beside);
        if (cache_read(beside, key, L->n, d) || (other[0] && cache_read(other, key, L->n, d)))
            return CLT_OK;
    }
    CLT_ALLOC(NULL, paths, L->n);
    for (size_t i = 0; i < L->n; i++) paths[i] = L->e[i].path;
    CLT_TRY(decode_files(paths, L->n, &t, p->skip_bad_images, d));
    if (d->nsamples == 0)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: none of its %zu files is a readable image", dir, L->n);
    if (cache && !cache_write(beside, key, L->n, d) && other[0]) cache_write(other, key, L->n, d);
fail:
    free(paths);
    return st;
}

/* ---- the splits -------------------------------------------------------------------------- */

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

struct draw {
    uint64_t h;
    size_t i;
};

static int cmp_draw(const void *a, const void *b)
{
    const struct draw *x = a, *y = b;
    return x->h < y->h ? -1 : x->h > y->h ? 1 : x->i < y->i ? -1 : x->i > y->i;
}

/* which[i] for the kept files: 0 train, 1 test. With val_split, of each class's kept files
 * round(val_split k) (at most k - 1) go to test: those with the smallest hash of (seed, path
 * below DIR), so a file's side depends on the seed and its name only. */
static clt_status assign_splits(const struct listing *L, const struct decoded *d,
                                const struct clt_data_params *p, unsigned char *which)
{
    clt_status st = CLT_OK;
    struct draw *dr = NULL;
    for (size_t i = 0; i < L->n; i++) which[i] = L->e[i].root;
    if (p->val_split <= 0) return CLT_OK;
    CLT_ALLOC(NULL, dr, L->n);
    for (size_t i = 0; i < L->n;) {
        size_t j = i, k = 0;
        while (j < L->n && L->e[j].label == L->e[i].label) {
            if (d->kept[j]) {
                uint64_t h[2] = {p->split_seed, ~p->split_seed};
                fnv(h, L->e[j].rel, strlen(L->e[j].rel));
                dr[k++] = (struct draw){mix64(h[0] ^ mix64(h[1])), j};
            }
            j++;
        }
        size_t m = (size_t)floor((double)p->val_split * (double)k + 0.5);
        if (k > 0 && m > k - 1) m = k - 1;
        qsort(dr, k, sizeof *dr, cmp_draw);
        for (size_t q = 0; q < m; q++) which[dr[q].i] = 1;
        i = j;
    }
fail:
    free(dr);
    return st;
}

static clt_status dup_names(char *const *names, int n, char ***out)
{
    clt_status st = CLT_OK;
    CLT_ALLOC(NULL, *out, (size_t)n);
    for (int c = 0; c < n; c++)
        if (!((*out)[c] = strdup(names[c]))) CLT_FAIL(NULL, CLT_ERR_HOST_MEMORY, "out of host memory");
fail:
    return st;
}

/* The split `want` of the set as a data set. */
static clt_status make_split(const struct listing *L, const struct decoded *d,
                             const unsigned char *which, unsigned char want, const char *source,
                             clt_dataset *out)
{
    clt_status st = CLT_OK;
    size_t F = (size_t)d->C * d->H * d->W, n = 0, s = 0;
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < L->n; i++) n += d->kept[i] && which[i] == want;
    out->n = n;
    out->features = F;
    out->sample_ndim = 3;
    out->sample_shape[0] = (size_t)d->C;
    out->sample_shape[1] = d->H;
    out->sample_shape[2] = d->W;
    out->classes = L->nclasses;
    out->task = CLT_TASK_CLASSIFICATION;
    out->input_scale = 1.0f / 255.0f;
    out->skipped = d->skipped;
    out->cached = d->cached;
    CLT_TRY(dup_names(L->names, L->nclasses, &out->class_names));
    if (n == 0) return CLT_OK;
    snprintf(out->source, sizeof out->source, "%s", source);
    CLT_ALLOC(NULL, out->u8, n * F);
    CLT_ALLOC(NULL, out->labels, n);
    n = 0;
    for (size_t i = 0; i < L->n; i++) {
        if (!d->kept[i]) continue;
        if (which[i] == want) {
            memcpy(out->u8 + n * F, d->px + s * F, F);
            out->labels[n++] = L->e[i].label;
        }
        s++;
    }
fail:
    return st;
}

/* Every class keeps a training image after bad files were skipped. */
static clt_status check_classes(const struct listing *L, const struct decoded *d,
                                const unsigned char *which, const char *train)
{
    clt_status st = CLT_OK;
    size_t *count = NULL;
    CLT_ALLOC(NULL, count, (size_t)L->nclasses);
    for (size_t i = 0; i < L->n; i++)
        if (d->kept[i] && which[i] == 0) count[L->e[i].label]++;
    for (int c = 0; c < L->nclasses; c++)
        if (count[c] == 0)
            CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s/%s: no readable image left in the class (%zu bad "
                     "files skipped in the set)", train, L->names[c], d->skipped);
fail:
    free(count);
    return st;
}

clt_status clt__data_open_images(const char *dir, const struct clt_data_params *p,
                                 clt_dataset *train, clt_dataset *test)
{
    clt_status st = CLT_OK;
    struct listing L = {0};
    struct decoded d = {0};
    unsigned char *which = NULL;
    char *train_dir = NULL, *test_dir = NULL;
    clt_dataset tr = {0}, te = {0};
    if (!*dir) CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "images:: no folder given after 'images:'");
    if (!is_dir(dir)) CLT_FAIL(NULL, CLT_ERR_IO, "%s: no such folder", dir);
    if (p->task != CLT_TASK_CLASSIFICATION)
        CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "images:%s: image folders hold classes; the "
                 "regression task needs csv:", dir);
    if ((p->channels != 0 && p->channels != 1 && p->channels != 3) ||
        (p->image_h == 0) != (p->image_w == 0) || p->image_h > CLT_DATA_IMAGE_MAX_SIDE ||
        p->image_w > CLT_DATA_IMAGE_MAX_SIDE || !(p->val_split >= 0 && p->val_split < 1))
        CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "images:%s: bad image options (channels %d, size "
                 "%zu x %zu, val_split %g)", dir, p->channels, p->image_h, p->image_w,
                 (double)p->val_split);
    train_dir = join(dir, "train");
    test_dir = join(dir, "test");
    if (!train_dir || !test_dir) CLT_FAIL(NULL, CLT_ERR_HOST_MEMORY, "out of host memory");
    bool split_layout = is_dir(train_dir);
    if (split_layout && p->val_split > 0)
        CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "%s has train/ (and test/) folders: the held-out "
                 "fraction (--val-split) applies to a folder of class folders only", dir);
    CLT_TRY(list_set(dir, split_layout, &L));
    if (p->classes > 0 && p->classes != L.nclasses)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: %d class folders, but %d classes expected", 
                 split_layout ? train_dir : dir, L.nclasses, p->classes);
    CLT_TRY(load_set(dir, &L, p, &d));
    CLT_ALLOC(NULL, which, L.n);
    CLT_TRY(assign_splits(&L, &d, p, which));
    CLT_TRY(check_classes(&L, &d, which, split_layout ? train_dir : dir));
    CLT_TRY(make_split(&L, &d, which, 0, split_layout ? train_dir : dir, &tr));
    if (test) CLT_TRY(make_split(&L, &d, which, 1, split_layout ? test_dir : dir, &te));
    *train = tr;
    if (test) *test = te;
    memset(&tr, 0, sizeof tr);
    memset(&te, 0, sizeof te);
fail:
    clt_dataset_free(&tr);
    clt_dataset_free(&te);
    listing_free(&L);
    free(d.kept);
    free(d.px);
    free(which);
    free(train_dir);
    free(test_dir);
    return st;
}

/* ---- images for prediction --------------------------------------------------------------- */

clt_status clt_data_load_images(const char *path, const struct clt_data_params *p,
                                clt_dataset *out)
{
    clt_status st = CLT_OK;
    char **names = NULL, **paths = NULL;
    size_t n = 0;
    struct decoded d = {0};
    clt_dataset r = {0};
    if (out) memset(out, 0, sizeof *out);
    if (!path || !p || !out) CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "clt_data_load_images: NULL argument");
    if ((p->channels != 1 && p->channels != 3) || p->image_h == 0 || p->image_w == 0 ||
        p->image_h > CLT_DATA_IMAGE_MAX_SIDE || p->image_w > CLT_DATA_IMAGE_MAX_SIDE)
        CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "%s: images need a channel count (1 or 3) and a size "
                 "to be read as", path);
    if (is_dir(path)) {
        CLT_TRY(list_names(path, false, &names, &n));
        if (n == 0) CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: no image files in the folder", path);
        CLT_ALLOC(NULL, paths, n);
        for (size_t i = 0; i < n; i++)
            if (!(paths[i] = join(path, names[i])))
                CLT_FAIL(NULL, CLT_ERR_HOST_MEMORY, "out of host memory");
    } else {
        n = 1;
        CLT_ALLOC(NULL, paths, 1);
        if (!(paths[0] = strdup(path))) CLT_FAIL(NULL, CLT_ERR_HOST_MEMORY, "out of host memory");
    }
    struct target t = {.C = p->channels, .H = p->image_h, .W = p->image_w, .fixed_c = true,
                       .fixed_size = true};
    CLT_TRY(decode_files(paths, n, &t, p->skip_bad_images, &d));
    if (d.nsamples == 0) CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: no readable image", path);
    size_t F = (size_t)t.C * t.H * t.W;
    r.n = d.nsamples;
    r.features = F;
    r.sample_ndim = 3;
    r.sample_shape[0] = (size_t)t.C;
    r.sample_shape[1] = t.H;
    r.sample_shape[2] = t.W;
    r.u8 = d.px;
    d.px = NULL;
    r.classes = p->classes > 0 ? p->classes : 1;
    r.task = CLT_TASK_CLASSIFICATION;
    r.input_scale = 1.0f / 255.0f;
    r.skipped = d.skipped;
    snprintf(r.source, sizeof r.source, "%s", path);
    CLT_ALLOC(NULL, r.labels, r.n);
    CLT_ALLOC(NULL, r.sample_names, r.n);
    for (size_t i = 0, s = 0; i < n; i++) {
        if (!d.kept[i]) continue;
        r.sample_names[s++] = paths[i];
        paths[i] = NULL;
    }
    *out = r;
    memset(&r, 0, sizeof r);
fail:
    clt_dataset_free(&r);
    free_names(names, names ? n : 0);
    if (paths) free_names(paths, n);
    free(d.kept);
    free(d.px);
    return st;
}
