/* Text data for language models: a UTF-8 text tokenised by character (the sorted set of the
 * training text's Unicode code points, as nanoGPT's shakespeare_char) or by byte (256 ids), its
 * vocabulary (written to and read from a JSON string, for checkpoints), the training and
 * validation splits, and the token ids resident on the device with a sampler that gathers the
 * batches' windows there: no upload per step, the same batches on every device.
 *
 * Usage:
 *
 *     clt_text text;
 *     if (clt_text_open(&text, "input.txt", NULL, NULL) != CLT_OK) puts(clt_last_errmsg());
 *     struct clt_text_sampler_params sp = clt_text_sampler_default_params();
 *     sp.batch = 12, sp.block = 64, sp.seed = 1;
 *     clt_text_sampler *s;
 *     clt_text_sampler_create(&s, ctx, &text, &sp);   // text may be freed afterwards
 *     clt_text_sampler_train_batch(s, step, x, y);    // x, y: (B, T) i32 on the device
 *     clt_text_sampler_free(s);
 *     clt_text_free(&text);
 */
#ifndef CLTRAIN_TEXT_H
#define CLTRAIN_TEXT_H

#include "cltrain/export.h"

#include "cltrain/errors.h"
#include "cltrain/status.h"
#include "cltrain/tensor.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The most tokens a split may hold (window offsets are 32-bit on the device). */
#define CLT_TEXT_MAX_TOKENS 0xffffffffu

/* How text becomes token ids. */
typedef enum clt_text_tokens {
    CLT_TEXT_CHAR = 0, /* one id per Unicode code point of the vocabulary, in code point order */
    CLT_TEXT_BYTE = 1  /* one id per byte value: 256 ids, any bytes */
} clt_text_tokens;

/* "char", "byte"; "unknown" otherwise. Thread-safe. */
CLT_API const char *clt_text_tokens_name(clt_text_tokens t);
/* Parses "char" or "byte" into *out; CLT_ERR_INVALID_ARG naming the text otherwise (message in
 * clt_last_errmsg). Thread-safe. */
CLT_API clt_status clt_text_tokens_parse(const char *s, clt_text_tokens *out);

/* ---- the vocabulary ---------------------------------------------------------------------- */

/* An immutable vocabulary: ids 0 .. size - 1, each standing for one symbol (a code point in
 * char mode, a byte value in byte mode), in increasing symbol order. Thread-safe to read. */
typedef struct clt_vocab clt_vocab;

/* The vocabulary of text[0 .. len): in char mode the sorted set of its code points (it must be
 * valid UTF-8: no overlong forms, surrogates or code points above U+10FFFF; otherwise
 * CLT_ERR_FORMAT naming `source` and the byte offset of the first bad sequence), in byte mode
 * all 256 bytes whatever the text. `source` names the text in messages (NULL: "text"). Returns
 * CLT_OK, CLT_ERR_INVALID_ARG (unknown kind), CLT_ERR_FORMAT or CLT_ERR_HOST_MEMORY. The
 * caller frees *out with clt_vocab_free. Thread-safe. */
CLT_API clt_status clt_vocab_from_text(clt_vocab **out, clt_text_tokens kind, const char *text,
                                       size_t len, const char *source);
CLT_API void clt_vocab_free(clt_vocab *v); /* accepts NULL */
CLT_API clt_text_tokens clt_vocab_kind(const clt_vocab *v);
CLT_API size_t clt_vocab_size(const clt_vocab *v); /* V */
/* The code point (char) or byte value (byte) of id; id < V (a programmer error otherwise). */
CLT_API uint32_t clt_vocab_symbol(const clt_vocab *v, size_t id);
/* The dtype the token ids are stored in on the device: u8 for V <= 256, u16 for V <= 65536,
 * else i32. */
CLT_API clt_dtype clt_vocab_dtype(const clt_vocab *v);

/* The vocabulary as one line of JSON (NUL-terminated, malloc'ed: the caller frees it), for a
 * checkpoint's metadata: {"tokens":"char","symbols":["\n"," ","A",...]} with each symbol a
 * one-character string in id order, or {"tokens":"byte","size":256}. Returns CLT_OK or
 * CLT_ERR_HOST_MEMORY. Thread-safe. */
CLT_API clt_status clt_vocab_to_json(const clt_vocab *v, char **out);
/* Reads what clt_vocab_to_json wrote: CLT_ERR_FORMAT with a message saying what is wrong for
 * anything else (not JSON, unknown "tokens", a symbol that is not exactly one character, symbols
 * not in increasing order or repeated, no symbols, a byte size other than 256).
 * CLT_ERR_HOST_MEMORY. Thread-safe. */
CLT_API clt_status clt_vocab_from_json(clt_vocab **out, const char *json, size_t len);

