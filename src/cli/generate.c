/* `cltrain generate`: text from a language model's checkpoint. The prompt is encoded with the
 * checkpoint's vocabulary; each new token is drawn on the device (clt_text_sample: temperature,
 * top-k, Philox keyed by the seed and the token's position) from the logits of its context, the
 * last T tokens (T the model's block, as nanoGPT crops the context), and its text is written to
 * stdout as soon as it is drawn. The logits come from a key/value cache while the text fits
 * the block: the prompt is one forward pass (which leaves every layer's rows, attention's keys
 * and values among them, on the device), then each token costs one position
 * (clt_model_decode, fed the token just drawn where it lies on the device). Once the text is
 * longer than T the window slides: positions are learned absolute embeddings, so every
 * position's keys and values change and each token is a forward over the last T tokens, as
 * without the cache. CLTRAIN_GENERATE=window recomputes the window for every token (the same
 * tokens; a check of the cache), and so does a model that cannot decode. */
#include "cli/run.h"

#include <stdlib.h>
#include <string.h>

/* How the logits of each token are computed. */
enum gen_mode {
    GEN_CACHE, /* one position from the key/value cache where the window allows */
    GEN_WINDOW /* a forward over the window for every token */
};

struct gen {
    clt_checkpoint *ck;
    clt_vocab *vocab;
    clt_ctx *ctx;
    clt_model *m;
    clt_spec spec;
    clt_tensor *x;  /* (1, T) i32: the window */
    clt_tensor *id; /* (1) i32: the token drawn */
    int32_t *ids;   /* the prompt's ids and the tokens drawn */
    int32_t *win;   /* (T) the window's ids on the host */
    size_t n, T, V;
    enum gen_mode mode;
    bool cached;    /* the model's cache holds the window that starts at ids[start] up to
                       position n - 1 - start, except the last token drawn (in `id`) */
    size_t start;
};

static void gen_free(struct gen *g)
{
    clt_tensor_free(g->x);
    clt_tensor_free(g->id);
    clt_model_free(g->m);
    clt_ctx_free(g->ctx);
    clt_spec_free(&g->spec);
    clt_vocab_free(g->vocab);
    clt_checkpoint_close(g->ck);
    free(g->ids);
    free(g->win);
}

/* The checkpoint, its vocabulary and the prompt's ids (room for `tokens` more); a checkpoint
 * without a vocabulary (an image model) and a prompt outside the vocabulary are usage errors. */
static int gen_open(struct gen *g, const char *load, const char *prompt, size_t tokens)
{
    if (clt_checkpoint_open(&g->ck, load) != CLT_OK) return cli_fail_status(NULL);
    struct clt_checkpoint_info info = clt_checkpoint_get_info(g->ck);
    if (!info.vocab)
        return cli_usage_error("generate: %s is not a language model's checkpoint (it has no "
                               "vocabulary): generate needs a model trained on text "
                               "(--data text:FILE)", load);
    if (clt_vocab_from_json(&g->vocab, info.vocab, strlen(info.vocab)) != CLT_OK)
        return cli_error("%s: %s", load, clt_last_errmsg());
    int32_t *p = NULL;
    size_t n = 0;
    if (clt_vocab_encode(g->vocab, prompt, strlen(prompt), "--prompt", &p, &n) != CLT_OK)
        return cli_usage_error("generate: %s (the vocabulary of %s)", clt_last_errmsg(), load);
    /* no prompt: the text starts from token 0, as nanoGPT's default start "\n" is its id 0 */
    g->n = n ? n : 1;
    g->ids = calloc(g->n + tokens, sizeof *g->ids);
    if (!g->ids) {
        free(p);
        return cli_error("out of host memory");
    }
    if (n) memcpy(g->ids, p, n * sizeof *p);
    free(p);
    g->T = info.norm.features;
    g->V = clt_vocab_size(g->vocab);
    if (clt_spec_parse(info.model_text, info.classes, &g->spec) != CLT_OK)
        return cli_error("%s: %s", load, clt_last_errmsg());
    return CLI_OK;
}

