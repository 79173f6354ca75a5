/* A model: the layers of a model spec on one ctx, with every parameter in one flat device
 * tensor and every gradient in another (reached by offsets), and the activations that backward
 * needs kept on the device. Parameters are named and shaped as PyTorch's nn.Sequential
 * state_dict for the same layer list ("{i}.weight" (OUT, IN), "{i}.bias" (OUT)).
 * Not thread-safe (per ctx). */
#ifndef CLTRAIN_MODEL_H
#define CLTRAIN_MODEL_H

#include "cltrain/spec.h"
#include "cltrain/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum clt_init {
    CLT_INIT_DEFAULT = 0, /* PyTorch's nn.Linear: weight and bias uniform in +-1/sqrt(IN) */
    CLT_INIT_KAIMING,     /* weight uniform in +-sqrt(6/IN) (gain sqrt(2)), bias 0 */
    CLT_INIT_XAVIER       /* weight uniform in +-sqrt(6/(IN+OUT)), bias 0 */
} clt_init;
clt_status clt_init_parse(const char *s, clt_init *out); /* "default", "kaiming", "xavier" */

struct clt_model_params {
    clt_init init;
    uint64_t seed;   /* initial weights and dropout masks */
    size_t max_batch; /* activations are allocated for this many rows */
};
struct clt_model_params clt_model_default_params(void);

typedef struct clt_model clt_model;

/* One named parameter: a view into the flat parameter tensor. */
struct clt_param_info {
    char name[64];           /* "0.weight" */
    int ndim;
    size_t dims[2];          /* (OUT, IN) or (OUT) */
    size_t offset;           /* in elements, into the flat tensors */
    size_t numel;
};

/* Creates the model on ctx: parameters initialised on the host with the counter-based RNG
 * (so the same seed gives the same weights on every device) and uploaded; gradients zero;
 * activations for params->max_batch rows. The spec must validate against in_features and
 * outputs (CLT_ERR_INVALID_ARG otherwise, see clt_spec_validate). The model copies the spec. */
clt_status clt_model_create(clt_model **out, clt_ctx *ctx, const clt_spec *spec,
                            size_t in_features, size_t outputs,
                            const struct clt_model_params *params);
void clt_model_free(clt_model *m);

clt_ctx *clt_model_ctx(const clt_model *m);
const clt_spec *clt_model_spec(const clt_model *m);
size_t clt_model_in_features(const clt_model *m);
size_t clt_model_outputs(const clt_model *m);
size_t clt_model_max_batch(const clt_model *m);
clt_tensor *clt_model_params(const clt_model *m); /* flat (P) f32, owned by the model */
clt_tensor *clt_model_grads(const clt_model *m);  /* flat (P) f32, owned by the model */
int clt_model_param_count(const clt_model *m);    /* named parameters */
const struct clt_param_info *clt_model_param_info(const clt_model *m, int i);

/* Forward pass of x (B, IN) f32 on the model's ctx, B <= max_batch. `train` enables dropout,
 * whose masks come from (seed, step). *out is a view (B, OUTPUTS) owned by the model, valid
 * until the next forward. Enqueued only: no host wait. */
clt_status clt_model_forward(clt_model *m, const clt_tensor *x, bool train, uint64_t step,
                             clt_tensor **out);
/* Backward pass from dout (B, OUTPUTS), the gradient of the loss with respect to the last
 * forward's output. accumulate=false overwrites the gradients, true adds to them (gradient
 * accumulation over micro-batches). */
clt_status clt_model_backward(clt_model *m, const clt_tensor *dout, bool accumulate);

/* Host copies of the parameters (P floats), e.g. for checkpoints (a counted host wait,
 * reason `why`) and uploads (non-blocking; `src` must stay valid until the device has it:
 * the call waits, counted as setup). */
clt_status clt_model_read_params(clt_model *m, float *dst, clt_wait_reason why);
clt_status clt_model_write_params(clt_model *m, const float *src);

#ifdef __cplusplus
}
#endif
#endif
