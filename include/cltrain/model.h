/* A model: the layers of a model spec on one ctx, with every parameter in one flat device
 * tensor and every gradient in another (reached by offsets), and the activations that backward
 * needs kept on the device. Parameters are named and shaped as PyTorch's nn.Sequential
 * state_dict for the same layer list ("{i}.weight" (OUT, IN) or a convolution's (OUT, IN, K, K),
 * "{i}.bias" (OUT); a residual block's "{i}.body.{j}.*" and "{i}.proj.{j}.*", see spec.h).
 * Not thread-safe (per ctx).
 *
 * Usage:
 *
 *     struct clt_model_params mp = clt_model_default_params();
 *     mp.max_batch = 128;
 *     clt_model *m;
 *     clt_model_create(&m, ctx, &spec, 784, 10, &mp);
 *     clt_tensor *y;
 *     clt_model_forward(m, x, true, step, &y);  // x (B, 784) -> y (B, 10)
 *     clt_model_backward(m, dy, false);         // then clt_optim_step(o, clt_model_grads(m))
 */
#ifndef CLTRAIN_MODEL_H
#define CLTRAIN_MODEL_H

#include "cltrain/export.h"

#include "cltrain/spec.h"
#include "cltrain/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum clt_init {
    CLT_INIT_DEFAULT = 0, /* PyTorch's nn.Linear: weight and bias uniform in +-1/sqrt(IN);
                             each module's own where it differs (attention as
                             nn.MultiheadAttention: in_proj_weight xavier-uniform, biases 0) */
    CLT_INIT_KAIMING,     /* weight uniform in +-sqrt(6/IN) (gain sqrt(2)), bias 0 */
    CLT_INIT_XAVIER,      /* weight uniform in +-sqrt(6/(IN+OUT)), bias 0 */
    CLT_INIT_GPT2         /* GPT-2's (and nanoGPT's): every weight matrix and embedding
                             normal(0, 0.02), biases 0; normalisation parameters 1 and 0 */
} clt_init;
/* "default" (or "pytorch"), "kaiming", "xavier", "gpt2", any case; CLT_ERR_INVALID_ARG
 * otherwise. Thread-safe. */
CLT_API clt_status clt_init_parse(const char *s, clt_init *out);

struct clt_model_params {
    clt_init init;
    uint64_t seed;   /* initial weights and dropout masks */
    size_t max_batch; /* activations are allocated for this many rows */
    /* Storage of what forward and backward read and keep (default CLT_DTYPE_F32).
     * CLT_DTYPE_F16 or CLT_DTYPE_BF16 (mixed precision): the flat f32 parameters stay the
     * master copy (the optimizer updates them) and a flat 16-bit copy of them (counted as
     * CLT_MEM_PARAMS, refreshed by clt_model_write_params, and by every optimizer step once
     * clt_optim_set_copy(o, clt_model_weights(m)) is made) is what the layers read; the layer
     * outputs kept for backward and the gradients passed between layers are 16-bit from the
     * first layer with weights (linear, conv, attention or a residual block), or in a language
     * model from the token embedding (embed, whose gather writes 16-bit activations), up to
     * (not including) the last layer with weights, which is linear; the last linear layer's
     * output, the layers after it and the model's output stay f32, as do the flat gradients.
     * Every kernel computes in f32. */
    clt_dtype precision;
    /* The shape of one input sample, (C, H, W) or (T, C): its leading non-zero entries, whose
     * product must be the model's in_features (CLT_ERR_INVALID_ARG otherwise). All zero (the
     * default) or a single entry: flat (in_features). Convolution and pooling layers need
     * (C, H, W); a linear layer takes an image as its flattened features, as after flatten,
     * and acts on each position of a sequence (T, C) (nn.Linear on the last dimension: output
     * (T, OUT)); layernorm, the activations, dropout and residual blocks keep (T, C); flatten
     * makes (T, C) flat. The training set-up fills it from the data set's sample shape when it
     * is left zero. */
    size_t input_shape[3];
};
CLT_API struct clt_model_params clt_model_default_params(void);

typedef struct clt_model clt_model;

/* One named parameter: a view into the flat parameter tensor. */
struct clt_param_info {
    char name[64];           /* "0.weight" */
    int ndim;
    size_t dims[4];          /* (OUT, IN), (OUT, IN, K, K) or (OUT); 0 past ndim */
    size_t offset;           /* in elements, into the flat tensors */
    size_t numel;
    /* Weight decay applies to it: true for matrices and embeddings (linear and conv weights),
     * false for biases and normalisation parameters (batchnorm's and layernorm's weight and
     * bias), which the trainer exempts (clt_optim_set_no_decay). */
    bool decays;
};

