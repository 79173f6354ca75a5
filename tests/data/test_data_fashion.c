/* The real Fashion-MNIST files through clt_data_open("fashion-mnist"): sizes, shapes, the
 * classes' counts and the published pixel mean. A program of its own so that missing files
 * are a visible skip (exit 77) when $CLTRAIN_DATA_DIR/fashion-mnist (default
 * /usr/share/datasets) does not exist, not a pass of the other readers' tests. */
#include "common.h"
#include "cltrain/data.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

START_TEST(open_fashion_mnist)
{
    clt_dataset tr, te;
    size_t count[10] = {0};
    float *mean, *std;
    double avg = 0;
    ck_assert_int_eq(clt_data_open("fashion-mnist", NULL, &tr, &te), CLT_OK);
    ck_assert_uint_eq(tr.n, 60000);
    ck_assert_uint_eq(te.n, 10000);
    ck_assert_uint_eq(tr.features, 784);
    ck_assert_uint_eq(tr.sample_shape[1], 28);
    ck_assert_uint_eq(tr.sample_shape[2], 28);
    ck_assert_int_eq(tr.classes, 10);
    ck_assert_int_eq(te.classes, 10);
    for (size_t i = 0; i < tr.n; i++)
        count[tr.labels[i]]++;
    for (int c = 0; c < 10; c++)
        ck_assert_uint_eq(count[c], 6000);
    /* The training set's published pixel mean is 0.2860. */
    mean = malloc(784 * sizeof *mean);
    std = malloc(784 * sizeof *std);
    ck_assert_int_eq(clt_dataset_stats(&tr, mean, std), CLT_OK);
    for (int f = 0; f < 784; f++)
        avg += mean[f] / 784.0;
    ck_assert_double_eq_tol(avg, 0.2860, 5e-4);
    free(mean);
    free(std);
    clt_dataset_free(&tr);
    clt_dataset_free(&te);
}
END_TEST

int main(void)
{
    const char *root = getenv("CLTRAIN_DATA_DIR");
    char dir[4096];
    struct stat sb;
    if (!root || !*root) root = "/usr/share/datasets"; /* as clt_data_open */
    snprintf(dir, sizeof dir, "%s/fashion-mnist", root);
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        printf("skipped: %s is missing (set CLTRAIN_DATA_DIR, default /usr/share/datasets, or "
               "install dataset-fashion-mnist)\n",
               dir);
        return TC_EXIT_SKIP;
    }
    Suite *s = suite_create("data_fashion");
    TCase *tc = tc_tcase("fashion-mnist");
    tcase_set_timeout(tc, 120); /* decompresses 30 MB; slow under sanitizers */
    tcase_add_test(tc, open_fashion_mnist);
    suite_add_tcase(s, tc);
    return tc_run(s);
}
