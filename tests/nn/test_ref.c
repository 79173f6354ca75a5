/* Tests of the float64 references themselves: every backward against central finite
 * differences of its forward, and a few values worked out by hand, so that the kernels' tests
 * compare against something known to be right. */
#include "common.h"
#include "ref/ref_nn.h"

#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Central differences with step h = 1e-6 in double: truncation error ~h^2 |f'''| ~ 1e-12,
 * rounding error ~1e-16 |f| / h ~ 1e-9 for the objectives here (|f| < 100). A gradient passes
 * when |fd - analytic| <= FD_ATOL + FD_RTOL |analytic|: relative tolerance 1e-6, absolute 1e-7,
 * a hundred times above those errors and far below any mistake in a formula. */
#define FD_STEP 1e-6
#define FD_RTOL 1e-6
#define FD_ATOL 1e-7

/* splitmix64: the tests' own generator, independent of the library's. */
static double rand_unit(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

/* Fills a (n) with values in +-[0.1, 2): never zero, never within a step of relu's kink. */
static void fill(double *a, size_t n, uint64_t *state)
{
    for (size_t i = 0; i < n; i++) {
        double m = 0.1 + 1.9 * rand_unit(state);
        a[i] = rand_unit(state) < 0.5 ? -m : m;
    }
}

static double *alloc(size_t n)
{
    double *a = calloc(n ? n : 1, sizeof *a);
    ck_assert_ptr_nonnull(a);
    return a;
}

typedef double (*objective)(void *arg);

/* Compares grad (n) with central differences of f over param (n), which f reads. Returns
 * whether all agree; the first disagreement is described in why (size). */
static bool grad_agrees(double *param, const double *grad, size_t n, objective f, void *arg,
                        char *why, size_t size)
{
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        const double saved = param[i];
        param[i] = saved + FD_STEP;
        const double up = f(arg);
        param[i] = saved - FD_STEP;
        const double down = f(arg);
        param[i] = saved;
        const double fd = (up - down) / (2.0 * FD_STEP);
        ok = fabs(fd - grad[i]) <= FD_ATOL + FD_RTOL * fabs(grad[i]);
        if (!ok)
            snprintf(why, size, "[%zu]: finite difference %.12g, analytic %.12g", i, fd, grad[i]);
    }
    return ok;
}

#define CHECK_GRAD(what, param, grad, n, f, arg)                                                   \
    do {                                                                                           \
        char why_[160] = "";                                                                       \
        ck_assert_msg(grad_agrees((param), (grad), (n), (f), (arg), why_, sizeof why_), "%s%s",    \
                      (what), why_);                                                               \
    } while (0)

/* Linear: the objective sum(dy * y) has gradients dx, dW, db given dy. */
typedef struct linear_case {
    int B, IN, OUT;
    double *x, *w, *b, *dy, *y;
} linear_case;

static double linear_objective(void *arg)
{
    linear_case *c = arg;
    double s = 0.0;
    ref_linear_forward(c->x, c->w, c->b, c->y, c->B, c->IN, c->OUT);
    for (int i = 0; i < c->B * c->OUT; i++)
        s += c->dy[i] * c->y[i];
    return s;
}

