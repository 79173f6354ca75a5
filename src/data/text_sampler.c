/* The device side of text data (cltrain/text.h): both splits' token ids uploaded once in the
 * vocabulary's 8, 16 or 32-bit dtype, and the batches' windows gathered on the compute queue by
 * clt_op_textbatch_gather: Philox offsets keyed by (seed, step, window) for training, evenly spread
 * fixed windows for evaluation. Nothing is uploaded per step. */
#include "cltrain/text.h"

#include "ops/ops_internal.h"
#include "runtime/internal.h"
#include "runtime/rng_internal.h"

#include <stdlib.h>
#include <string.h>

struct clt_text_sampler {
    clt_ctx *ctx;
    struct clt_text_sampler_params p;
    clt_tensor *tok[2]; /* (n_train), (n_val) token ids */
    size_t n[2];
};

struct clt_text_sampler_params clt_text_sampler_default_params(void)
{
    struct clt_text_sampler_params p = {.batch = 12, .block = 64, .seed = 1, .eval_batches = 20};
    return p;
}

/* CLT_ERR_INVALID_ARG or CLT_ERR_SHAPE unless p and the splits suit each other. */
static clt_status check_params(clt_ctx *ctx, const clt_text *t,
                               const struct clt_text_sampler_params *p)
{
    clt_status st = CLT_OK;
    const size_t T = p->block;
    if (!t->vocab || clt_vocab_size(t->vocab) == 0)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "text sampler: the text has no vocabulary");
    if (p->batch < 1 || p->batch > INT32_MAX || T < 1 || T > INT32_MAX)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG,
                 "text sampler: batch %zu and block %zu must be in [1, 2^31)", p->batch, T);
    if (p->eval_batches < 1 || p->eval_batches > UINT32_MAX / p->batch)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG,
                 "text sampler: %zu evaluation batches of %zu windows: expected 1 to 2^32 - 1 "
                 "windows",
                 p->eval_batches, p->batch);
    if (t->n_train > CLT_TEXT_MAX_TOKENS || t->n_val > CLT_TEXT_MAX_TOKENS)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "text sampler: a split holds more than %u tokens",
                 CLT_TEXT_MAX_TOKENS);
    for (int v = 0; v < 2; v++) {
        const size_t n = v ? t->n_val : t->n_train;
        if (n < T + 1)
            CLT_FAIL(ctx, CLT_ERR_SHAPE,
                     "%s: the %s split holds %zu tokens, fewer than a window of block %zu + 1 = "
                     "%zu: use a smaller --block or a longer text",
                     v ? t->val_source : t->source, v ? "validation" : "training", n, T, T + 1);
    }
fail:
    return st;
}

/* ids (n) converted to dtype d in a new host array *out. */
static clt_status narrow(clt_ctx *ctx, const int32_t *ids, size_t n, clt_dtype d, void **out)
{
    clt_status st = CLT_OK;
    *out = NULL;
    if (d == CLT_DTYPE_U8) {
        uint8_t *u = NULL;
        CLT_ALLOC(ctx, u, n);
        for (size_t i = 0; i < n; i++)
            u[i] = (uint8_t)ids[i];
        *out = u;
    } else if (d == CLT_DTYPE_U16) {
        uint16_t *u = NULL;
        CLT_ALLOC(ctx, u, n);
        for (size_t i = 0; i < n; i++)
            u[i] = (uint16_t)ids[i];
        *out = u;
    } else {
        int32_t *u = NULL;
        CLT_ALLOC(ctx, u, n);
        memcpy(u, ids, n * sizeof *ids);
        *out = u;
    }
fail:
    return st;
}

