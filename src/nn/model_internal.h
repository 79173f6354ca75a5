/* The model's private side, for the trainer and the tests: refreshing a mixed-precision model's
 * 16-bit weights from its f32 master parameters. */
#ifndef CLTRAIN_NN_MODEL_INTERNAL_H
#define CLTRAIN_NN_MODEL_INTERNAL_H

#include "cltrain/model.h"

/* Mixed precision: refreshes the 16-bit copy from the f32 master parameters (one cast launch,
 * enqueued, no host wait). Call it after every change to the parameters made outside the
 * model (an optimizer step, unless the optimizer stores the copy itself: clt_optim_set_copy;
 * clt_tensor_write on clt_model_params); clt_model_create and clt_model_write_params call it
 * themselves. A no-op in f32. */
clt_status clt__model_sync_weights(clt_model *m);

#endif
