/* The layer table: one `struct clt__layer_kind` per clt_layer_kind says everything the spec
 * parser, the model and the memory estimate need to know about that kind of layer (its words in
 * a spec, its output shape, its parameters, its forward and backward, the activation memory it
 * keeps), so that src/nn/spec.c and src/nn/model.c hold no per-kind code. Each kind lives in
 * its own file under src/nn/layers/; src/nn/layers/table.c lists them. Private to the library.
 *
 * How to add a layer kind:
 *   1. include/cltrain/spec.h: a value in clt_layer_kind before CLT_LAYER__COUNT (existing
 *      values keep their numbers: checkpoints store the spec's text, but tests and callers use
 *      the values), a clt_layer_spec field if it takes an argument, and a line in the grammar.
 *   2. src/nn/layers/<kind>.c: a `const struct clt__layer_kind clt__layer_<kind>` (fill every
 *      member; see the struct below), declared at the end of this header, added to
 *      src/nn/meson.build, and its pointer at its clt_layer_kind index in src/nn/layers/table.c.
 *      State that is not a parameter (running statistics) is declared by `buffers` (see
 *      struct clt__buffer_decl): the model lays it out, checkpoints save it by name. Buffers
 *      do not grow with the batch: what backward needs per sample is the kept output (`kept`,
 *      in the output's storage, 16-bit in mixed precision) or, when it must stay f32 whatever
 *      the precision (layernorm's row statistics), `saved`; the model allocates both and the
 *      memory estimate counts them. The input x a backward reads (L->x) is the layer before's
 *      kept output or the model's input, and may be shaped otherwise than L->in (the model's
 *      input is any (B, ...) of the right size): view it as the op needs.
 *   3. tests/nn/test_spec.c (parse and round trip; the unknown-layer message lists every name
 *      in table order: its expected text appears three times there, and test_kind_names lists
 *      the names) and tests/nn/test_model.c (a host reference and a check_spec line; a kind
 *      with parameters adds them to host_net_of, which lays out the flat offsets, and a line
 *      to test_estimate_every_kind).
 *   4. Where users read the kinds: `usage` and `help` (every entry has both) are what
 *      `cltrain help spec` and the manual's layer list print: regenerate docs/cltrain.1 with
 *      tools/gen_man.sh (the man_pages test fails until then); by hand, the grammar in
 *      include/cltrain/spec.h and README.md, and tools/checkpoint_numpy.py, which rebuilds a
 *      model from a checkpoint's spec text.
 * A kind that needs kernels of its own (layernorm, attention) first adds an op family, its
 * files and one table line (docs/architecture.md, "Where to add", has the whole recipe):
 * cl/<family>.cl; src/ops/<family>.c with the ops' wrappers (declared in ops_internal.h), its
 * options' formatter and its `struct clt__op_family` (sources, kernel slots, every program
 * variant); X(<family>) in CLT__OP_FAMILIES (src/ops/family_internal.h); and
 * tests/ops/test_<family>.c against a float64 reference. Its layer file then calls the ops.
 * An elementwise activation "foo" needs less, all of it one line or one small block each:
 *   - the kernel: its formulas in cl/act_fn.cl (CLT_ACT_FOO with the next code, a case in
 *     clt_act_fwd and clt_act_bwd: the activation kernels and the GEMM epilogues share them),
 *     CLT_ACT_KERNELS(foo, CLT_ACT_FOO) in cl/activation.cl, CLT_ACT_FOO in clt_act
 *     (src/ops/ops_internal.h, the same code: tests/ops/test_activation.c checks) and its row
 *     in the `acts` table of src/ops/activation.c (kernel stem, which saved tensor its backward
 *     reads: the one place that says it; linear's fusion asks clt_op_act_backward_reads_y);
 *   - the table entry: CLT_LAYER_FOO in clt_layer_kind (include/cltrain/spec.h),
 *     `CLT__ACTIVATION(foo, FOO, "its one-line help");` in src/nn/layers/activation.c,
 *     its extern below and its pointer in src/nn/layers/table.c (parsing, printing, shape,
 *     memory, forward, backward and clt_spec_check_output then follow);
 *   - the test: one line in the `acts` table of tests/ops/test_activation.c, with REF_ACT_FOO
 *     and its value and derivative in tests/ref/ref_nn.c.
 * An activation with a parameter uses CLT__ACTIVATION_KIND with its own parse, format and check
 * (see leakyrelu's slope, kept in clt_layer_spec.alpha and passed to the op as alpha).
 * A block of layers (residual) declares `children`: the model plans, names, allocates and counts
 * each child as it does a layer ("{i}.{prefix}.{suffix}"), and the block's forward and backward
 * run them (struct clt__layer.child). Its own entry in the table still says its words, shape and
 * output.
 * Generation with a key/value cache (clt_model_decode) runs each kind's `decode` on one
 * position; a kind without one (NULL) makes cltrain generate recompute the window. A kind on
 * sequences adds it with a line in tests/nn/test_model.c's test_decode_matches_forward specs. */