START_TEST(test_linear_backward)
{
    static const int shapes[][3] = {{1, 1, 1}, {3, 5, 4}, {2, 17, 3}, {7, 3, 9}};
    uint64_t state = 1;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (int bias = 0; bias < 2; bias++) {
            linear_case c = {shapes[s][0], shapes[s][1], shapes[s][2], NULL,
                             NULL,         NULL,         NULL,         NULL};
            c.x = alloc((size_t)c.B * c.IN);
            c.w = alloc((size_t)c.OUT * c.IN);
            c.b = bias ? alloc((size_t)c.OUT) : NULL;
            c.dy = alloc((size_t)c.B * c.OUT);
            c.y = alloc((size_t)c.B * c.OUT);
            double *dx = alloc((size_t)c.B * c.IN), *dw = alloc((size_t)c.OUT * c.IN),
                   *db = alloc((size_t)c.OUT);
            fill(c.x, (size_t)c.B * c.IN, &state);
            fill(c.w, (size_t)c.OUT * c.IN, &state);
            if (c.b) fill(c.b, (size_t)c.OUT, &state);
            fill(c.dy, (size_t)c.B * c.OUT, &state);
            ref_linear_backward(c.x, c.w, c.dy, dx, dw, db, c.B, c.IN, c.OUT);
            CHECK_GRAD("linear dx", c.x, dx, (size_t)c.B * c.IN, linear_objective, &c);
            CHECK_GRAD("linear dw", c.w, dw, (size_t)c.OUT * c.IN, linear_objective, &c);
            if (c.b) CHECK_GRAD("linear db", c.b, db, (size_t)c.OUT, linear_objective, &c);
            /* NULL outputs are skipped. */
            ref_linear_backward(c.x, c.w, c.dy, NULL, NULL, NULL, c.B, c.IN, c.OUT);
            free(c.x), free(c.w), free(c.b), free(c.dy), free(c.y), free(dx), free(dw), free(db);
        }
    }
}
END_TEST

/* conv2d: the same objective over (B, C, H, W) inputs, several shapes, strides and paddings. */
typedef struct conv_case {
    int B, C, H, W, OUT, K, S, P;
    double *x, *w, *b, *dy, *y;
} conv_case;

static int conv_ny(const conv_case *c)
{
    return c->B * c->OUT * ((c->H + 2 * c->P - c->K) / c->S + 1) *
           ((c->W + 2 * c->P - c->K) / c->S + 1);
}

static double conv_objective(void *arg)
{
    conv_case *c = arg;
    double s = 0.0;
    ref_conv2d_forward(c->x, c->w, c->b, c->y, c->B, c->C, c->H, c->W, c->OUT, c->K, c->S, c->P);
    for (int i = 0; i < conv_ny(c); i++)
        s += c->dy[i] * c->y[i];
    return s;
}

START_TEST(test_conv2d_backward)
{
    /* B, C, H, W, OUT, K, S, P */
    static const int shapes[][8] = {{1, 1, 1, 1, 1, 1, 1, 0}, {2, 3, 5, 4, 2, 3, 1, 1},
                                    {1, 2, 7, 6, 3, 3, 2, 0}, {2, 1, 6, 5, 2, 5, 2, 2},
                                    {1, 2, 4, 4, 2, 2, 3, 1}};
    uint64_t state = 7;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (int bias = 0; bias < 2; bias++) {
            const int *sh = shapes[s];
            conv_case c = {sh[0], sh[1], sh[2], sh[3], sh[4], sh[5], sh[6], sh[7],
                           NULL,  NULL,  NULL,  NULL,  NULL};
            const size_t nx = (size_t)c.B * c.C * c.H * c.W, nw = (size_t)c.OUT * c.C * c.K * c.K,
                         ny = (size_t)conv_ny(&c);
            c.x = alloc(nx);
            c.w = alloc(nw);
            c.b = bias ? alloc((size_t)c.OUT) : NULL;
            c.dy = alloc(ny);
            c.y = alloc(ny);
            double *dx = alloc(nx), *dw = alloc(nw), *db = alloc((size_t)c.OUT);
            fill(c.x, nx, &state);
            fill(c.w, nw, &state);
            if (c.b) fill(c.b, (size_t)c.OUT, &state);
            fill(c.dy, ny, &state);
            ref_conv2d_backward(c.x, c.w, c.dy, dx, dw, db, c.B, c.C, c.H, c.W, c.OUT, c.K, c.S,
                                c.P);
            CHECK_GRAD("conv2d dx", c.x, dx, nx, conv_objective, &c);
            CHECK_GRAD("conv2d dw", c.w, dw, nw, conv_objective, &c);
            if (c.b) CHECK_GRAD("conv2d db", c.b, db, (size_t)c.OUT, conv_objective, &c);
            free(c.x), free(c.w), free(c.b), free(c.dy), free(c.y), free(dx), free(dw), free(db);
        }
    }
}
END_TEST

