/* A deliberately broken cl/elementwise.cl for test_runtime's build-failure test: the kernel
 * uses an undeclared identifier, so the build must fail with CLT_ERR_BUILD and the compiler's
 * log (naming clt_no_such_symbol) must reach clt_ctx_errmsg. */
kernel void fill(global float *x, ulong x_off, ulong n, float value)
{
    ulong i = get_global_id(0);
    if (i < n) x[x_off + i] = value * clt_no_such_symbol;
}