#ifndef CLTRAIN_NN_LAYER_INTERNAL_H
#define CLTRAIN_NN_LAYER_INTERNAL_H

#include "cltrain/model.h"
#include "ops/ops_internal.h"
#include "cltrain/spec.h"

#include "runtime/internal.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- shapes ------------------------------------------------------------------------------- */

#define CLT__SHAPE_MAX_DIMS 3

/* The shape of one sample of an activation, the batch dimension not counted: (features),
 * (T, C) or (C, H, W). An activation tensor is (B, d[0], ..., d[ndim - 1]). */
struct clt__shape {
    int ndim; /* 1 to CLT__SHAPE_MAX_DIMS */
    size_t d[CLT__SHAPE_MAX_DIMS];
};

/* Elements of one sample: the product of the dims. */
size_t clt__shape_numel(const struct clt__shape *s);
/* "784" or "1x28x28" into buf (always terminated). */
void clt__shape_format(const struct clt__shape *s, char *buf, size_t size);

/* ---- spec words: what a kind's parser reads --------------------------------------------- */

#define CLT__SPEC_MAX_ARGS 6 /* "conv 32 k3 s2 p1 nobias" and one word too many */

/* The words of one spec entry after the layer's name, and where to report errors. */
struct clt__spec_args {
    int n;                               /* words after the name; only the first
                                            CLT__SPEC_MAX_ARGS are kept */
    const char *word[CLT__SPEC_MAX_ARGS];
    int len[CLT__SPEC_MAX_ARGS];
    const void *where;                   /* the parser's entry, for clt__spec_args_fail */
};

/* Records the parser's message "...: layer L ("<entry>") at <position>: <detail>" with the
 * position of word `i` (0 is the first argument; -1 the end of the entry) and returns
 * CLT_ERR_FORMAT. */
clt_status clt__spec_args_fail(const struct clt__spec_args *a, int i, const char *fmt, ...)
    CLT__PRINTF(3, 4);
/* Case-insensitive: is argument i the word `w`? */
bool clt__spec_arg_is(const struct clt__spec_args *a, int i, const char *w);
/* The decimal digits of argument i from character `skip` on (a "k3" reads with skip 1): false
 * when there are none or another character follows; the value stops growing once above `cap`,
 * so an over-long number reads as more than `cap`, never overflowing. */
bool clt__spec_arg_digits(const struct clt__spec_args *a, int i, int skip, long long cap,
                          long long *out);
/* Argument i as a decimal number (strtod over the whole word); false when it is not one. */
bool clt__spec_arg_number(const struct clt__spec_args *a, int i, double *out);
/* The word of argument i and its quoted length, for "%.*s" (long words are cut). */
#define CLT__SPEC_ARG(a, i) clt__spec_quote_len((a)->len[i]), (a)->word[i]
int clt__spec_quote_len(int len);
/* The shortest "%g" text of v that strtof reads back as v ("0.1", "1e-05"), whole numbers
 * below 1e16 without an exponent ("10", not "1e+01"). */
void clt__spec_format_real(float v, char *buf, size_t size);

/* ---- parameters --------------------------------------------------------------------------- */

#define CLT__LAYER_MAX_PARAMS 4 /* attention: two projections, each a weight and a bias */

/* One parameter a layer declares: shaped as PyTorch's (weight (OUT, IN) or (OUT, IN, K, K),
 * bias (OUT)), named "{layer}.{suffix}" in checkpoints and clt_param_info (a suffix may itself
 * hold dots: "out_proj.weight"), initialised from the fans, and whether weight decay applies
 * to it (every kind says so for each parameter). */