clt_status clt_text_sampler_create(clt_text_sampler **out, clt_ctx *ctx, const clt_text *text,
                                   const struct clt_text_sampler_params *p)
{
    clt_status st = CLT_OK;
    struct clt_text_sampler_params prm = p ? *p : clt_text_sampler_default_params();
    clt_text_sampler *s = NULL;
    void *host[2] = {NULL, NULL};
    cl_event ev[2] = {0};
    cl_uint nev = 0;
    CLT_ASSERT(out && ctx && text);
    *out = NULL;
    CLT_TRY(check_params(ctx, text, &prm));
    CLT_ALLOC(ctx, s, 1);
    s->ctx = ctx;
    s->p = prm;
    s->n[0] = text->n_train;
    s->n[1] = text->n_val;
    const clt_dtype d = clt_vocab_dtype(text->vocab);
    for (int v = 0; v < 2; v++) {
        CLT_TRY(narrow(ctx, v ? text->val : text->train, s->n[v], d, &host[v]));
        CLT_TRY(clt_tensor_create(&s->tok[v], ctx, d, 1, &s->n[v], CLT_MEM_DATA));
        CLT_TRY(clt_tensor_write(s->tok[v], host[v], false, &ev[nev++]));
    }
    CLT_TRY(clt_ctx_wait(ctx, CLT_WAIT_SETUP, nev, ev));
    *out = s;
    s = NULL;
fail:
    for (cl_uint i = 0; i < nev; i++)
        if (ev[i]) clReleaseEvent(ev[i]);
    if (s && nev) clt_ctx_finish(ctx, CLT_WAIT_SETUP); /* host arrays go: uploads must be done */
    free(host[0]);
    free(host[1]);
    clt_text_sampler_free(s);
    return st;
}

void clt_text_sampler_free(clt_text_sampler *s)
{
    if (!s) return;
    clt_tensor_free(s->tok[0]);
    clt_tensor_free(s->tok[1]);
    free(s);
}

struct clt_text_sampler_params clt_text_sampler_params(const clt_text_sampler *s)
{
    return s->p;
}

const clt_tensor *clt_text_sampler_tokens(const clt_text_sampler *s, bool val)
{
    return s->tok[val ? 1 : 0];
}

clt_status clt_text_sampler_train_batch(clt_text_sampler *s, uint64_t step, clt_tensor *x,
                                        clt_tensor *y)
{
    CLT_ASSERT(s && x && y);
    struct clt_textbatch_windows w = {.seed = s->p.seed,
                                 .stream = clt_rng_stream(CLT_RNG_TEXT, step),
                                 .count = s->n[0] - s->p.block};
    return clt_op_textbatch_gather(x, y, s->tok[0], s->p.batch, s->p.block, &w);
}

clt_status clt_text_sampler_eval_batch(clt_text_sampler *s, size_t k, clt_tensor *x,
                                       clt_tensor *y)
{
    CLT_ASSERT(s && x && y);
    if (k >= s->p.eval_batches)
        return clt__fail(s->ctx, CLT_ERR_INVALID_ARG,
                         "text sampler: evaluation batch %zu of %zu (0 .. %zu)", k,
                         s->p.eval_batches, s->p.eval_batches - 1);
    struct clt_textbatch_windows w = {.count = s->n[1] - s->p.block,
                                 .even = true,
                                 .first = k * s->p.batch,
                                 .total = s->p.eval_batches * s->p.batch};
    return clt_op_textbatch_gather(x, y, s->tok[1], s->p.batch, s->p.block, &w);
}

struct clt_text_sample_params clt_text_sample_default_params(void)
{
    struct clt_text_sample_params p = {.temperature = 1.0f, .top_k = 0, .seed = 1};
    return p;
}

clt_status clt_text_sample(clt_tensor *id, const clt_tensor *logits, size_t row, size_t V,
                           uint64_t position, const struct clt_text_sample_params *p)
{
    CLT_ASSERT(id && logits && p);
    struct clt_sample_params sp = {.temperature = p->temperature,
                                   .top_k = p->top_k,
                                   .seed = p->seed,
                                   .stream = clt_rng_stream(CLT_RNG_GENERATE, 0),
                                   .index = position};
    return clt_op_sample(id, logits, row, V, &sp);
}
