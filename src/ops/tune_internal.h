/* Tuning data: which GEMM kernel each layout and size class uses on a device, and with which
 * parameters.
 * A ctx reads it at its first GEMM (or clt_ctx_tune) from a per-device JSON file written by
 * `cltrain-tune` ($CLTRAIN_TUNE_FILE, else <program cache dir>/tune-<hash of device and
 * driver>.json); a missing, unreadable, malformed or foreign file (another device or driver) leaves
 * the built-in defaults, which are correct on every device: cltrain's own direct kernel on CPU
 * devices (measured faster than CLBlast on PoCL), CLBlast elsewhere.
 * CLTRAIN_GEMM=own|clblast, read with the file, forces one path for every layout (own: the
 * tuned own kernel if the file has one, else the built-in own default for the device); 16-bit
 * operands always take the own kernels of the 16-bit choices (gemm16). */
#ifndef CLTRAIN_TUNE_INTERNAL_H
#define CLTRAIN_TUNE_INTERNAL_H

#include "cltrain/device.h"
#include "ops/family_internal.h"
#include "ops/ops_internal.h"

typedef enum clt_gemm_kernel {
    CLT_GEMM_CLBLAST = 0, /* CLBlast's Sgemm */
    CLT_GEMM_DIRECT = 1,  /* cl/gemm.cl, no local memory: a register block per work-item */
    CLT_GEMM_TILED = 2,   /* cl/gemm.cl, local-memory tiles per work-group */
    CLT_GEMM_PANEL = 3    /* cl/gemm_panel.cl: operands packed into panels in the ctx's GEMM
                             workspace, then a register-blocked micro-kernel (the CPU family) */
} clt_gemm_kernel;
const char *clt_gemm_kernel_name(clt_gemm_kernel k); /* "clblast", "direct", "tiled", "panel" */

/* Layouts, indexed (ta << 1) | tb: NT is a linear layer's forward, NN its input gradient and
 * TN its weight gradient. */
typedef enum clt_gemm_layout {
    CLT_GEMM_NN = 0,
    CLT_GEMM_NT = 1,
    CLT_GEMM_TN = 2,
    CLT_GEMM_TT = 3,
    CLT_GEMM__LAYOUTS = 4
} clt_gemm_layout;
const char *clt_gemm_layout_name(clt_gemm_layout l); /* "NN", "NT", "TN", "TT" */

/* Size classes: a GEMM is large when M * N * K >= the tuning data's gemm_large_macs. Small
 * problems favour kernels that read operands in place, large ones those that pack them. */
typedef enum clt_gemm_size {
    CLT_GEMM_SMALL = 0,
    CLT_GEMM_LARGE = 1,
    CLT_GEMM__SIZES = 2
} clt_gemm_size;
const char *clt_gemm_size_name(clt_gemm_size s); /* "small", "large" */
#define CLT_GEMM_LARGE_MACS_DEFAULT (1ull << 26)

/* One GEMM implementation with its compile-time parameters (cl/gemm.cl's GEMM_* defines).
 * Fields a kernel does not use are ignored (and written as given). */
struct clt_gemm_choice {
    clt_gemm_kernel kernel;
    int tm, tn; /* rows and columns of C per work-item (panel: of a micro-tile) */
    int vw;     /* direct: floats per vector: 1, 2, 4, 8 or 16 */
    int veck;   /* direct: 1 vectors along K (dot products), 0 along N (outer products) */
    int mdim;   /* direct: the NDRange dimension (0 or 1) that walks row blocks */
    int wgm;    /* work-group extent along row blocks (tiled: local dimension 1) */
    int wgn;    /* work-group extent along column blocks (tiled: local dimension 0) */
    int kb;     /* K slice: tiled: staged in local memory; direct: packed in private memory
                   (0: none, operands read in place; needs veck 0); panel: the cache block */
    int bm, bn; /* direct, packed, and panel: tm x tn register blocks per work-item along M, N */
    int ia;     /* panel: 1 reads op(A) in place (only op(B) packed), 0 packs both */
};

/* CLBlast's Xgemm kernel parameters (its tuner's names, in this order), which the tuning data
 * may give to override CLBlast's database for the device (CLBlastOverrideParameters): the
 * kernel behind CLBlast's larger GEMMs, every layout. */
#define CLT_XGEMM_NPARAMS 16
extern const char *const clt_xgemm_param_names[CLT_XGEMM_NPARAMS];
struct clt_xgemm_params {
    bool set; /* false: CLBlast's own database */
    size_t v[CLT_XGEMM_NPARAMS];
};
/* CLT_OK if p obeys Xgemm's constraints (CLBlast's kernel would not compile or compute
 * otherwise: MWG a multiple of MDIMC * VWM and of MDIMA * VWM, NWG of NDIMC * VWN and NDIMB *
 * VWN, KWG of KWI and of MDIMC * NDIMC / MDIMA and / NDIMB, vector widths 1, 2, 4 or 8, ...);
 * else CLT_ERR_INVALID_ARG with the reason in why. Thread-safe. */