struct clt__param_decl {
    const char *suffix; /* "weight", "bias" */
    int ndim;           /* 1 to 4 */
    size_t dims[4];
    bool weight;        /* a weight (the init scheme's bound) or a bias (0 under kaiming and
                           xavier) */
    size_t fan_in, fan_out;
    /* Takes weight decay: matrices and embeddings (linear's and conv's weights) do; biases and
     * normalisation parameters (batchnorm's and layernorm's weight and bias) do not, as GPT-2
     * and nanoGPT train. The trainer passes it to the optimizer (clt_param_info.decays,
     * clt_optim_set_no_decay). */
    bool decays;
    /* Drawn from normal(0, std) whatever the init scheme when std > 0 (GPT-2's 0.02 for token
     * and position embeddings); 0: the scheme's uniform bound from the fans. */
    float std;
    /* The model's token embedding table (V, D): the matrix a tied head shares. */
    bool embedding;
    /* Not a tensor of its own: the token embedding's matrix of the same dims (an earlier
     * parameter declared `embedding`), read and trained as one tensor, named once (the head of
     * "linear V nobias tied"). Its gradient is written by this layer's backward, which runs
     * first, and added to by the embedding's (clt__layer.grad_shared). The plan refuses a tie
     * without such a matrix. Only a layer's only parameter may be tied. */
    bool tie;
};

/* ---- buffers ------------------------------------------------------------------------------ */

#define CLT__LAYER_MAX_BUFFERS 4

/* One buffer a layer declares: state that is not a parameter (not in the flat parameter or
 * gradient tensors, never touched by the optimizer), as PyTorch's register_buffer. An f32 buffer
 * is `numel` elements of the model's flat f32 `buffers` tensor on the device (a 1-D (numel)
 * tensor in checkpoints), filled with `init` when the model is created; an I64 buffer
 * (i64) is one host-side int64 counter, a 0-d tensor in checkpoints (as
 * num_batches_tracked). A persistent buffer is named "{layer}.{suffix}", listed by
 * clt_model_buffer_info and saved in checkpoints; a non-persistent one is the layer's own
 * scratch that must outlive a pass (batchnorm's saved statistics). */
struct clt__buffer_decl {
    const char *suffix; /* "running_mean" */
    bool i64;           /* an I64 counter (numel 1), else f32 */
    size_t numel;
    float init;         /* every element's initial value */
    bool persistent;    /* in checkpoints and clt_model_buffer_info */
};

/* ---- blocks: layers made of layers -------------------------------------------------------- */

/* One layer a block runs. The children form chains: a child with `from_input` reads the block's
 * input, the others the previous child's output. */
struct clt__child {
    clt_layer_spec spec; /* a body layer (its body fields unused) or one the block makes */
    char prefix[24];     /* the name between "{i}." and the parameter's suffix: "body.0" */
    bool from_input;
};

/* ---- the model's view of one layer, as the kinds' forward and backward see it ------------ */

/* How a layer is run by the one before it (clt__layer_kind.absorbs). */
enum clt__absorb {
    CLT__ABSORB_NONE,    /* not: it runs its own passes */
    CLT__ABSORB_BOTH,    /* both passes: its output is the input it gets (out_t = x) and its
                            backward passes dy through (the layer before applies its gradient) */
    CLT__ABSORB_FORWARD  /* the forward only: the layer before has written its output y (out_t =
                            y); its backward runs as usual, from its input x and y */
};

