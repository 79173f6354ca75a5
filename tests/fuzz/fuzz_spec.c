/* libFuzzer harness: the model-spec parser (clt_spec_parse, in memory) on arbitrary text, then
 * validation, the output check, the documented round trip (the canonical text of a parsed spec
 * parses back to the same spec, field for field) and the model plan, the shape inference a
 * model is built from, for an input shape the text chooses on its first line:
 *   #in F | #in TxC | #in CxHxW      (F features, a (T, C) sequence, a (C, H, W) image)
 * a comment to the parser, so a seed is a spec file as cltrain reads it. Without such a line
 * the input is 784 flat features. The plan is made in f32, f16 and bf16 and the memory estimate
 * taken; a plan that is accepted must chain its shapes and count its parameters exactly (no
 * count may have wrapped): a violation aborts. FUZZ_SPEC_VERBOSE=1 prints each input's shape and
 * the f32 plan's outcome (to see what a seed reaches). Host only. */
#include "cltrain/spec.h"

#include "nn/layer_internal.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define OUTPUTS 10

/* The largest dims the header may ask for, per form: sane data, every count far below INT_MAX
 * (the data readers' own limits are larger, but a sample of more than 2^29 elements is not
 * what the shape code is fuzzed for). A larger value is reduced into range. */
static const size_t max_dim[3][3] = {{1u << 24, 0, 0}, {4096, 4096, 0}, {512, 1024, 1024}};

static int same(const clt_spec *a, const clt_spec *b)
{
    if (a->n != b->n) return 0;
    for (int i = 0; i < a->n; i++) {
        const clt_layer_spec *x = &a->layers[i], *y = &b->layers[i];
        if (x->kind != y->kind || x->out != y->out || x->bias != y->bias || x->p != y->p ||
            x->alpha != y->alpha || x->k != y->k || x->stride != y->stride || x->pad != y->pad ||
            x->body_n != y->body_n)
            return 0;
        if (x->body_n > 0) {
            const clt_spec xb = {x->body_n, x->body}, yb = {y->body_n, y->body};
            if (!same(&xb, &yb)) return 0;
        }
    }
    return 1;
}

/* The input shape of the "#in ..." first line, or 784 flat features. */
static struct clt__shape input_shape(const char *text)
{
    struct clt__shape s = {1, {784, 0, 0}};
    const char *p = text;
    if (strncmp(p, "#in ", 4) != 0) return s;
    p += 4;
    struct clt__shape got = {0, {0, 0, 0}};
    while (got.ndim < CLT__SHAPE_MAX_DIMS) {
        size_t v = 0;
        int digits = 0;
        for (; *p >= '0' && *p <= '9' && digits < 9; p++, digits++) v = v * 10 + (size_t)(*p - '0');
        if (!digits) return s;
        got.d[got.ndim++] = v;
        if (*p != 'x') break;
        p++;
    }
    for (int i = 0; i < got.ndim; i++) {
        size_t hi = max_dim[got.ndim - 1][i];
        got.d[i] = 1 + (got.d[i] + hi - 1) % hi; /* [1, hi]; 0 reads as hi */
    }
    return got;
}

/* a * b into *out; false when it wraps */
static int mul(size_t a, size_t b, size_t *out) { return !__builtin_mul_overflow(a, b, out); }

static size_t checked_numel(const struct clt__shape *s)
{
    size_t n = 1;
    if (s->ndim < 1 || s->ndim > CLT__SHAPE_MAX_DIMS) abort();
    for (int d = 0; d < s->ndim; d++)
        if (s->d[d] == 0 || !mul(n, s->d[d], &n)) abort();
    if (n != clt__shape_numel(s)) abort();
    return n;
}

/* Shapes chain from the input through every layer, every block's output is a shape, and the
 * parameters are counted and laid out exactly. */
static void check_plan(const struct clt__plan *p, const struct clt__shape *in)
{
    size_t total = 0, widest = checked_numel(in);
    const struct clt__shape *prev = in;
    for (int i = 0; i < p->n; i++) {
        const struct clt__plan_layer *l = &p->layers[i];
        if (memcmp(&l->in, prev, sizeof *prev) != 0) abort();
        size_t n = checked_numel(&l->out);
        if (n > widest) widest = n;
        for (int j = 0; j < l->nchildren; j++) {
            const struct clt__plan_layer *c = &p->children[l->child + j];
            (void)checked_numel(&c->in);
            (void)checked_numel(&c->out);
        }
        prev = &l->out;
    }
    if (widest != p->widest) abort();
    for (int i = 0; i < p->nparams; i++) {
        const struct clt_param_info *pi = &p->params[i].info;
        size_t n = 1;
        for (int d = 0; d < pi->ndim; d++)
            if (!mul(n, pi->dims[d], &n)) abort();
        if (n != pi->numel || pi->offset != total) abort();
        if (__builtin_add_overflow(total, n, &total)) abort();
    }
    if (total != p->total) abort();
}

static void plan(const clt_spec *s, const struct clt__shape *in)
{
    static const clt_dtype precisions[] = {CLT_DTYPE_F32, CLT_DTYPE_F16, CLT_DTYPE_BF16};
    for (size_t k = 0; k < sizeof precisions / sizeof *precisions; k++) {
        struct clt__plan p;
        clt_status st = clt__model_plan(s, in, OUTPUTS, precisions[k], &p);
        if (st == CLT_OK) check_plan(&p, in);
        if (k == 0 && getenv("FUZZ_SPEC_VERBOSE")) {
            char shape[64];
            clt__shape_format(in, shape, sizeof shape);
            fprintf(stderr, "fuzz_spec: input %s: %s\n", shape,
                    st == CLT_OK ? "planned" : clt_last_errmsg());
        }
        clt__plan_free(&p);
        struct clt_model_params mp = clt_model_default_params();
        uint64_t by_category[CLT_MEM__COUNT] = {0};
        mp.precision = precisions[k];
        (void)clt__model_mem_estimate_shaped(s, in, OUTPUTS, &mp, by_category);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    clt_spec s = {0}, back = {0};
    char *canon = NULL;
    if (clt_spec_parse(text, OUTPUTS, &s) == CLT_OK) {
        struct clt__shape in = input_shape(text);
        (void)clt_spec_validate(&s, (int)clt__shape_numel(&in), OUTPUTS);
        (void)clt_spec_check_output(&s);
        plan(&s, &in);
        if (clt_spec_to_string(&s, &canon) == CLT_OK) {
            if (clt_spec_parse(canon, OUTPUTS, &back) != CLT_OK || !same(&s, &back)) abort();
        }
    }
    free(canon);
    clt_spec_free(&back);
    clt_spec_free(&s);
    free(text);
    return 0;
}