/* A value by hand: a 3x3 input, a 2x2 kernel of ones, padding 1, stride 2: each output is the
 * sum of the window's input elements inside the image, plus the bias. */
START_TEST(test_conv2d_forward_values)
{
    const double x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w[4] = {1, 1, 1, 1}, b[1] = {0.5};
    double y[4];
    ref_conv2d_forward(x, w, b, y, 1, 1, 3, 3, 1, 2, 2, 1);
    /* windows at rows -1..0 / 1..2 and columns -1..0 / 1..2 */
    const double want[4] = {1 + 0.5, 2 + 3 + 0.5, 4 + 7 + 0.5, 5 + 6 + 8 + 9 + 0.5};
    for (int i = 0; i < 4; i++)
        ck_assert_msg(y[i] == want[i], "y[%d] = %g, expected %g", i, y[i], want[i]);
}
END_TEST

START_TEST(test_linear_forward_values)
{
    /* x (2, 3), W (2, 3), b (2): y = x W^T + b by hand. */
    const double x[] = {1, 2, 3, -1, 0, 2}, w[] = {1, 0, -1, 0.5, 2, 1}, b[] = {0.25, -1};
    const double expect[] = {1 - 3 + 0.25, 0.5 + 4 + 3 - 1, -1 - 2 + 0.25, -0.5 + 2 - 1};
    double y[4];
    ref_linear_forward(x, w, b, y, 2, 3, 2);
    for (int i = 0; i < 4; i++)
        ck_assert_double_eq_tol(y[i], expect[i], 1e-15);
    ref_linear_forward(x, w, NULL, y, 2, 3, 2);
    ck_assert_double_eq_tol(y[0], -2.0, 1e-15);
    ck_assert_double_eq_tol(y[3], 1.5, 1e-15);
}
END_TEST

/* Activations: the objective sum(dy * act(x)). */
typedef struct act_case {
    ref_act a;
    size_t n;
    double *x, *dy, *y;
} act_case;

static double act_objective(void *arg)
{
    act_case *c = arg;
    double s = 0.0;
    ref_act_forward(c->a, c->x, c->y, c->n);
    for (size_t i = 0; i < c->n; i++)
        s += c->dy[i] * c->y[i];
    return s;
}

START_TEST(test_activation_backward)
{
    static const char *const names[] = {"relu", "gelu", "tanh", "sigmoid", "silu", "leakyrelu"};
    uint64_t state = 2;
    for (int a = REF_ACT_RELU; a <= REF_ACT_LEAKYRELU; a++) {
        act_case c = {(ref_act)a, 257, NULL, NULL, NULL};
        c.x = alloc(c.n);
        c.dy = alloc(c.n);
        c.y = alloc(c.n);
        double *dx = alloc(c.n);
        fill(c.x, c.n, &state);
        for (size_t i = 0; i < c.n; i++)
            c.x[i] *= 2.0; /* reach the tails: |x| up to 4 */
        fill(c.dy, c.n, &state);
        ref_act_backward(c.a, c.x, c.dy, dx, c.n);
        CHECK_GRAD(names[a], c.x, dx, c.n, act_objective, &c);
        /* dx may alias dy. */
        ref_act_backward(c.a, c.x, c.dy, c.dy, c.n);
        for (size_t i = 0; i < c.n; i++)
            ck_assert(c.dy[i] == dx[i]);
        free(c.x), free(c.dy), free(c.y), free(dx);
    }
}
END_TEST