struct clt__layer {
    const struct clt__layer_kind *kind;
    clt_layer_spec spec;
    int index;                          /* its position in the spec, from 0 (a child: its
                                           block's) */
    int rng_index;                      /* its own index among all the model's layers, for
                                           random streams: index, or for the c-th child of
                                           the model's blocks (in plan order) nlayers + c */
    struct clt__shape in, out;          /* per sample */
    size_t in_n, out_n;                 /* their element counts */
    int param, nparams;                 /* its first parameter's index, and how many */
    clt_tensor *w[CLT__LAYER_MAX_PARAMS];   /* views of the flat f32 parameters */
    clt_tensor *dw[CLT__LAYER_MAX_PARAMS];  /* ... of the flat gradients */
    clt_tensor *w16[CLT__LAYER_MAX_PARAMS]; /* ... of the 16-bit copy (mixed precision), or NULL */
    int nbuffers;                       /* kind->buffers: its buffers, in order */
    clt_tensor *buf[CLT__LAYER_MAX_BUFFERS];  /* f32 buffers: views of the flat buffers, else
                                                 NULL */
    int64_t *counter[CLT__LAYER_MAX_BUFFERS]; /* I64 buffers: the host counter, else NULL */
    clt_dtype ydt;                      /* storage of y */
    clt_tensor *y_full;                 /* (max_batch, act elements) kept output, or NULL */
    clt_tensor *y;                      /* view (B, ...) of y_full for the current batch, or a
                                           kind's own view (flatten of a shaped input) */
    clt_tensor *saved;                  /* (max_batch, kind->saved) f32 kept for backward, or
                                           NULL */
    const clt_tensor *x;                /* input of the last forward */
    const clt_tensor *out_t;            /* output of the last forward: y or x */
    clt_tensor *ws;                     /* the model's workspace (max_batch * plan.workspace +
                                           plan.workspace_fixed elements) in the model's
                                           precision, shared by every layer whose kind has
                                           `workspace`; NULL when none has */
    const struct clt__layer **ws_owner; /* the model's note of the layer whose pass wrote ws
                                           last and left in it what its backward can reuse
                                           (NULL: nothing reusable); kinds that write ws set it */
    bool grad_shared[CLT__LAYER_MAX_PARAMS]; /* parameter i is also a later layer's (a tied
                                                head's), whose backward runs first and writes
                                                its gradient: add to it (beta 1) */
    bool ran;                           /* the kind's own flag (dropout: applied last forward) */
    struct clt__layer *next;            /* the next layer when it also runs it (kind->absorbs),
                                           else NULL */
    enum clt__absorb absorbed;          /* how the layer before runs it (kind->absorbs) */
    const struct clt__layer *act_before; /* the activation just before it when its backward
                                            takes dx on through that one's gradient
                                            (kind->grads_act_before), else NULL */
    bool grad_after;                    /* an activation whose gradient the layer after it
                                           applies (that one's act_before) */
    clt_tensor *row;                    /* decode: a (1, W) view of its output's row pos */
    struct clt__layer *child;           /* a block's children (kind->children), else NULL */
    int nchildren;
    clt_tensor *gb[2];                  /* a block: the model's two (max_batch, plan.block_widest)
                                           gradient buffers for its children's backward, in the
                                           model's precision (borrowed) */
};

/* The weights the passes read: parameter i's 16-bit copy in mixed precision, else the f32
 * master. */
static inline const clt_tensor *clt__layer_weight(const struct clt__layer *L, int i)
{
    return L->w16[i] ? L->w16[i] : L->w[i];
}

/* One forward or backward pass. */
struct clt__pass {
    size_t B;          /* rows */
    bool train;        /* forward: training mode */
    uint64_t seed;     /* the model's seed */
    uint64_t step;     /* of the forward */
    int nlayers;       /* layers in the model, blocks' children included (dropout's stream
                          step * nlayers + rng_index) */
    float beta;        /* backward: 0 overwrites the gradients, 1 accumulates */
};

/* ---- a layer kind ------------------------------------------------------------------------- */

struct clt__layer_kind {
    clt_layer_kind kind;
    const char *name;   /* its word in a spec: "linear" */
    const char *usage;  /* its grammar: "linear OUT [nobias]" */
    const char *help;   /* one line saying what it computes (clt_layer_kind_help: cltrain's help
                           and manual print it) */
    /* An elementwise activation: clt_spec_check_output refuses it after the last weighted
     * layer, where it would clip or squash the logits. */
    bool activation;
    /* A weighted layer (linear, conv): a model needs one, the last one must be linear and its
     * width is the model's output width, and in mixed precision the layers from the first
     * weighted one (or from a first layer reading tokens) up to (not including) the last keep
     * 16-bit outputs. */
    bool weighted;
    clt_act act;        /* activations: the op they run */
    /* Its backward can take its input gradient on through an activation just before it (dx =
     * (dy W) * act'(.) in one pass: L->act_before) and, when it absorbs an activation in both
     * passes whose gradient the layer after applies (grad_after), leaves that gradient out.
     * The model sets it up (CLTRAIN_FUSE=0: never) where the activation's input gradient is
     * this layer's alone. */
    bool grads_act_before;
    /* Reads token ids: the model's input is (B, in) i32 ids rather than f32 values. Only the
     * model's first layer may (the plan refuses it elsewhere, and inside a block). */
    bool tokens;

