/* Status names and messages from the table in status.h, and the names of OpenCL and CLBlast
 * error codes so that every message says which code the driver returned. */
#include "cltrain/status.h"

#include <stddef.h>

const char *clt_status_name(clt_status s)
{
    switch (s) {
#define CLT__STATUS_NAME(name, value, msg)                                                         \
    case name:                                                                                     \
        return #name;
        CLT_STATUS_TABLE(CLT__STATUS_NAME)
#undef CLT__STATUS_NAME
    }
    return "CLT_STATUS_UNKNOWN";
}

const char *clt_status_str(clt_status s)
{
    switch (s) {
#define CLT__STATUS_STR(name, value, msg)                                                          \
    case name:                                                                                     \
        return msg;
        CLT_STATUS_TABLE(CLT__STATUS_STR)
#undef CLT__STATUS_STR
    }
    return "unknown status";
}

/* Every error code of the OpenCL 3.0 specification and its common extensions. */
#define CLT__CL_ERROR_TABLE(X)                                                                     \
    X(0, CL_SUCCESS)                                                                               \
    X(-1, CL_DEVICE_NOT_FOUND)                                                                     \
    X(-2, CL_DEVICE_NOT_AVAILABLE)                                                                 \
    X(-3, CL_COMPILER_NOT_AVAILABLE)                                                               \
    X(-4, CL_MEM_OBJECT_ALLOCATION_FAILURE)                                                        \
    X(-5, CL_OUT_OF_RESOURCES)                                                                     \
    X(-6, CL_OUT_OF_HOST_MEMORY)                                                                   \
    X(-7, CL_PROFILING_INFO_NOT_AVAILABLE)                                                         \
    X(-8, CL_MEM_COPY_OVERLAP)                                                                     \
    X(-9, CL_IMAGE_FORMAT_MISMATCH)                                                                \
    X(-10, CL_IMAGE_FORMAT_NOT_SUPPORTED)                                                          \
    X(-11, CL_BUILD_PROGRAM_FAILURE)                                                               \
    X(-12, CL_MAP_FAILURE)                                                                         \
    X(-13, CL_MISALIGNED_SUB_BUFFER_OFFSET)                                                        \
    X(-14, CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)                                           \
    X(-15, CL_COMPILE_PROGRAM_FAILURE)                                                             \
    X(-16, CL_LINKER_NOT_AVAILABLE)                                                                \
    X(-17, CL_LINK_PROGRAM_FAILURE)                                                                \
    X(-18, CL_DEVICE_PARTITION_FAILED)                                                             \
    X(-19, CL_KERNEL_ARG_INFO_NOT_AVAILABLE)                                                       \
    X(-30, CL_INVALID_VALUE)                                                                       \
    X(-31, CL_INVALID_DEVICE_TYPE)                                                                 \
    X(-32, CL_INVALID_PLATFORM)                                                                    \
    X(-33, CL_INVALID_DEVICE)                                                                      \
    X(-34, CL_INVALID_CONTEXT)                                                                     \
    X(-35, CL_INVALID_QUEUE_PROPERTIES)                                                            \
    X(-36, CL_INVALID_COMMAND_QUEUE)                                                               \
    X(-37, CL_INVALID_HOST_PTR)                                                                    \
    X(-38, CL_INVALID_MEM_OBJECT)                                                                  \
    X(-39, CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)                                                     \
    X(-40, CL_INVALID_IMAGE_SIZE)                                                                  \
    X(-41, CL_INVALID_SAMPLER)                                                                     \
    X(-42, CL_INVALID_BINARY)                                                                      \
    X(-43, CL_INVALID_BUILD_OPTIONS)                                                               \
    X(-44, CL_INVALID_PROGRAM)                                                                     \
    X(-45, CL_INVALID_PROGRAM_EXECUTABLE)                                                          \
    X(-46, CL_INVALID_KERNEL_NAME)                                                                 \
    X(-47, CL_INVALID_KERNEL_DEFINITION)                                                           \
    X(-48, CL_INVALID_KERNEL)                                                                      \
    X(-49, CL_INVALID_ARG_INDEX)                                                                   \
    X(-50, CL_INVALID_ARG_VALUE)                                                                   \
    X(-51, CL_INVALID_ARG_SIZE)                                                                    \
    X(-52, CL_INVALID_KERNEL_ARGS)                                                                 \
    X(-53, CL_INVALID_WORK_DIMENSION)                                                              \
    X(-54, CL_INVALID_WORK_GROUP_SIZE)                                                             \
    X(-55, CL_INVALID_WORK_ITEM_SIZE)                                                              \
    X(-56, CL_INVALID_GLOBAL_OFFSET)                                                               \
    X(-57, CL_INVALID_EVENT_WAIT_LIST)                                                             \
    X(-58, CL_INVALID_EVENT)                                                                       \
    X(-59, CL_INVALID_OPERATION)                                                                   \
    X(-60, CL_INVALID_GL_OBJECT)                                                                   \
    X(-61, CL_INVALID_BUFFER_SIZE)                                                                 \
    X(-62, CL_INVALID_MIP_LEVEL)                                                                   \
    X(-63, CL_INVALID_GLOBAL_WORK_SIZE)                                                            \
    X(-64, CL_INVALID_PROPERTY)                                                                    \
    X(-65, CL_INVALID_IMAGE_DESCRIPTOR)                                                            \
    X(-66, CL_INVALID_COMPILER_OPTIONS)                                                            \
    X(-67, CL_INVALID_LINKER_OPTIONS)                                                              \
    X(-68, CL_INVALID_DEVICE_PARTITION_COUNT)                                                      \
    X(-69, CL_INVALID_PIPE_SIZE)                                                                   \
    X(-70, CL_INVALID_DEVICE_QUEUE)                                                                \
    X(-71, CL_INVALID_SPEC_ID)                                                                     \
    X(-72, CL_MAX_SIZE_RESTRICTION_EXCEEDED)                                                       \
    X(-1001, CL_PLATFORM_NOT_FOUND_KHR)