/* The ids of text[0 .. len) under v into *ids (malloc'ed, *n of them; the caller frees it;
 * NULL when len is 0). In char mode the text must be valid UTF-8 (CLT_ERR_FORMAT naming
 * `source` and the byte offset otherwise) and every character must be in v: otherwise
 * CLT_ERR_FORMAT naming the first character outside it and its position, e.g.
 *   val.txt: line 3, column 7: 'é' (U+00E9) is not in the vocabulary (65 characters)
 * (lines count "\n", columns count characters, both from 1). Byte mode takes any bytes.
 * CLT_ERR_HOST_MEMORY. Thread-safe. */
CLT_API clt_status clt_vocab_encode(const clt_vocab *v, const char *text, size_t len,
                                    const char *source, int32_t **ids, size_t *n);
/* The text of ids[0 .. n) (malloc'ed, NUL-terminated, *len bytes without the NUL; the caller
 * frees it): UTF-8 in char mode, the bytes in byte mode. An id outside [0, V) is
 * CLT_ERR_INVALID_ARG naming its position. CLT_ERR_HOST_MEMORY. Thread-safe. */
CLT_API clt_status clt_vocab_decode(const clt_vocab *v, const int32_t *ids, size_t n, char **out,
                                    size_t *len);

/* ---- a text data set ----------------------------------------------------------------------- */

/* The two splits as token ids in host memory. Owns every pointer; release with clt_text_free. */
typedef struct clt_text {
    clt_vocab *vocab;
    int32_t *train;       /* (n_train) token ids */
    int32_t *val;         /* (n_val) token ids */
    size_t n_train, n_val;
    bool val_from_file;   /* the validation split is its own file (else the text's last 10 %) */
    char source[512];     /* the training file */
    char val_source[512]; /* the validation file, or the training file */
} clt_text;

struct clt_text_params {
    clt_text_tokens tokens; /* default CLT_TEXT_CHAR */
    /* NULL (default): the vocabulary is built from the training file (tokens). Otherwise both
     * files are encoded with this one (a checkpoint's; copied, tokens ignored), and a character
     * outside it is an error naming it (clt_vocab_encode). */
    const clt_vocab *vocab;
};
/* Char tokens, the vocabulary built from the text. Thread-safe. */
CLT_API struct clt_text_params clt_text_default_params(void);

/* Reads the UTF-8 text file `path` (gzip-compressed or raw) and tokenises it (p: NULL for the
 * defaults). The vocabulary, unless p->vocab gives one, is that of the whole training file
 * (clt_vocab_from_text). With val_path (a file, or NULL) that file is the validation split,
 * encoded with the same vocabulary; without it the first n_train = floor(0.9 n) tokens of the
 * n are the training split and the rest the validation split, as nanoGPT's
 * data[:int(n*0.9)]. A text (either file) of fewer than 2 tokens, or a split above
 * CLT_TEXT_MAX_TOKENS, is CLT_ERR_FORMAT naming the file. Returns CLT_OK,
 * CLT_ERR_INVALID_ARG, CLT_ERR_IO, CLT_ERR_FORMAT or CLT_ERR_HOST_MEMORY; *out is overwritten
 * without being freed, and zeroed on failure. Thread-safe. */
CLT_API clt_status clt_text_open(clt_text *out, const char *path, const char *val_path,
                                 const struct clt_text_params *p);
/* clt_text_open on texts in memory: text[0 .. len) and, when val is not NULL, val[0 ..
 * val_len) as the validation split; `source` names them in messages (NULL: "text"). */
CLT_API clt_status clt_text_from_memory(clt_text *out, const char *text, size_t len,
                                        const char *val, size_t val_len, const char *source,
                                        const struct clt_text_params *p);
/* Opens a text data set by name:
 *   "shakespeare"             the file $CLTRAIN_DATA_DIR/shakespeare/shakespeare.txt
 *                             (CLTRAIN_DATA_DIR unset or empty: /usr/share/datasets, as
 *                             clt_data_open's fashion-mnist), which tools/get_shakespeare.sh
 *                             writes; a missing file is CLT_ERR_IO saying so
 *   "text:FILE[,VAL_FILE]"    FILE and the optional VAL_FILE (paths without commas)
 * then as clt_text_open. CLT_ERR_INVALID_ARG for any other spec. Thread-safe. */
CLT_API clt_status clt_text_open_spec(clt_text *out, const char *spec,
                                      const struct clt_text_params *p);
/* Frees every array and the vocabulary and zeroes *t. Accepts NULL and zeroed structs. */
CLT_API void clt_text_free(clt_text *t);

/* ---- the device sampler ------------------------------------------------------------------ */

