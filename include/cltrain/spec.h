/* The model spec: a short text naming a model's layers in order, the same on the command line
 * and in a file ("linear 256, relu, dropout 0.1, linear 10"), its parser, its validation against
 * the data and its canonical text (stored in checkpoints). Host-only; no ctx involved: failures
 * are recorded for the calling thread (clt_last_errmsg). Thread-safe: no shared state.
 *
 * Usage:
 *
 *     clt_spec spec = {0, NULL};
 *     if (clt_spec_parse("linear 256, relu, dropout 0.1, linear 10", 10, &spec) != CLT_OK)
 *         puts(clt_last_errmsg());
 *     clt_spec_free(&spec);
 */
#ifndef CLTRAIN_SPEC_H
#define CLTRAIN_SPEC_H

#include "cltrain/export.h"

#include "cltrain/errors.h"
#include "cltrain/status.h"

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Grammar.
 *   spec    := entry { (',' | newline) entry }      at most 1024 entries; blank lines and a
 *                                                    trailing comma are ignored, an empty
 *                                                    entry before a comma ("a,,b") is an error
 *   comment := '#' to the end of the line            (removed before parsing)
 *   entry   := "linear" OUT ["nobias"] ["tied"]       fully connected, bias on by default;
 *                                                    on a sequence (B, T, C) it acts on each
 *                                                    position, as nn.Linear(C, OUT) on the
 *                                                    last dimension: (B, T, OUT); an image
 *                                                    (B, C, H, W) is taken as its C*H*W
 *                                                    flattened features. OUT may be "V": the
 *                                                    vocabulary (the model's outputs). "tied"
 *                                                    (after "nobias", GPT-2's head) multiplies
 *                                                    by the token embedding's (V, D) matrix:
 *                                                    one tensor, no parameter of its own
 *            | "embed" D                              token embedding, as nn.Embedding(V, D):
 *                                                    the model's first layer, its input (B, T)
 *                                                    i32 token ids, output (B, T, D); V is the
 *                                                    model's outputs (the vocabulary)
 *            | "posembed"                             learned positions: x + P for x (B, T, D),
 *                                                    P (T, D); "{i}.weight" (T, D)
 *            | "relu" | "gelu" | "tanh" | "sigmoid"   elementwise; gelu is the tanh approximation
 *            | "silu"                                 elementwise x * sigmoid(x), as nn.SiLU
 *            | "leakyrelu" [A]                        elementwise x > 0 ? x : A x, as nn.LeakyReLU;
 *                                                    A defaults to 0.01
 *            | "dropout" P                            0 <= P < 1
 *            | "flatten"                              (B, C, H, W) -> (B, C*H*W), (B, T, C) ->
 *                                                    (B, T*C); the identity on (B, features)
 *            | "conv" OUT "k"K ["s"S] ["p"P] ["nobias"] 2-D convolution of (B, C, H, W), as
 *                                                    nn.Conv2d(C, OUT, K, stride=S, padding=P):
 *                                                    K x K kernels, S defaults to 1, P (zero
 *                                                    padding) to 0, bias on by default
 *            | "maxpool" K ["s"S]                     max over K x K windows of (B, C, H, W),
 *                                                    as nn.MaxPool2d(K, stride=S): no padding,
 *                                                    floor mode, S defaults to K (written
 *                                                    back only when it differs: "maxpool 3 s2");
 *                                                    K and S in [1, CLT_SPEC_MAX_KERNEL]
 *            | "avgpool" K ["s"S]                     the mean of each window, likewise, as
 *                                                    nn.AvgPool2d(K, stride=S)
 *            | "globalavgpool"                        (B, C, H, W) -> (B, C), the mean of each
 *                                                    channel: nn.AdaptiveAvgPool2d(1) then
 *                                                    flatten, so a linear layer can follow
 *            | "batchnorm"                            batch normalisation: per channel over
 *                                                    (B, H, W) of (B, C, H, W) as
 *                                                    nn.BatchNorm2d(C), per feature over B of
 *                                                    (B, F) as nn.BatchNorm1d(F); eps 1e-5,
 *                                                    momentum 0.1, affine, running statistics
 *            | "layernorm"                            layer normalisation over the last
 *                                                    dimension, as nn.LayerNorm(D): each
 *                                                    sample of (B, F) over its F features, each
 *                                                    position of (B, T, C) over its C; eps
 *                                                    1e-5, elementwise affine (weight 1, bias 0
 *                                                    at init), no running statistics. A
 *                                                    (C, H, W) input is an error (flatten first)
 *            | "attention" H ["causal"] ["nobias"]
 *                                                    multi-head self-attention on a sequence
 *                                                    (B, T, D), as nn.MultiheadAttention(D, H)
 *                                                    applied to (x, x, x): a D -> 3D input
 *                                                    projection, softmax(q k^T / sqrt(D/H)) v
 *                                                    per head (with "causal", position t sees
 *                                                    positions <= t only), a D -> D output
 *                                                    projection; H in [1, CLT_SPEC_MAX_WIDTH]
 *                                                    must divide D; "nobias" drops both
 *                                                    projections' biases. Parameters
 *                                                    "{i}.in_proj_weight" (3D, D),
 *                                                    "{i}.in_proj_bias" (3D),
 *                                                    "{i}.out_proj.weight" (D, D),
 *                                                    "{i}.out_proj.bias" (D)
 *            | "residual" "{" layers "}"               a block whose output is body(x) +
 *                                                    shortcut(x), as torchvision's BasicBlock
 *                                                    without its final ReLU (write
 *                                                    "residual { ... }, relu"); layers :=
 *                                                    entry { (',' | newline) entry }, at least
 *                                                    one, no residual among them; the braces
 *                                                    may span lines. The shortcut is the
 *                                                    identity when body(x) has x's shape, else a
 *                                                    1x1 convolution without bias (the stride
 *                                                    that maps H, W to the body's output size),
 *                                                    followed by a batchnorm when the body has
 *                                                    one (torchvision's downsample); no such
 *                                                    stride is an error naming the layer.
 *                                                    Parameters "{i}.body.{j}.*" and
 *                                                    "{i}.proj.0.weight", "{i}.proj.1.*"
 *            | preset                                 only as the whole spec
 *   preset  := "mlp"      = linear 256, relu, linear 128, relu, linear N
 *            | "logreg"   = linear N                  N: the number of classes given to the parser
 *            | "cnn"      = conv 32 k3 p1, batchnorm, relu, maxpool 2, conv 64 k3 p1, batchnorm,
 *                         relu, maxpool 2, flatten, dropout 0.25, linear 128, relu, linear N
 *                                                    (needs (1, 28, 28)-like image inputs)
 *            | "resnet"   = conv 32 k3 p1, batchnorm, relu, then two blocks
 *                         "residual { conv C k3 [s2] p1, batchnorm, relu, conv C k3 p1,
 *                         batchnorm }, relu" at each of C = 32, 64, 128 (the first block of 64
 *                         and of 128 with s2), globalavgpool, linear N  (696,970 parameters for
 *                         10 classes; (C, H, W) inputs such as 1x28x28)
 * Words are case-insensitive; spaces and tabs separate the words of an entry and are otherwise
 * ignored. OUT is a decimal integer in [1, CLT_SPEC_MAX_WIDTH]; P and A decimal numbers (A finite,
 * of either sign). */

#define CLT_SPEC_MAX_LAYERS 1024 /* the most layers a spec may have */

#define CLT_SPEC_MAX_WIDTH (1 << 24) /* the widest linear layer the parser accepts */
/* "linear V": the width is the vocabulary, which is the model's number of outputs (a language
 * model's classes are its tokens); clt_layer_spec.out holds this value */
#define CLT_SPEC_WIDTH_V (-1)
#define CLT_SPEC_MAX_KERNEL 255 /* the largest kernel size, stride and padding of a conv layer */

typedef enum clt_layer_kind {
    CLT_LAYER_LINEAR = 0,
    CLT_LAYER_RELU,
    CLT_LAYER_GELU, /* tanh approximation, as PyTorch's GELU(approximate='tanh') */
    CLT_LAYER_TANH,
    CLT_LAYER_SIGMOID,
    CLT_LAYER_DROPOUT,
    CLT_LAYER_FLATTEN,
    CLT_LAYER_SILU,      /* x * sigmoid(x), as PyTorch's nn.SiLU */
    CLT_LAYER_LEAKYRELU, /* x > 0 ? x : alpha * x, as PyTorch's nn.LeakyReLU */
    CLT_LAYER_CONV,      /* 2-D convolution, as PyTorch's nn.Conv2d */
    CLT_LAYER_MAXPOOL,   /* as PyTorch's nn.MaxPool2d(K, stride=S) */
    CLT_LAYER_AVGPOOL,   /* as PyTorch's nn.AvgPool2d(K, stride=S) */
    CLT_LAYER_GLOBALAVGPOOL, /* (C, H, W) -> (C): nn.AdaptiveAvgPool2d(1), then flattened */
    CLT_LAYER_BATCHNORM, /* nn.BatchNorm2d on (C, H, W), nn.BatchNorm1d on (F) */
    CLT_LAYER_RESIDUAL,  /* "residual { LAYERS }": body(x) + shortcut(x), as torchvision's
                            BasicBlock without its final ReLU */
    CLT_LAYER_LAYERNORM, /* nn.LayerNorm over the last dimension: (F) or (T, C) inputs */
    CLT_LAYER_EMBED,     /* token embedding: ids (T) -> (T, D), as nn.Embedding(V, D) */
    CLT_LAYER_POSEMBED,  /* learned positions (T, D) added to a (T, D) input */
    CLT_LAYER_ATTENTION, /* multi-head self-attention on (T, D), as nn.MultiheadAttention */
    CLT_LAYER__COUNT
} clt_layer_kind;

/* One layer. Fields a kind does not use are 0 (false for bias). */
typedef struct clt_layer_spec {
    clt_layer_kind kind;
    int out;   /* CLT_LAYER_LINEAR: output width OUT; CLT_LAYER_CONV: output channels OUT;
                  CLT_LAYER_EMBED: the embedding width D; in [1, CLT_SPEC_MAX_WIDTH], or for
                  CLT_LAYER_LINEAR CLT_SPEC_WIDTH_V ("linear V": the vocabulary) */
    bool bias; /* CLT_LAYER_LINEAR, CLT_LAYER_CONV, CLT_LAYER_ATTENTION: adds bias vectors */
    bool tied; /* CLT_LAYER_LINEAR ("linear V nobias tied"): its weight is the token embedding's
                  (V, D) matrix, one tensor shared with the embed layer before it */
    float p;   /* CLT_LAYER_DROPOUT: probability of zeroing an element, in [0, 1) */
    float alpha; /* CLT_LAYER_LEAKYRELU: the slope for negative inputs, finite (the parser's
                    default 0.01) */
    int k;      /* CLT_LAYER_CONV: kernel size K (K x K), in [1, CLT_SPEC_MAX_KERNEL];
                   CLT_LAYER_MAXPOOL, CLT_LAYER_AVGPOOL: window size K (K x K), likewise */
    int stride; /* CLT_LAYER_CONV: stride S, in [1, CLT_SPEC_MAX_KERNEL] (the parser's default 1);
                   CLT_LAYER_MAXPOOL, CLT_LAYER_AVGPOOL: likewise (the parser's default K) */
    int pad;    /* CLT_LAYER_CONV: zero padding P on each side, in [0, CLT_SPEC_MAX_KERNEL] */
    int vocab;  /* not part of the text: the model's vocabulary (its outputs), which the model
                   fills in its own copy for CLT_LAYER_EMBED's table and "linear V"; 0 in a
                   parsed spec */
    int heads;  /* CLT_LAYER_ATTENTION: heads H, in [1, CLT_SPEC_MAX_WIDTH] (H divides D) */
    bool causal; /* CLT_LAYER_ATTENTION: position t attends to positions <= t only */
    int body_n; /* CLT_LAYER_RESIDUAL: the block's layers, at least 1, none of them a residual */
    struct clt_layer_spec *body; /* CLT_LAYER_RESIDUAL: (body_n), malloc'ed and owned by the spec
                                    (clt_spec_free releases it); NULL for other kinds */
} clt_layer_spec;

/* A model spec: n layers, first to last. Owned by the caller; release with clt_spec_free. */
typedef struct clt_spec {
    int n;
    clt_layer_spec *layers; /* (n), malloc'ed; NULL when n == 0 */
} clt_spec;

/* Parses `text` (grammar above) into *out, which the caller releases with clt_spec_free.
 * `classes` is the N of the presets; it is only read when the text is a preset (pass 0 when it
 * is not known yet: a preset then fails with CLT_ERR_INVALID_ARG). On failure *out is {0, NULL}
 * and the thread's message names the layer, its position and what was expected, on one line;
 * for "linear 256, relu, linaer 128":
 *   model spec: layer 3 ("linaer 128") at column 19: unknown layer "linaer"; expected linear,
 *   relu, gelu, tanh, sigmoid, dropout, flatten, silu, leakyrelu, conv, maxpool, avgpool,
 *   globalavgpool, batchnorm, residual, layernorm, embed, posembed or attention
 * Positions are 1-based and say "line L, column C" when the text has several lines.
 * Returns CLT_OK; CLT_ERR_FORMAT for a text that does not follow the grammar (including an
 * empty one); CLT_ERR_INVALID_ARG for a preset without a valid `classes`; CLT_ERR_HOST_MEMORY.
 * `text` and `out` must not be NULL. */
CLT_API clt_status clt_spec_parse(const char *text, int classes, clt_spec *out);

/* Like clt_spec_parse on the contents of the file at `path` (at most 1 MiB of text); messages
 * start with `model spec file "<path>":` and always give line and column. Whether a command-line
 * argument is a file or a spec is the caller's choice. A FIFO (a named pipe, or the shell's
 * "<(echo linear 10)") is read until its writer closes it, waiting at most 5 s each time for
 * more text: a FIFO that no writer opens is an error after 5 s, not a hang. A directory, device
 * or socket is refused. Returns what clt_spec_parse returns, and CLT_ERR_IO when the file cannot
 * be read. */
CLT_API clt_status clt_spec_parse_file(const char *path, int classes, clt_spec *out);

/* Checks that `s` can be built for data with `in_features` inputs per sample and `outputs`
 * outputs (classes, or regression targets): both positive, at least one linear layer, the last
 * linear layer `outputs` wide ("the last linear layer has 12 outputs but the data has 10
 * classes"), no conv layer after the last linear layer (the last layer with weights is linear),
 * and every layer's fields in range (for specs built by hand). Layers without weights after the
 * last linear layer are allowed. Shapes (a conv's (C, H, W) input) are checked when the model is
 * built. Returns CLT_OK or CLT_ERR_INVALID_ARG. */
CLT_API clt_status clt_spec_validate(const clt_spec *s, int in_features, int outputs);

/* Whether the model of `s` takes token ids (its first layer is an embed layer): its input is
 * then (B, T) i32 ids, and its vocabulary its number of outputs. Thread-safe. */
CLT_API bool clt_spec_takes_tokens(const clt_spec *s);

/* Rejects what is almost certainly a mistake in a model to be trained: an elementwise activation
 * (relu, gelu, tanh, sigmoid, silu, leakyrelu) after the last linear layer, which would clip or
 * squash the logits the loss reads. Models built for other uses (tests of the layers) may have
 * one: clt_model_create does not call this; the cltrain program does before training. Returns
 * CLT_OK or CLT_ERR_INVALID_ARG with a message naming the layer. Thread-safe. */
CLT_API clt_status clt_spec_check_output(const clt_spec *s);

/* The canonical text of `s`: layers joined by ", ", lower-case words, "nobias" when a linear
 * layer has no bias, the shortest decimal of P (and of leakyrelu's A, always written) that reads
 * back as the same float ("dropout 0.1", "leakyrelu 0.01"), e.g. "linear 256, relu, dropout 0.1,
 * linear 10". Presets appear expanded. For a spec whose layers are in range (see
 * clt_spec_validate) and whose unused fields are 0, clt_spec_parse of the text gives back a spec
 * equal to `s`, field for field. *out is malloc'ed and the caller frees it with free(); an empty
 * spec gives "". Returns CLT_OK, CLT_ERR_INVALID_ARG for a layer kind out of range, or
 * CLT_ERR_HOST_MEMORY (*out is then NULL). */
CLT_API clt_status clt_spec_to_string(const clt_spec *s, char **out);

/* Releases the layers and leaves *s as {0, NULL}. Accepts NULL and an already freed spec. */
CLT_API void clt_spec_free(clt_spec *s);

/* "linear", "relu", "gelu", "tanh", "sigmoid", "dropout", "flatten", "silu", "leakyrelu",
 * "conv", "maxpool", "avgpool", "globalavgpool", "batchnorm", "residual", "layernorm", "embed",
 * "posembed"; "unknown" out of range. */
CLT_API const char *clt_layer_kind_name(clt_layer_kind k);

/* The grammar of kind k's entry, its name and argument words: "linear OUT [nobias]", "conv OUT
 * kK [sS] [pP] [nobias]", "residual { LAYERS }" (upper-case words and the letters after a
 * lower-case prefix stand for numbers; brackets mark what may be left out); NULL out of range.
 * Thread-safe; the string is static. */
CLT_API const char *clt_layer_kind_usage(clt_layer_kind k);

/* One line saying what kind k computes ("2-D convolution, as nn.Conv2d(C, OUT, K, stride=S,
 * padding=P)"), as cltrain's help and manual print it; NULL out of range. Thread-safe; the
 * string is static. */
CLT_API const char *clt_layer_kind_help(clt_layer_kind k);

/* A preset: a name that stands for a whole spec. */
typedef struct clt_spec_preset {
    const char *name;   /* "mlp" */
    const char *layers; /* its spec, the word N standing for the number of classes:
                           "linear 256, relu, linear 128, relu, linear N"; a language model's
                           head is "linear V", V the vocabulary (the classes) */
    const char *help;   /* one line saying what it is for */
    int block;          /* a language model's window T, cltrain train's default --block
                           (64 for gpt-mini, 256 for gpt-char); 0 for a model of features */
    int batch;          /* a language model's batch of windows, cltrain train's default
                           --batch-size on text (nanoGPT's: 12 for gpt-mini, 64 for
                           gpt-char); 0 for a model of features */
} clt_spec_preset;

/* Preset i, from 0, in the order "mlp", "logreg", "cnn", "resnet", "gpt-mini", "gpt-char"; NULL
 * past the last (and for a negative i), so `for (int i = 0; clt_spec_preset_get(i); i++)` visits them all. Thread-safe;
 * the preset is static. */
CLT_API const clt_spec_preset *clt_spec_preset_get(int i);

#ifdef __cplusplus
}
#endif
#endif
