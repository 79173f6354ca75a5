/* cltrain: a portable neural-network trainer on OpenCL. Includes every public header. */
#ifndef CLTRAIN_H
#define CLTRAIN_H

#include "cltrain/alloc.h"
#include "cltrain/device.h"
#include "cltrain/errors.h"
#include "cltrain/half.h"
#include "cltrain/ops.h"
#include "cltrain/program.h"
#include "cltrain/status.h"
#include "cltrain/tensor.h"

#endif