/* One named buffer: model state that is not a parameter, as the buffers of PyTorch's state_dict
 * (batchnorm's "{i}.running_mean", "{i}.running_var" (C) and "{i}.num_batches_tracked", a 0-d
 * int64): never trained, not in the gradients, saved in checkpoints. An f32 buffer is `numel`
 * elements at `offset` of the flat f32 buffers (clt_model_buffers); an int64 one is the host
 * counter at index `offset` of the model's counters (incremented by the model itself). */
struct clt_buffer_info {
    char name[64];  /* "1.running_mean" */
    bool i64;       /* an int64 scalar (ndim 0), else f32 */
    int ndim;       /* 1 for f32 buffers, 0 for the int64 ones */
    size_t dims[4]; /* (C) for f32; 0 past ndim */
    size_t offset;  /* in elements: into the flat f32 buffers, or into the counters */
    size_t numel;
};

/* Creates the model on ctx: parameters initialised on the host with the counter-based RNG
 * (so the same seed gives the same weights on every device) and uploaded; gradients zero;
 * activations for params->max_batch rows. The spec must validate against in_features and
 * outputs (CLT_ERR_INVALID_ARG otherwise, see clt_spec_validate). The model copies the spec.
 * The upload of the initial weights is a counted host wait (setup); the caller owns *out and
 * releases it with clt_model_free. */
CLT_API clt_status clt_model_create(clt_model **out, clt_ctx *ctx, const clt_spec *spec,
                                    size_t in_features, size_t outputs,
                                    const struct clt_model_params *params);
/* Releases the model's tensors without a host wait (the device keeps what enqueued work still
 * uses). Accepts NULL. */
CLT_API void clt_model_free(clt_model *m);

CLT_API clt_ctx *clt_model_ctx(const clt_model *m);
CLT_API const clt_spec *clt_model_spec(const clt_model *m);
CLT_API size_t clt_model_in_features(const clt_model *m);
/* The shape of one input sample into shape[3] (unused entries 0); returns its number of dims. */
CLT_API int clt_model_input_shape(const clt_model *m, size_t shape[3]);
/* The width of the last linear layer: the number of classes (1 for regression). */
CLT_API size_t clt_model_outputs(const clt_model *m);
/* The shape of one output sample into shape[3] (unused entries 0); returns its number of dims:
 * 1 for (outputs), 2 for (T, outputs) when the last linear layer acts on each position of a
 * sequence. forward's output is (B, that shape) and backward's gradient has as many elements. */
CLT_API int clt_model_output_shape(const clt_model *m, size_t shape[3]);
CLT_API size_t clt_model_max_batch(const clt_model *m);
CLT_API clt_tensor *clt_model_params(const clt_model *m); /* flat (P) f32, owned by the model */
CLT_API clt_tensor *clt_model_grads(const clt_model *m);  /* flat (P) f32, owned by the model */
CLT_API clt_dtype clt_model_precision(const clt_model *m); /* params->precision */
/* The flat (P) weights forward and backward read: the 16-bit copy in mixed precision, else
 * the f32 parameters themselves. Owned by the model. */
CLT_API clt_tensor *clt_model_weights(const clt_model *m);
/* Adds the device bytes clt_model_create would allocate for these arguments (max_batch from
 * params) to by_category[CLT_MEM__COUNT], per category, as the allocator counts them; the
 * spec must be valid (CLT_ERR_INVALID_ARG otherwise). Thread-safe. */
CLT_API clt_status clt_model_mem_estimate(const clt_spec *spec, size_t in_features, size_t outputs,
                                          const struct clt_model_params *params,
                                          uint64_t *by_category);
/* *count = P, the number of parameter elements (the flat tensors' length) clt_model_create
 * would lay out for these arguments (params: its input_shape; NULL: flat), from the same
 * layer table as the model itself; the spec must be valid (CLT_ERR_INVALID_ARG otherwise,
 * *count = 0). Thread-safe. */
CLT_API clt_status clt_model_param_elements(const clt_spec *spec, size_t in_features,
                                            size_t outputs, const struct clt_model_params *params,
                                            uint64_t *count);
/* The shape of one output sample (as clt_model_output_shape) of the model clt_model_create
 * would build for these arguments (params: its input_shape; NULL: flat) into shape[3] (unused
 * entries 0) and its number of dims into *ndim; the spec must be valid (CLT_ERR_INVALID_ARG
 * otherwise, *ndim = 0). Thread-safe. */
CLT_API clt_status clt_model_output_shape_of(const clt_spec *spec, size_t in_features,
                                             size_t outputs,
                                             const struct clt_model_params *params,
                                             size_t shape[3], int *ndim);