/* The generation mode CLTRAIN_GENERATE asks for (unset: cache); a usage error for another
 * value. */
static int gen_mode_of(enum gen_mode *mode)
{
    const char *v = getenv("CLTRAIN_GENERATE");
    *mode = GEN_CACHE;
    if (!v || strcmp(v, "cache") == 0) return CLI_OK;
    if (strcmp(v, "window") == 0) {
        *mode = GEN_WINDOW;
        return CLI_OK;
    }
    return cli_usage_error("generate: CLTRAIN_GENERATE=\"%s\": expected cache (the default: a "
                           "key/value cache) or window (every token recomputes the window)", v);
}

/* A cached model that cannot decode falls back to the window, saying so once. */
static void gen_check_cache(struct gen *g)
{
    char why[192];
    if (g->mode != GEN_CACHE || clt_model_can_decode(g->m, why, sizeof why)) return;
    fprintf(stderr, "generate: no key/value cache for this model, every token recomputes the "
                    "window: %s\n", why);
    g->mode = GEN_WINDOW;
}

/* The model on the device with the checkpoint's weights, and the window and token tensors. */
static int gen_model(struct gen *g, const char *load, const char *device)
{
    int rc = cli_open_ctx(device, false, false, &g->ctx);
    if (rc != CLI_OK) return rc;
    struct clt_model_params mp = clt_model_default_params();
    mp.max_batch = 1;
    size_t xd[2] = {1, g->T}, one = 1;
    if (clt_model_create(&g->m, g->ctx, &g->spec, g->T, g->V, &mp) != CLT_OK ||
        clt_checkpoint_load_model(g->ck, g->m) != CLT_OK ||
        clt_tensor_create(&g->x, g->ctx, CLT_DTYPE_I32, 2, xd, CLT_MEM_ACTIVATIONS) != CLT_OK ||
        clt_tensor_create(&g->id, g->ctx, CLT_DTYPE_I32, 1, &one, CLT_MEM_WORKSPACE) != CLT_OK)
        return cli_fail_status(g->ctx);
    g->win = calloc(g->T, sizeof *g->win);
    if (!g->win) return cli_error("out of host memory");
    cli_note_unverified(g->ck, load);
    gen_check_cache(g);
    return CLI_OK;
}

/* The logits of the window that starts at ids[start] and ends with the token before g->n, w
 * tokens: a forward over it (positions 0 .. w - 1 of x, the rest 0: the causal mask keeps later
 * positions from the row read; *row = w - 1), or, when the cache holds the window but its last
 * token, that token's position alone (*row = 0). */
static clt_status gen_logits(struct gen *g, size_t start, size_t w, clt_tensor **logits,
                             size_t *row)
{
    if (g->mode == GEN_CACHE && g->cached && g->start == start) {
        *row = 0;
        return clt_model_decode(g->m, g->id, w - 1, logits);
    }
    memset(g->win, 0, g->T * sizeof *g->win);
    memcpy(g->win, g->ids + start, w * sizeof *g->win);
    clt_status st = clt_tensor_write(g->x, g->win, true, NULL);
    if (st == CLT_OK) st = clt_model_forward(g->m, g->x, false, 0, logits);
    *row = w - 1;
    g->cached = true;
    g->start = start;
    return st;
}

/* Draws the token at position g->n from the window of the last T tokens before it. */
static int gen_step(struct gen *g, const struct clt_text_sample_params *sp, int32_t *tok)
{
    size_t w = g->n < g->T ? g->n : g->T, row = 0;
    clt_tensor *logits = NULL;
    clt_status st = gen_logits(g, g->n - w, w, &logits, &row);
    if (st == CLT_OK) st = clt_text_sample(g->id, logits, row, g->V, g->n, sp);
    if (st == CLT_OK) st = clt_tensor_read(g->id, tok, true, NULL);
    if (st != CLT_OK) return cli_fail_status(g->ctx);
    if (*tok < 0 || (size_t)*tok >= g->V)
        return cli_error("generate: the model's logits at position %zu are not numbers: its "
                         "outputs overflow", g->n);
    return CLI_OK;
}