    /* Reads the words after the name into *l (kind set, other fields 0 on entry). */
    clt_status (*parse)(const struct clt__spec_args *a, clt_layer_spec *l);
    /* Writes the words after the name (" 128 nobias", "" for none) into buf. */
    void (*format)(const clt_layer_spec *l, char *buf, size_t size);
    /* Checks the fields of a spec built by hand; records "model spec: layer N: ..." with
     * layer = N (1-based) and returns CLT_ERR_INVALID_ARG when one is out of range. */
    clt_status (*check)(const clt_layer_spec *l, int layer);
    /* The output shape for input shape `in`; records a message naming the layer (`layer` is
     * 1-based, `text` its canonical text) and returns CLT_ERR_INVALID_ARG when the input
     * cannot be taken. */
    clt_status (*out_shape)(const clt_layer_spec *l, int layer, const char *text,
                            const struct clt__shape *in, struct clt__shape *out);
    /* Its parameters, in order, into decl (up to CLT__LAYER_MAX_PARAMS); returns how many. */
    int (*params)(const clt_layer_spec *l, const struct clt__shape *in,
                  const struct clt__shape *out, struct clt__param_decl *decl);
    /* The bound of parameter j's uniform draw under --init-scheme default (0: zeros): the
     * initialisation of the PyTorch module the kind stands for, where it is not nn.Linear's
     * (nn.MultiheadAttention: xavier_uniform_ for in_proj_weight, zero biases). NULL: uniform
     * in +-1/sqrt(fan_in) for every parameter, weights and biases. The kaiming and xavier
     * schemes draw from the fans whatever it says. */
    double (*default_bound)(const clt_layer_spec *l, int j, const struct clt__param_decl *d);
    /* Fills parameter j (n elements) of its own, whatever the init scheme (batchnorm's ones and
     * zeros). NULL: every parameter is drawn by the scheme from its declaration. */
    void (*init)(const clt_layer_spec *l, int j, float *dst, size_t n);
    /* Its buffers, in order, into decl (up to CLT__LAYER_MAX_BUFFERS); returns how many. NULL:
     * none (every kind before batchnorm). */
    int (*buffers)(const clt_layer_spec *l, const struct clt__shape *in,
                   const struct clt__shape *out, struct clt__buffer_decl *decl);
    /* The smallest batch a training forward takes for input shape `in` (NULL: 1): batchnorm
     * needs more than one value per channel. The trainer checks every batch of its plan
     * against it before the first step (clt__model_min_batch). */
    size_t (*min_batch)(const clt_layer_spec *l, const struct clt__shape *in);
    /* Elements per sample of the output it keeps on the device for backward (allocated as
     * (max_batch, that) in the layer's output dtype; 0: it keeps none and y_full is NULL). The
     * model allocates and the memory estimate counts exactly this. */
    size_t (*kept)(const clt_layer_spec *l, const struct clt__shape *in,
                   const struct clt__shape *out);
    /* f32 elements per sample it keeps for backward beside its output, whatever the model's
     * precision (layernorm's row statistics), allocated as L->saved (max_batch, that) and
     * counted by the memory estimate as activations. NULL: none. */
    size_t (*saved)(const clt_layer_spec *l, const struct clt__shape *in,
                    const struct clt__shape *out);
    /* Elements of scratch the passes use (NULL: none), in L->ws: per sample (returned) and
     * *fixed more that do not grow with the batch. One workspace of max_batch times the largest
     * per-sample count plus the largest fixed count, in the model's precision, is shared by all
     * layers and allocated and counted as CLT_MEM_WORKSPACE. Its contents do not survive from
     * forward to backward (another layer's pass may have overwritten it). */
    size_t (*workspace)(const clt_layer_spec *l, const struct clt__shape *in,
                        const struct clt__shape *out, size_t *fixed);
    /* L->x is set; sets L->out_t (L->y or x). */
    clt_status (*forward)(struct clt__layer *L, const clt_tensor *x, const struct clt__pass *p);
    /* From dy, the gradient of L's output: adds (beta) or writes the gradients of L's
     * parameters, and dx when need_dx. Sets *through when dy is L's input gradient as it is
     * (identity: dx not written). */
    clt_status (*backward)(struct clt__layer *L, clt_tensor *dx, const clt_tensor *dy,
                           bool need_dx, const struct clt__pass *p, bool *through);
    /* Generation with a key/value cache (clt_model_decode): L's output row at position `pos` of
     * sample 0 from its input row x ((1, IN), or the (1) i32 token for the first layer), written
     * where a batch-1 forward writes row pos (its kept output's row pos: L->row, made by
     * clt__layer_row); sets L->out_t (that row, or x for an identity). Rows before pos are what
     * the last forward or decode steps left, which attention reads as its cache of keys and
     * values. NULL: the kind cannot (generation then recomputes the window). */
    clt_status (*decode)(struct clt__layer *L, const clt_tensor *x, size_t pos);
    /* Whether decode gives the forward's row for this layer's spec (NULL: whenever decode is
     * set); into `why` (n bytes) the reason when not: attention without the causal mask reads
     * later positions, which a cache does not hold yet. */
    bool (*decodes)(const struct clt__layer *L, char *why, size_t n);
    /* Whether L also runs `next`, the layer after it that reads its output (set up, same
     * storage), in its own kernels, and which passes: then the model sets L->next and
     * next->absorbed, and next's kind follows it (see enum clt__absorb). batchnorm
     * absorbs relu; linear absorbs every activation. NULL: never (CLTRAIN_FUSE=0: never
     * either). */
    enum clt__absorb (*absorbs)(const struct clt__layer *L, const struct clt__layer *next);
    /* A block: its children for input `in` and output `out` (the shapes out_shape accepted) into
     * child (NULL: only counts them); returns how many. NULL for a plain layer. */
    int (*children)(const clt_layer_spec *l, const struct clt__shape *in,
                    const struct clt__shape *out, struct clt__child *child);
};

