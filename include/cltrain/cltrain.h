/* cltrain: a portable neural-network trainer on OpenCL. Includes every public header. */
#ifndef CLTRAIN_H
#define CLTRAIN_H

#include "cltrain/alloc.h"
#include "cltrain/checkpoint.h"
#include "cltrain/data.h"
#include "cltrain/device.h"
#include "cltrain/errors.h"
#include "cltrain/export.h"
#include "cltrain/half.h"
#include "cltrain/loader.h"
#include "cltrain/model.h"
#include "cltrain/ops.h"
#include "cltrain/optim.h"
#include "cltrain/outfile.h"
#include "cltrain/profile.h"
#include "cltrain/program.h"
#include "cltrain/rng.h"
#include "cltrain/safetensors.h"
#include "cltrain/spec.h"
#include "cltrain/status.h"
#include "cltrain/tensor.h"
#include "cltrain/train.h"
#include "cltrain/tune.h"

#endif