/* Draws `tokens` tokens, writing each one's text to stdout (flushed) as it comes. */
static int gen_run(struct gen *g, size_t tokens, const struct clt_text_sample_params *sp)
{
    for (size_t i = 0; i < tokens; i++) {
        int32_t tok;
        char *text = NULL;
        size_t len = 0;
        int rc = gen_step(g, sp, &tok);
        if (rc != CLI_OK) return rc;
        if (clt_vocab_decode(g->vocab, &tok, 1, &text, &len) != CLT_OK)
            return cli_error("generate: %s", clt_last_errmsg());
        fwrite(text, 1, len, stdout);
        free(text);
        if (fflush(stdout) != 0) return CLI_FAIL; /* main() names stdout's error */
        g->ids[g->n++] = tok;
    }
    return CLI_OK;
}

int cli_generate(int argc, char **argv)
{
    const char *load = NULL, *prompt = "", *device = NULL;
    long tokens = 200, top_k = 0;
    float temperature = 1.0f;
    uint64_t seed = 1;
    bool echo = false;
    const struct cli_opt opts[] = {
        {"load", OPT_STR, &load, "a language model's checkpoint (required)", NULL},
        {"prompt", OPT_STR, &prompt,
         "the text to continue, in the checkpoint's vocabulary (default none: the text starts "
         "from token 0)", NULL},
        {"tokens", OPT_POS_INT, &tokens, "tokens to generate (200)", NULL},
        {"temperature", OPT_POS_FLOAT, &temperature,
         "the logits are divided by it: below 1 sharper, above 1 flatter (1)", NULL},
        {"top-k", OPT_NONNEG_INT, &top_k,
         "draw only among the K most likely tokens (ties with the K-th kept; 0: all; 1: the "
         "most likely) (0)", NULL},
        {"seed", OPT_U64, &seed, "of the draws: the same seed, the same text (1)", NULL},
        {"echo", OPT_FLAG, &echo, "print the prompt before the generated text", NULL},
        {"device", OPT_STR, &device, "auto, gpu, cpu, accelerator, N, P:D or a name", NULL},
        {NULL, OPT_FLAG, NULL, NULL, NULL}};
    if (cli_is_help(argc, argv)) {
        const char *usage =
            "cltrain generate --load FILE [--prompt TEXT] [options]\n"
            "writes the generated text to stdout as each token is drawn: every token from the\n"
            "  logits of the last T tokens (T the model's block) and a draw on the device from\n"
            "  softmax(logits / temperature) over the top K, keyed by the seed and the token's\n"
            "  position. The prompt costs one forward pass; then a key/value cache makes each\n"
            "  token cost one position while the text fits the block. Past T tokens the window\n"
            "  slides and, positions being learned, each token costs a forward over the last\n"
            "  T tokens, as without the cache. CLTRAIN_GENERATE=window recomputes the window\n"
            "  for every token (the same text: a check of the cache)";
        cli_print_help("generate", usage, opts);
        return CLI_OK;
    }
    int rc = cli_parse(argc, argv, opts, "generate");
    if (rc != CLI_OK) return rc;
    if (!load) return cli_usage_error("generate: --load FILE is required");
    struct clt_text_sample_params sp = clt_text_sample_default_params();
    sp.temperature = temperature;
    sp.top_k = (size_t)top_k;
    sp.seed = seed;
    struct gen g = {0};
    rc = gen_mode_of(&g.mode);
    if (rc == CLI_OK) rc = gen_open(&g, load, prompt, (size_t)tokens);
    if (rc == CLI_OK) rc = gen_model(&g, load, device);
    if (rc == CLI_OK && echo) fputs(prompt, stdout);
    if (rc == CLI_OK) rc = gen_run(&g, (size_t)tokens, &sp);
    if (rc == CLI_OK) fputc('\n', stdout);
    gen_free(&g);
    return rc;
}