/* Decode (kind->decode): L->row made a (1, W) view of row pos of L's kept output (W the width
 * of one position of its output; the output's rows start at element 0 of y_full). */
clt_status clt__layer_row(struct clt__layer *L, size_t pos);

/* What activation layer A's backward reads: its input or its output (clt_op_act_saved), or,
 * absorbed in both passes, its input (which the layer before wrote as act(z)). */
const clt_tensor *clt__layer_act_saved(const struct clt__layer *A);

/* The kind of `k` (asserted in range). */
const struct clt__layer_kind *clt__layer_kind_of(clt_layer_kind k);

/* Helpers shared by kinds without arguments or parameters. */
clt_status clt__layer_parse_none(const struct clt__spec_args *a, clt_layer_spec *l);
void clt__layer_format_none(const clt_layer_spec *l, char *buf, size_t size);
clt_status clt__layer_check_none(const clt_layer_spec *l, int layer);
clt_status clt__layer_same_shape(const clt_layer_spec *l, int layer, const char *text,
                                 const struct clt__shape *in, struct clt__shape *out);
int clt__layer_no_params(const clt_layer_spec *l, const struct clt__shape *in,
                         const struct clt__shape *out, struct clt__param_decl *decl);
size_t clt__layer_keeps_output(const clt_layer_spec *l, const struct clt__shape *in,
                               const struct clt__shape *out);
size_t clt__layer_keeps_nothing(const clt_layer_spec *l, const struct clt__shape *in,
                                const struct clt__shape *out);

/* ---- the plan: shapes, parameters and storage of a spec, without a device --------------- */

/* One parameter of the plan. */
struct clt__plan_param {
    struct clt_param_info info; /* name, shape, offset into the flat tensors */
    struct clt__param_decl decl;
    double default_bound; /* its uniform bound under --init-scheme default (kind->default_bound) */
};

/* One buffer of the plan: its public info (name, dtype, shape; offset into the flat f32
 * buffers for an f32 one, into the model's host counters for an I64 one). */
struct clt__plan_buffer {
    struct clt_buffer_info info;
    struct clt__buffer_decl decl;
};

struct clt__plan_layer {
    const struct clt__layer_kind *kind;
    clt_layer_spec spec; /* a child's spec (a top-level layer's is the spec's own) */
    bool from_input;     /* a child: reads the block's input */
    int child, nchildren; /* a block: its children in plan.children, else -1, 0 */
    struct clt__shape in, out;
    int param, nparams; /* first parameter, count */
    int tied;           /* a tied layer: the parameter its only (declared `tie`) parameter is,
                           not counted in nparams; else -1 */
    int buffer, nbuffers; /* first buffer, count */
    size_t kept;        /* kind->kept: elements per sample it keeps (0: none) */
    size_t saved;       /* kind->saved: f32 elements per sample it keeps (0: none) */
    clt_dtype ydt;      /* storage of its kept output */
};