clt_status clt_xgemm_params_check(const struct clt_xgemm_params *p, char *why, size_t why_len);
/* The candidates cltrain-tune --clblast tries; *n receives their count. Static storage. */
const struct clt_xgemm_params *clt_xgemm_candidates(int *n);

/* The tuning data of one device. */
struct clt_tune {
    char device_name[128];    /* key: CL_DEVICE_NAME */
    char driver_version[128]; /* key: CL_DRIVER_VERSION */
    uint64_t gemm_large_macs; /* M * N * K from which a GEMM counts as large (>= 1) */
    struct clt_gemm_choice gemm[CLT_GEMM__LAYOUTS][CLT_GEMM__SIZES];
    /* what the tuner measured over its shapes of each class (informational; 0: none) */
    double gemm_gflops[CLT_GEMM__LAYOUTS][CLT_GEMM__SIZES];
    /* The same for 16-bit operands (mixed precision), always an own kernel that takes them
     * (clt__gemm_takes_16bit): the file's "gemm16" (cltrain-tune --dtype), else its f32 choice
     * where that takes them, else clt__gemm_mixed_choice. */
    struct clt_gemm_choice gemm16[CLT_GEMM__LAYOUTS][CLT_GEMM__SIZES];
    double gemm16_gflops[CLT_GEMM__LAYOUTS][CLT_GEMM__SIZES];
    struct clt_xgemm_params xgemm; /* CLBlast's Xgemm for this device, when set */
    char source[512]; /* where it came from: "built-in" or the file's path, plus any override */
};

/* The built-in defaults for a device. Thread-safe. */
void clt_tune_defaults(const clt_device_info *dev, struct clt_tune *out);
/* Sets every 16-bit choice (gemm16) from the f32 one, as for a file without "gemm16", and
 * clears their GFLOP/s. Thread-safe. */
void clt_tune_derive16(const clt_device_info *dev, struct clt_tune *t);
/* The built-in own-kernel choice for a device, layout and size class (what CLTRAIN_GEMM=own
 * uses when the tuning data names CLBlast). Thread-safe. */
struct clt_gemm_choice clt_gemm_own_default(const clt_device_info *dev, clt_gemm_layout l,
                                            clt_gemm_size s);

/* CLT_OK if the choice is well-formed and fits the device (work-group size, local memory);
 * otherwise CLT_ERR_INVALID_ARG with the reason in why (if non-NULL). Thread-safe. */
clt_status clt_gemm_choice_check(const struct clt_gemm_choice *c, const clt_device_info *dev,
                                 char *why, size_t why_len);
/* The table of own-kernel variants the tuner tries (and the tests check), for every device
 * type; *n receives its length. Static storage. Thread-safe. */
const struct clt_gemm_choice *clt_gemm_variants(int *n);
/* Whether the tuner times variant c for layout l on dev (cltrain-tune --all times every one
 * that fits): c must fit the device; direct kernels apply where their vectors run along
 * contiguous memory (dot products: NT; outer products: NN and TN, and NT too when they pack the
 * operands); tiled ones everywhere but on CPU devices (local memory is ordinary memory there,
 * and barriers cost). Thread-safe. */
bool clt_gemm_variant_applies(const struct clt_gemm_choice *c, clt_gemm_layout l,
                              const clt_device_info *dev);
/* A short description: "direct tm4 tn16 vw16 veck0 mdim0 wg1x1" (unpacked), "direct tm8 tn32
 * vw16 veck0 mdim0 wg1x1 kb128 bm4 bn2" (packed), "tiled wg16x16 tm4 tn4 kb16" or "clblast".
 * Thread-safe. */
void clt_gemm_choice_format(const struct clt_gemm_choice *c, char *dst, size_t n);
/* Parses what clt_gemm_choice_format writes (fields may be omitted or reordered; omitted ones
 * take the built-in defaults of cl/gemm.cl). CLT_ERR_INVALID_ARG for anything else (message in
 * clt_last_errmsg()); the result is not checked against a device. Thread-safe. */
clt_status clt_gemm_choice_parse(const char *s, struct clt_gemm_choice *out);

