/* The model's private side, for the trainer and the tests: refreshing a mixed-precision model's
 * 16-bit weights from its f32 master parameters, and the smallest batch a spec trains on. */
#ifndef CLTRAIN_NN_MODEL_INTERNAL_H
#define CLTRAIN_NN_MODEL_INTERNAL_H

#include "cltrain/model.h"

/* Mixed precision: refreshes the 16-bit copy from the f32 master parameters (one cast launch,
 * enqueued, no host wait). Call it after every change to the parameters made outside the
 * model (an optimizer step, unless the optimizer stores the copy itself: clt_optim_set_copy;
 * clt_tensor_write on clt_model_params); clt_model_create and clt_model_write_params call it
 * themselves. A no-op in f32. */
clt_status clt__model_sync_weights(clt_model *m);

/* The smallest micro-batch a training forward of `spec` takes (the largest of its layers'
 * kind->min_batch, blocks' children included; 1 when none asks more) for inputs as
 * clt_model_create's arguments give them (params: its input_shape; NULL: flat). When above 1,
 * `why` (n bytes) names the first layer that asks it: "layer 2 (batchnorm) on 8 features
 * per sample". Plans the spec without a device: its failures' statuses and messages
 * (clt__model_plan), recorded for the thread. */
clt_status clt__model_min_batch(const clt_spec *spec, size_t in_features, size_t outputs,
                                const struct clt_model_params *params, size_t *min, char *why,
                                size_t n);

#endif