struct clt__plan {
    int n;
    struct clt__plan_layer *layers; /* (n) */
    int nparams;
    struct clt__plan_param *params; /* (nparams) */
    size_t total;                   /* P: elements of the flat parameter tensor */
    int nbuffers;                   /* every layer's buffers, in order */
    struct clt__plan_buffer *buffers; /* (nbuffers) */
    size_t buffer_total;            /* elements of the flat f32 buffers tensor (0: none) */
    size_t counters;                /* I64 buffers: the model's host counters */
    size_t widest;                  /* the largest per-sample element count of the input and
                                       every layer's output: the gradient buffers' width */
    int first_weighted, last_weighted;
    size_t workspace;  /* the largest kind->workspace of the layers: elements per sample */
    size_t workspace_fixed; /* and the largest of their fixed parts */
    int nchildren;
    struct clt__plan_layer *children; /* every block's children, block by block */
    size_t block_widest; /* the blocks' gradient buffers: the largest per-sample element count of
                            a block's output and its children's inputs (0: no block) */
    bool tail; /* mixed precision with a layer that keeps an output after the last weighted
                  one: f32 (max_batch, outputs) gradient buffers for those layers */
};

/* Plans `spec` for input shape `in` (per sample), `outputs` outputs and storage `precision`:
 * validates the spec (clt_spec_validate), runs every layer's out_shape, lays the parameters
 * out in order and decides each output's storage. Records the thread's message and returns
 * CLT_ERR_INVALID_ARG for a spec that does not fit, CLT_ERR_HOST_MEMORY. *out is released with
 * clt__plan_free, also after a failure. */
clt_status clt__model_plan(const clt_spec *spec, const struct clt__shape *in, size_t outputs,
                           clt_dtype precision, struct clt__plan *out);
void clt__plan_free(struct clt__plan *p);

/* clt_model_mem_estimate for inputs of shape (B, in). */
clt_status clt__model_mem_estimate_shaped(const clt_spec *spec, const struct clt__shape *in,
                                          size_t outputs, const struct clt_model_params *params,
                                          uint64_t *by_category);

/* clt_model_create for inputs of shape (B, in): the same model, whose forward takes x with
 * B * numel(in) elements. clt_model_create is this with in = (in_features). */
clt_status clt__model_create_shaped(clt_model **out, clt_ctx *ctx, const clt_spec *spec,
                                    const struct clt__shape *in, size_t outputs,
                                    const struct clt_model_params *params);

/* ---- specs -------------------------------------------------------------------------------- */

/* A deep copy of src (the blocks' bodies too) into *dst, released with clt_spec_free; *dst is
 * {0, NULL} after a failure (CLT_ERR_HOST_MEMORY). */
clt_status clt__spec_copy(clt_spec *dst, const clt_spec *src);
/* Bytes enough for the text of layer l (its name and kind->format's words). */
size_t clt__spec_layer_text_size(const clt_layer_spec *l);

/* ---- the kinds ---------------------------------------------------------------------------- */

extern const struct clt__layer_kind clt__layer_linear;
extern const struct clt__layer_kind clt__layer_relu;
extern const struct clt__layer_kind clt__layer_gelu;
extern const struct clt__layer_kind clt__layer_tanh;
extern const struct clt__layer_kind clt__layer_sigmoid;
extern const struct clt__layer_kind clt__layer_silu;
extern const struct clt__layer_kind clt__layer_leakyrelu;
extern const struct clt__layer_kind clt__layer_dropout;
extern const struct clt__layer_kind clt__layer_flatten;
extern const struct clt__layer_kind clt__layer_conv;
extern const struct clt__layer_kind clt__layer_maxpool;
extern const struct clt__layer_kind clt__layer_avgpool;
extern const struct clt__layer_kind clt__layer_globalavgpool;
extern const struct clt__layer_kind clt__layer_batchnorm;
extern const struct clt__layer_kind clt__layer_residual;
extern const struct clt__layer_kind clt__layer_layernorm;
extern const struct clt__layer_kind clt__layer_embed;
extern const struct clt__layer_kind clt__layer_posembed;
extern const struct clt__layer_kind clt__layer_attention;

#endif