START_TEST(test_activation_values)
{
    ck_assert(ref_act_value(REF_ACT_RELU, -2.0) == 0.0);
    ck_assert(ref_act_value(REF_ACT_RELU, 1.5) == 1.5);
    ck_assert(ref_act_derivative(REF_ACT_RELU, 0.0) == 0.0); /* as PyTorch */
    ck_assert_double_eq_tol(ref_act_value(REF_ACT_SIGMOID, 0.0), 0.5, 1e-16);
    ck_assert_double_eq_tol(ref_act_value(REF_ACT_SIGMOID, log(3.0)), 0.75, 1e-15);
    ck_assert_double_eq_tol(ref_act_value(REF_ACT_TANH, log(2.0)), 0.6, 1e-15);
    ck_assert(ref_act_value(REF_ACT_GELU, 0.0) == 0.0);
    ck_assert(ref_act_value(REF_ACT_SILU, 0.0) == 0.0);
    ck_assert_double_eq_tol(ref_act_value(REF_ACT_SILU, log(3.0)), 0.75 * log(3.0), 1e-15);
    ck_assert_double_eq_tol(ref_act_derivative(REF_ACT_SILU, 0.0), 0.5, 1e-16);
    ck_assert(ref_act_value(REF_ACT_LEAKYRELU, -2.0) == -2.0 * REF_LEAKYRELU_ALPHA);
    ck_assert(ref_act_value_alpha(REF_ACT_LEAKYRELU, 0.25, -2.0) == -0.5);
    ck_assert(ref_act_value_alpha(REF_ACT_LEAKYRELU, 0.25, 1.5) == 1.5);
    ck_assert(ref_act_derivative_alpha(REF_ACT_LEAKYRELU, 0.25, 0.0) == 0.25); /* as PyTorch */
    /* The tanh approximation stays within 5e-4 of the exact GELU x Phi(x), and differs from it
     * by more than 1e-5 somewhere (so it is not the erf form by mistake). */
    double max_err = 0.0;
    for (double x = -6.0; x <= 6.0; x += 0.01) {
        double exact = 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
        double err = fabs(ref_act_value(REF_ACT_GELU, x) - exact);
        max_err = err > max_err ? err : max_err;
    }
    ck_assert_msg(max_err < 5e-4 && max_err > 1e-5, "max |gelu_tanh - gelu| = %g", max_err);
}
END_TEST

/* Softmax cross-entropy: the loss itself is the objective. */
typedef struct xent_case {
    int B, N;
    double eps;
    double *logits;
    int32_t *labels;
} xent_case;

static double xent_objective(void *arg)
{
    xent_case *c = arg;
    return ref_softmax_xent(c->logits, c->labels, c->B, c->N, c->eps, NULL);
}

START_TEST(test_softmax_xent_backward)
{
    static const int shapes[][2] = {{1, 1}, {1, 2}, {5, 7}, {3, 10}, {17, 3}};
    static const double eps[] = {0.0, 0.1, 0.5};
    uint64_t state = 3;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (size_t e = 0; e < sizeof eps / sizeof eps[0]; e++) {
            xent_case c = {shapes[s][0], shapes[s][1], eps[e], NULL, NULL};
            size_t n = (size_t)c.B * c.N;
            c.logits = alloc(n);
            c.labels = calloc((size_t)c.B, sizeof *c.labels);
            ck_assert_ptr_nonnull(c.labels);
            double *grad = alloc(n);
            fill(c.logits, n, &state);
            for (size_t i = 0; i < n; i++)
                c.logits[i] *= 3.0;
            for (int i = 0; i < c.B; i++)
                c.labels[i] = (int32_t)(rand_unit(&state) * c.N);
            double loss = ref_softmax_xent(c.logits, c.labels, c.B, c.N, c.eps, grad);
            ck_assert(loss == xent_objective(&c));
            CHECK_GRAD("softmax_xent dlogits", c.logits, grad, n, xent_objective, &c);
            free(c.logits), free(c.labels), free(grad);
        }
    }
}
END_TEST

