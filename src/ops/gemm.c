/* GEMM on row-major f32 tensors through CLBlast's C API, enqueued on the ctx's compute queue
 * without waiting. The three layouts a linear layer needs are (N,T) forward, (N,N) for the input
 * gradient and (T,N) for the weight gradient. */
#include "ops_internal.h"

#include "internal.h"

#include <clblast_c.h>

static clt_status check_operand(const clt_tensor *t, size_t rows, size_t cols, const char *name)
{
    if (clt_tensor_dtype(t) != CLT_DTYPE_F32)
        return clt__fail(clt_tensor_ctx(t), CLT_ERR_SHAPE, "gemm: %s must be f32, got %s", name,
                         clt_dtype_name(clt_tensor_dtype(t)));
    if (clt_tensor_numel(t) < rows * cols)
        return clt__fail(clt_tensor_ctx(t), CLT_ERR_SHAPE,
                         "gemm: %s holds %zu elements, the shapes need %zu x %zu", name,
                         clt_tensor_numel(t), rows, cols);
    return CLT_OK;
}

clt_status clt_op_gemm(clt_trans ta, clt_trans tb, size_t M, size_t N, size_t K, float alpha,
                       const clt_tensor *A, const clt_tensor *B, float beta, clt_tensor *C)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = clt_tensor_ctx(C);
    CLT_TRY(clt_tensor_same_ctx(C, A));
    CLT_TRY(clt_tensor_same_ctx(C, B));
    size_t a_rows = ta ? K : M, a_cols = ta ? M : K, b_rows = tb ? N : K, b_cols = tb ? K : N;
    CLT_TRY(check_operand(A, a_rows, a_cols, "A"));
    CLT_TRY(check_operand(B, b_rows, b_cols, "B"));
    CLT_TRY(check_operand(C, M, N, "C"));
    if (M == 0 || N == 0) return CLT_OK;
    cl_command_queue q = clt_ctx_compute_queue(ctx);
    CLBlastStatusCode rc;
    if (K == 0) {
        /* CLBlast rejects K = 0; C = beta * C is what the product means then. */
        rc = CLBlastSscal(M * N, beta, clt_tensor_mem(C), clt_tensor_offset(C), 1, &q, NULL);
    } else {
        rc = CLBlastSgemm(CLBlastLayoutRowMajor, ta ? CLBlastTransposeYes : CLBlastTransposeNo,
                          tb ? CLBlastTransposeYes : CLBlastTransposeNo, M, N, K, alpha,
                          clt_tensor_mem(A), clt_tensor_offset(A), a_cols, clt_tensor_mem(B),
                          clt_tensor_offset(B), b_cols, beta, clt_tensor_mem(C),
                          clt_tensor_offset(C), N, &q, NULL);
    }
    if (rc != CLBlastSuccess) {
        bool oom = rc == CLBlastTempBufferAllocFailure || rc == CLBlastOpenCLOutOfResources ||
                   rc == CLBlastOpenCLOutOfHostMemory;
        CLT_FAIL(ctx, oom ? CLT_ERR_OUT_OF_MEMORY : CLT_ERR_CLBLAST,
                 "gemm (M=%zu N=%zu K=%zu, %s%s) on %s: CLBlast returned %s (%d)", M, N, K,
                 ta ? "T" : "N", tb ? "T" : "N", clt_ctx_device(ctx)->device_name,
                 clt_clblast_error_name(rc), (int)rc);
    }
fail:
    return st;
}