const char *clt_cl_error_name(int cl_error)
{
    switch (cl_error) {
#define CLT__CL_NAME(code, name)                                                                   \
    case code:                                                                                     \
        return #name;
        CLT__CL_ERROR_TABLE(CLT__CL_NAME)
#undef CLT__CL_NAME
    }
    return "CL_UNKNOWN_ERROR";
}

/* CLBlast's own codes (clblast_c.h); its negative codes from -1 to -72 are OpenCL's. */
#define CLT__CLBLAST_ERROR_TABLE(X)                                                                \
    X(-1024, CLBlastNotImplemented)                                                                \
    X(-1022, CLBlastInvalidMatrixA)                                                                \
    X(-1021, CLBlastInvalidMatrixB)                                                                \
    X(-1020, CLBlastInvalidMatrixC)                                                                \
    X(-1019, CLBlastInvalidVectorX)                                                                \
    X(-1018, CLBlastInvalidVectorY)                                                                \
    X(-1017, CLBlastInvalidDimension)                                                              \
    X(-1016, CLBlastInvalidLeadDimA)                                                               \
    X(-1015, CLBlastInvalidLeadDimB)                                                               \
    X(-1014, CLBlastInvalidLeadDimC)                                                               \
    X(-1013, CLBlastInvalidIncrementX)                                                             \
    X(-1012, CLBlastInvalidIncrementY)                                                             \
    X(-1011, CLBlastInsufficientMemoryA)                                                           \
    X(-1010, CLBlastInsufficientMemoryB)                                                           \
    X(-1009, CLBlastInsufficientMemoryC)                                                           \
    X(-1008, CLBlastInsufficientMemoryX)                                                           \
    X(-1007, CLBlastInsufficientMemoryY)                                                           \
    X(-2050, CLBlastInsufficientMemoryTemp)                                                        \
    X(-2049, CLBlastInvalidBatchCount)                                                             \
    X(-2048, CLBlastInvalidOverrideKernel)                                                         \
    X(-2047, CLBlastMissingOverrideParameter)                                                      \
    X(-2046, CLBlastInvalidLocalMemUsage)                                                          \
    X(-2045, CLBlastNoHalfPrecision)                                                               \
    X(-2044, CLBlastNoDoublePrecision)                                                             \
    X(-2043, CLBlastInvalidVectorScalar)                                                           \
    X(-2042, CLBlastInsufficientMemoryScalar)                                                      \
    X(-2041, CLBlastDatabaseError)                                                                 \
    X(-2040, CLBlastUnknownError)                                                                  \
    X(-2039, CLBlastUnexpectedError)

const char *clt_clblast_error_name(int clblast_status)
{
    switch (clblast_status) {
#define CLT__CLBLAST_NAME(code, name)                                                              \
    case code:                                                                                     \
        return #name;
        CLT__CLBLAST_ERROR_TABLE(CLT__CLBLAST_NAME)
#undef CLT__CLBLAST_NAME
    }
    return clt_cl_error_name(clblast_status);
}