CLT_API int clt_model_param_count(const clt_model *m); /* named parameters */
/* Named parameter i (0 <= i < clt_model_param_count), owned by the model; NULL out of range. */
CLT_API const struct clt_param_info *clt_model_param_info(const clt_model *m, int i);

/* Named buffers (0 for a model without batchnorm), and buffer i (0 <= i < count), owned by the
 * model; NULL out of range. The flat f32 buffers also hold the layers' unnamed scratch. */
CLT_API int clt_model_buffer_count(const clt_model *m);
CLT_API const struct clt_buffer_info *clt_model_buffer_info(const clt_model *m, int i);
/* The flat f32 buffers (NULL when the model has none), owned by the model, and the number of
 * elements of it and of the int64 counters into *f32 and *i64 (either may be NULL). */
CLT_API clt_tensor *clt_model_buffers(const clt_model *m);
CLT_API void clt_model_buffer_sizes(const clt_model *m, size_t *f32, size_t *i64);
/* Host copies of the buffers: f32 gets the flat f32 buffers, i64 the counters (sized as
 * clt_model_buffer_sizes says; NULL skips that part). Reading waits for the device (a counted
 * host wait, reason `why`); writing waits for the upload (counted as setup). */
CLT_API clt_status clt_model_read_buffers(clt_model *m, float *f32, int64_t *i64,
                                          clt_wait_reason why);
CLT_API clt_status clt_model_write_buffers(clt_model *m, const float *f32, const int64_t *i64);

/* Forward pass of x (B, IN) f32 on the model's ctx, B <= max_batch; the output is f32 in
 * every precision. `train` enables dropout,
 * whose masks come from (seed, step), and batch statistics in batchnorm (which then update its
 * running statistics and count the forward in num_batches_tracked; false: the running
 * statistics normalise). *out is a view (B, OUTPUTS) owned by the model, valid
 * until the next forward. Enqueued only: no host wait. */
CLT_API clt_status clt_model_forward(clt_model *m, const clt_tensor *x, bool train, uint64_t step,
                                     clt_tensor **out);
/* Generation with a key/value cache: the logits (1, OUTPUTS) f32 of one new token at position
 * pos (< T, the model's block) of sample 0, computing that position alone: each layer works on
 * one row, and attention attends its query over the keys and values of positions 0 .. pos that
 * the model kept from the last forward and the decode steps since (its cache, no memory of its
 * own: the activations a batch-1 forward keeps). token is (1) i32 on the model's ctx (a token
 * drawn on the device needs no upload). The context must be there first: run clt_model_forward
 * over it (batch 1, train false: positions 0 .. w - 1 of the window hold it), then decode
 * positions w, w + 1, ... in turn; the logits equal the forward's row pos of the same sequence
 * to rounding. *logits is a view owned by the model, valid until the next pass. Enqueued only:
 * no host wait. CLT_ERR_UNSUPPORTED for a model clt_model_can_decode refuses; CLT_ERR_STATE
 * for pos > 0 when no batch-1 evaluation forward came before (position 0 needs no context), or
 * when a position is skipped (pos above the last decoded position + 1), or a backward, a
 * training forward or clt_model_write_params came since; CLT_ERR_SHAPE for pos >= T or a token that is not (1) i32. */
CLT_API clt_status clt_model_decode(clt_model *m, const clt_tensor *token, size_t pos,
                                    clt_tensor **logits);
/* Whether clt_model_decode takes this model: an f32 language model (embed first) whose layers
 * all keep a sequence (T, C) and can each compute one position (embed, posembed, layernorm,
 * linear, the activations, dropout, residual blocks of these, attention with "causal"). When
 * not, why (n bytes, may be NULL) says which layer stops it. Thread-safe. */
CLT_API bool clt_model_can_decode(const clt_model *m, char *why, size_t n);
/* Backward pass from dout (B, OUTPUTS) f32, the gradient of the loss with respect to the last
 * forward's output. accumulate=false overwrites the gradients, true adds to them (gradient
 * accumulation over micro-batches). Enqueued only: no host wait. */
CLT_API clt_status clt_model_backward(clt_model *m, const clt_tensor *dout, bool accumulate);

/* Host copies of the parameters (P floats), e.g. for checkpoints (a counted host wait,
 * reason `why`) and uploads (non-blocking; `src` must stay valid until the device has it:
 * the call waits, counted as setup). */
CLT_API clt_status clt_model_read_params(clt_model *m, float *dst, clt_wait_reason why);
CLT_API clt_status clt_model_write_params(clt_model *m, const float *src);

#ifdef __cplusplus
}
#endif
#endif