START_TEST(test_softmax_xent_values)
{
    /* Equal logits: p = 1/N, every -log p = log N, whatever eps. */
    const double flat[] = {0.5, 0.5, 0.5, 0.5};
    const int32_t label1[] = {1};
    ck_assert_double_eq_tol(ref_softmax_xent(flat, label1, 1, 4, 0.0, NULL), log(4.0), 1e-15);
    ck_assert_double_eq_tol(ref_softmax_xent(flat, label1, 1, 4, 0.3, NULL), log(4.0), 1e-15);
    /* Logits (1, 2, 3), label 0, eps 0.1, l = log(e + e^2 + e^3):
     * 0.9 (l - 1) + 0.1 ((l-1) + (l-2) + (l-3)) / 3 = l - 1.1. Shifting the logits changes
     * nothing; the batch mean of two such rows is the same. */
    const double z[] = {1, 2, 3, 101, 102, 103};
    const int32_t label0[] = {0, 0};
    const double l = log(exp(1.0) + exp(2.0) + exp(3.0));
    double grad[6];
    ck_assert_double_eq_tol(ref_softmax_xent(z, label0, 2, 3, 0.1, grad), l - 1.1, 1e-13);
    /* Gradient (p - q) / B: q = (0.9 + 0.1/3, 0.1/3, 0.1/3). */
    ck_assert_double_eq_tol(grad[0], (exp(1.0 - l) - (0.9 + 0.1 / 3)) / 2, 1e-15);
    ck_assert_double_eq_tol(grad[4], (exp(2.0 - l) - 0.1 / 3) / 2, 1e-15);
    /* No smoothing: the plain negative log-likelihood. */
    ck_assert_double_eq_tol(ref_softmax_xent(z, label0, 1, 3, 0.0, NULL), l - 1.0, 1e-14);
}
END_TEST

typedef struct mse_case {
    size_t n;
    double *pred, *target;
} mse_case;

static double mse_objective(void *arg)
{
    mse_case *c = arg;
    return ref_mse(c->pred, c->target, c->n, NULL);
}

START_TEST(test_mse)
{
    uint64_t state = 4;
    const double p[] = {1, 2, 3}, t[] = {1, 0, 4};
    ck_assert_double_eq_tol(ref_mse(p, t, 3, NULL), 5.0 / 3.0, 1e-15);
    static const size_t sizes[] = {1, 17, 100};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        mse_case c = {sizes[s], alloc(sizes[s]), alloc(sizes[s])};
        double *grad = alloc(c.n);
        fill(c.pred, c.n, &state);
        fill(c.target, c.n, &state);
        ref_mse(c.pred, c.target, c.n, grad);
        CHECK_GRAD("mse dpred", c.pred, grad, c.n, mse_objective, &c);
        free(c.pred), free(c.target), free(grad);
    }
}
END_TEST

START_TEST(test_fd_catches_a_wrong_gradient)
{
    /* The checker itself: a gradient off by 1e-4 relative must fail it. */
    uint64_t state = 5;
    act_case c = {REF_ACT_TANH, 8, alloc(8), alloc(8), alloc(8)};
    double *dx = alloc(8);
    fill(c.x, 8, &state);
    fill(c.dy, 8, &state);
    ref_act_backward(c.a, c.x, c.dy, dx, 8);
    char why[160];
    ck_assert(grad_agrees(c.x, dx, 8, act_objective, &c, why, sizeof why));
    dx[3] *= 1.0001;
    ck_assert(!grad_agrees(c.x, dx, 8, act_objective, &c, why, sizeof why));
    free(c.x), free(c.dy), free(c.y), free(dx);
}
END_TEST

int main(void)
{
    Suite *suite = suite_create("ref");
    TCase *tc = tcase_create("ref");
    tcase_add_test(tc, test_linear_backward);
    tcase_add_test(tc, test_linear_forward_values);
    tcase_add_test(tc, test_conv2d_backward);
    tcase_add_test(tc, test_conv2d_forward_values);
    tcase_add_test(tc, test_activation_backward);
    tcase_add_test(tc, test_activation_values);
    tcase_add_test(tc, test_softmax_xent_backward);
    tcase_add_test(tc, test_softmax_xent_values);
    tcase_add_test(tc, test_mse);
    tcase_add_test(tc, test_fd_catches_a_wrong_gradient);
    suite_add_tcase(suite, tc);
    return tc_run(suite);
}
