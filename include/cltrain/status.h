/* Status codes of every fallible cltrain call, generated from one table, and the names of
 * OpenCL and CLBlast error codes for messages. Thread-safe: all functions here are pure.
 *
 * Usage:
 *
 *     clt_status st = clt_ctx_create(&ctx, &cp);
 *     if (st != CLT_OK) printf("%s: %s\n", clt_status_name(st), clt_status_str(st));
 */
#ifndef CLTRAIN_STATUS_H
#define CLTRAIN_STATUS_H

#include "cltrain/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(enum name, value, message). 0 is success; every error is negative. */
#define CLT_STATUS_TABLE(X)                                                                        \
    X(CLT_OK, 0, "success")                                                                        \
    X(CLT_ERR_INVALID_ARG, -1, "invalid argument")                                                 \
    X(CLT_ERR_NO_DEVICE, -2, "no matching OpenCL device")                                          \
    X(CLT_ERR_OPENCL, -3, "OpenCL call failed")                                                    \
    X(CLT_ERR_BUILD, -4, "OpenCL kernel build failed")                                             \
    X(CLT_ERR_OUT_OF_MEMORY, -5, "out of device memory")                                           \
    X(CLT_ERR_HOST_MEMORY, -6, "out of host memory")                                               \
    X(CLT_ERR_DEVICE_MISMATCH, -7, "tensors live on different devices")                            \
    X(CLT_ERR_SHAPE, -8, "tensor shape or dtype mismatch")                                         \
    X(CLT_ERR_IO, -9, "file input/output failed")                                                  \
    X(CLT_ERR_FORMAT, -10, "malformed input")                                                      \
    X(CLT_ERR_UNSUPPORTED, -11, "not supported on this device")                                    \
    X(CLT_ERR_CLBLAST, -12, "CLBlast call failed")                                                 \
    X(CLT_ERR_NUMERIC, -13, "non-finite value")                                                    \
    X(CLT_ERR_STATE, -14, "call made in the wrong order")                                          \
    X(CLT_ERR_INTERRUPTED, -15, "interrupted")                                                   \
    X(CLT_ERR_ABORTED, -16, "another replica failed")

typedef enum clt_status {
#define CLT__STATUS_ENUM(name, value, msg) name = value,
    CLT_STATUS_TABLE(CLT__STATUS_ENUM)
#undef CLT__STATUS_ENUM
} clt_status;

/* "CLT_ERR_OUT_OF_MEMORY" for CLT_ERR_OUT_OF_MEMORY; "CLT_STATUS_UNKNOWN" otherwise. */
CLT_API const char *clt_status_name(clt_status s);
/* A short human sentence for the status ("out of device memory"). */
CLT_API const char *clt_status_str(clt_status s);
/* "CL_INVALID_WORK_GROUP_SIZE" for -54; "CL_UNKNOWN_ERROR" for codes outside the spec. */
CLT_API const char *clt_cl_error_name(int cl_error);
/* "kOutOfMemory"-style CLBlast status names; falls back to OpenCL names for shared codes. */
CLT_API const char *clt_clblast_error_name(int clblast_status);

#ifdef __cplusplus
}
#endif
#endif