/* Reads a tuning file for `dev` into *out (the defaults first, then what the file gives).
 * Format: {"format": "cltrain-tune", "version": 1, "device": ..., "driver": ..., "large_macs":
 * N, "gemm": {"NT": {"small": CHOICE, "large": CHOICE}, ...}} where CHOICE is {"kernel":
 * "direct", "tm": 4, ...} with the fields of struct clt_gemm_choice (a layout may also map
 * straight to one CHOICE, for both classes); absent layouts and classes keep the defaults.
 * Optional "clblast_xgemm": {"GEMMK": 0, ...} with every clt_xgemm_param_names entry (checked
 * by clt_xgemm_params_check), given to CLBlast when a ctx reads the file.
 * Returns CLT_ERR_IO if it cannot be read, CLT_ERR_FORMAT if it is malformed or holds an
 * invalid choice, CLT_ERR_UNSUPPORTED if it belongs to another device or driver; *out then
 * holds the defaults. The message is in clt_last_errmsg(). Thread-safe. */
clt_status clt_tune_load(const char *path, const clt_device_info *dev, struct clt_tune *out);
/* Writes t as JSON to path atomically through clt_outfile_open (temporary file, then rename;
 * a symlink's target is replaced, a non-regular file refused). CLT_ERR_IO on failure.
 * Thread-safe for distinct paths. */
clt_status clt_tune_save(const char *path, const struct clt_tune *t);
/* The tuning file for ctx's device: $CLTRAIN_TUNE_FILE if set, else
 * <clt_ctx_cache_dir(ctx)>/tune-<16 hex digits>.json. CLT_ERR_IO when neither exists
 * (disk cache off and no variable). */
clt_status clt_tune_path(const clt_ctx *ctx, char *dst, size_t n);

/* The tuning data the ctx uses (owned by the ctx), read at the first call or GEMM; NULL when
 * CLTRAIN_GEMM holds a bad value (the message says so). Not thread-safe (per ctx). */
const struct clt_tune *clt_ctx_tune(clt_ctx *ctx);
/* Replaces the ctx's tuning data (the tuner does this to compare choices); every choice must
 * pass clt_gemm_choice_check (CLT_ERR_INVALID_ARG otherwise, nothing changed). Not
 * thread-safe (per ctx). */
clt_status clt_ctx_set_tune(clt_ctx *ctx, const struct clt_tune *t);

/* clt_op_gemm with an explicit implementation instead of the ctx's choice, for the tuner and
 * tests. The same checks and statuses as clt_op_gemm, plus CLT_ERR_INVALID_ARG for a choice
 * that fails clt_gemm_choice_check and CLT_ERR_BUILD if its kernel does not compile. */
clt_status clt_op_gemm_with(const struct clt_gemm_choice *c, clt_trans ta, clt_trans tb, size_t M,
                            size_t N, size_t K, float alpha, const clt_tensor *A,
                            const clt_tensor *B, float beta, clt_tensor *C);

/* ---- the ops' own ------------------------------------------------------------------------- */

/* Initialisers of a struct clt_gemm_choice, every field set (the fields: above).
 * Direct: tm x tn of C per work-item, vw-wide vectors along N (veck 0, outer products) or K
 * (veck 1, dot products), operands read in place, wgm x wgn work-items per group. Packed: the
 * direct kernel over K slices of kb packed in private memory, bm x bn register blocks per
 * work-item. Panel: tm x tn micro-tiles over operands packed once per GEMM into the ctx's
 * workspace, bm x bn of them per work-item, K in cache blocks of kb. Tiled: the GPU family,
 * wgm x wgn work-items of tm x tn, K tiles of kb staged in local memory. */
#define CLT_GEMM_CHOICE_DIRECT(tm_, tn_, vw_, veck_, wgm_, wgn_)                                   \
    {                                                                                              \
        .kernel = CLT_GEMM_DIRECT, .tm = tm_, .tn = tn_, .vw = vw_, .veck = veck_, .mdim = 0,      \
        .wgm = wgm_, .wgn = wgn_, .kb = 0, .bm = 1, .bn = 1                                        \
    }
#define CLT_GEMM_CHOICE_PACKED(tm_, tn_, vw_, kb_, bm_, bn_)                                       \
    {                                                                                              \
        .kernel = CLT_GEMM_DIRECT, .tm = tm_, .tn = tn_, .vw = vw_, .veck = 0, .mdim = 0,          \
        .wgm = 1, .wgn = 1, .kb = kb_, .bm = bm_, .bn = bn_                                        \
    }
#define CLT_GEMM_CHOICE_PANEL(tm_, tn_, vw_, kb_, bm_, bn_)                                        \
    {                                                                                              \
        .kernel = CLT_GEMM_PANEL, .tm = tm_, .tn = tn_, .vw = vw_, .veck = 0, .mdim = 0,           \
        .wgm = 1, .wgn = 1, .kb = kb_, .bm = bm_, .bn = bn_                                        \
    }