/* Windows of T + 1 consecutive tokens, gathered on the device into inputs x (B, T) and targets
 * y (B, T), both i32, y[b][t] = x[b][t + 1] of the same window.
 * Training: window w of step s starts at offset
 *     o = (u32(2w) | u32(2w + 1) << 32) mod (n_train - T)
 * where u32(i) is element i of the Philox stream clt_rng_stream(CLT_RNG_TEXT, s) under the
 * seed (src/runtime/rng_internal.h; cl/rng.cl computes the same bits), so o is uniform over the
 * n_train - T possible starts (nanoGPT's torch.randint(len(data) - block_size)) up to a bias
 * below 2^-32. The windows of step s depend on (seed, s, w) alone: the same on every device, for
 * any history, so a run resumed at step s continues exactly.
 * Evaluation: eval_batches fixed batches whose J = eval_batches * B windows are spread evenly
 * over the validation split: window j (batch j / B, row j % B) starts at
 *     o = floor(j * (n_val - T - 1) / (J - 1))      (0 when J is 1),
 * independent of the seed, so that two runs and two devices average the loss over the same
 * tokens. */
struct clt_text_sampler_params {
    size_t batch;        /* B, windows per batch (default 12) */
    size_t block;        /* T, the model's context length (default 64) */
    uint64_t seed;       /* of the training windows (default 1) */
    size_t eval_batches; /* fixed validation batches (default 20) */
};
CLT_API struct clt_text_sampler_params clt_text_sampler_default_params(void);

typedef struct clt_text_sampler clt_text_sampler;

/* Copies both splits' token ids to ctx (in clt_vocab_dtype(text->vocab), counted as
 * CLT_MEM_DATA; set-up waits as CLT_WAIT_SETUP); text may be freed afterwards. Returns CLT_OK,
 * CLT_ERR_INVALID_ARG (B, T or eval_batches 0, B or T above 2^31 - 1, an empty vocabulary) or
 * CLT_ERR_SHAPE when a split holds fewer than T + 1 tokens, naming the split, its file and both
 * numbers; CLT_ERR_OUT_OF_MEMORY, CLT_ERR_HOST_MEMORY, CLT_ERR_OPENCL. Not thread-safe (ctx). */
CLT_API clt_status clt_text_sampler_create(clt_text_sampler **out, clt_ctx *ctx,
                                           const clt_text *text,
                                           const struct clt_text_sampler_params *p);
CLT_API void clt_text_sampler_free(clt_text_sampler *s); /* no host wait; accepts NULL */
CLT_API struct clt_text_sampler_params clt_text_sampler_params(const clt_text_sampler *s);
/* The token ids of a split on the device: (n_train) or (n_val) in the vocabulary's dtype. */
CLT_API const clt_tensor *clt_text_sampler_tokens(const clt_text_sampler *s, bool val);
/* Enqueues (compute queue, no host wait, nothing uploaded) the gather of step `step`'s training
 * batch into x and y, i32 tensors of B x T elements of s's ctx. CLT_ERR_SHAPE,
 * CLT_ERR_DEVICE_MISMATCH or CLT_ERR_OPENCL. Not thread-safe (ctx). */
CLT_API clt_status clt_text_sampler_train_batch(clt_text_sampler *s, uint64_t step, clt_tensor *x,
                                                clt_tensor *y);
/* Likewise for evaluation batch k (0 .. eval_batches - 1; CLT_ERR_INVALID_ARG otherwise). */
CLT_API clt_status clt_text_sampler_eval_batch(clt_text_sampler *s, size_t k, clt_tensor *x,
                                               clt_tensor *y);

/* ---- drawing generated text ----------------------------------------------------------------- */

/* How clt_text_sample draws a token, as tools/torch_gpt.py's rule. */
struct clt_text_sample_params {
    float temperature; /* the logits are divided by it: > 0 (default 1) */
    size_t top_k;      /* only the k largest logits (ties with the k-th kept); 0 (default): all */
    uint64_t seed;     /* of the draws (default 1) */
};
CLT_API struct clt_text_sample_params clt_text_sample_default_params(void);

/* Enqueues (compute queue, no host wait) the draw of the token at `position` of a generated
 * text into id (an i32 tensor of at least one element): from row `row` of logits (f32, rows of
 * V), softmax(logits / temperature) over the top_k largest, and a multinomial draw by the
 * uniform element `position` of the Philox stream of generated text under p->seed (the same
 * token on every device for the same logits). id reads -1 when no logit is a number. Returns
 * CLT_OK, CLT_ERR_SHAPE (dtypes, a row outside logits), CLT_ERR_INVALID_ARG (a temperature not
 * above 0), CLT_ERR_DEVICE_MISMATCH or CLT_ERR_OPENCL. Not thread-safe (the tensors' ctx). */
CLT_API clt_status clt_text_sample(clt_tensor *id, const clt_tensor *logits, size_t row, size_t V,
                                   uint64_t position, const struct clt_text_sample_params *p);

#ifdef __cplusplus
}
#endif
#endif
