/* Checks shared by the ops' C wrappers. */
#ifndef CLTRAIN_OPS_INTERNAL_H
#define CLTRAIN_OPS_INTERNAL_H

#include "cltrain/ops.h"

#include <stdbool.h>

/* CLT_OK if a and b share a ctx, a dtype (when same_dtype) and an element count. */
clt_status clt__check_pair(const clt_tensor *a, const clt_tensor *b, bool same_dtype,
                           const char *op);
bool clt__is_float(clt_dtype d);

#endif