#define CLT_GEMM_CHOICE_TILED(wgm_, wgn_, tm_, tn_, kb_)                                           \
    {                                                                                              \
        .kernel = CLT_GEMM_TILED, .tm = tm_, .tn = tn_, .vw = 1, .veck = 0, .mdim = 0,             \
        .wgm = wgm_, .wgn = wgn_, .kb = kb_, .bm = 1, .bn = 1                                      \
    }

/* The ops' per-ctx state, kept in the ctx's `ops` slot (runtime/ctx_internal.h).
 * gemm.c: the own GEMM kernels in use, by choice, layout and operand dtypes; keys are built
 * zeroed and compared with memcmp, so a launch formats no options. */
struct clt__gemm_key {
    struct clt_gemm_choice c;
    int ta, tb, a, b, cd;
    int part; /* panel: 0 the micro-kernel, 1 and 2 the pack kernels of A and B; else 0 */
    int bias; /* the epilogue bias's dtype, -1 none */
    int epi;  /* direct: the program with the fused epilogue (GEMM_EPI) */
};
#define CLT__GEMM_SLOTS 16
struct clt__gemm_slot {
    struct clt__gemm_key key;
    cl_kernel kernel; /* borrowed from the ctx's kernel cache; NULL: the slot is free */
};
/* The panel family's workspace: packed operands of up to this many floats (8 MiB, allocated
 * once per ctx at its first panel GEMM, as a cuBLAS handle's workspace), larger GEMMs being
 * cut into chunks that fit it. */
#define CLT_GEMM_WS_FLOATS ((size_t)1 << 21)
/* Bytes of GEMM workspace ctx allocates at its first GEMM (CLT_GEMM_WS_FLOATS floats when its
 * tuning data names the panel family for some layout and class, else 0): the memory estimate
 * counts it. */
uint64_t clt__gemm_ws_bytes(clt_ctx *ctx);
/* Bytes of the GEMM workspace ctx holds itself (created by the first panel GEMM run without a
 * trainer's reservation; kept until the ctx ends), else 0: device memory of the ctx, which no
 * model's estimate counts. */
uint64_t clt__gemm_ws_held(clt_ctx *ctx);
/* A workspace for the panel family's GEMMs on ctx while *out lives, so that they allocate
 * nothing (a trainer reserves it with its buffers: the memory estimate and the dry run count
 * it): *out is a new CLT_MEM_WORKSPACE tensor of clt__gemm_ws_bytes(ctx) bytes lent to the
 * ctx, or NULL when that is 0 or another workspace is lent already. Give it back with
 * clt__gemm_ws_return (NULL is a no-op). Not thread-safe (per ctx). */
clt_status clt__gemm_ws_reserve(clt_ctx *ctx, clt_tensor **out);
void clt__gemm_ws_return(clt_ctx *ctx, clt_tensor *ws);

struct clt__ops_ctx {
    cl_kernel *slots; /* every family's kernel slots (clt__op_slot), borrowed from the cache */
    int slot_base[CLT__OPF__COUNT]; /* each family's first slot */
    bool tuned;                     /* tune holds the tuning data (clt__ops_ctx) */
    struct clt_tune tune; /* the GEMM choice per layout and size class */
    struct clt__gemm_slot gemm_slots[CLT__GEMM_SLOTS];
    int gemm_next;     /* the slot the next new GEMM kernel takes (round robin when all are used) */
    bool used_clblast; /* a GEMM went to CLBlast: releasing the ctx clears CLBlast's cache */
    clt_tensor *gemm_ws_lent; /* the panel family's packed operands: a trainer's workspace
                                 (clt__gemm_ws_reserve), else */
    clt_tensor *gemm_ws;      /* the ctx's own, created at the first panel GEMM without one */
    clt_tensor *xent_rows;    /* the per-row losses and hits of the large-vocabulary softmax
                                 cross-entropy called without its own (loss.c), grown on demand */
};

/* The ops' state of ctx, created at its first op with empty kernel slots. Fails only out of
 * host memory. Not thread-safe (per ctx). */
clt_status clt__ops_state(clt_ctx *ctx, struct clt__ops_ctx **out);
/* The same with the tuning data read at the first call: the built-in defaults, then the tuning
 * file if one exists and is valid (an invalid one is ignored, its reason left in the ctx's
 * message), then CLTRAIN_GEMM. Fails only for a bad CLTRAIN_GEMM value (CLT_ERR_INVALID_ARG,
 * recorded for ctx and thread; the next call tries again) or out of host memory. Not
 * thread-safe (per ctx). */
clt_status clt__ops_ctx(clt_ctx *ctx, struct clt__ops_ctx **out);

#endif
