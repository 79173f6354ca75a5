/* Tests of the MPI communicator that need no mpirun: clt_comm_mpi_available says how the
 * library was built (CLT_TEST_MPI, from tests/dist/meson.build), a build without MPI refuses
 * clt_comm_mpi_create with a message saying how to get it, and clt_comm_mpi_launched reads the
 * launchers' variables. The collectives run under mpirun in mpi_allreduce.sh (mpi_probe.c). */
#include "cltrain/dist.h"
#include "cltrain/errors.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#ifndef CLT_TEST_MPI
#error "tests/dist/meson.build defines CLT_TEST_MPI as 0 or 1"
#endif

START_TEST(test_available_matches_build)
{
    ck_assert_int_eq(clt_comm_mpi_available(), CLT_TEST_MPI);
}
END_TEST

START_TEST(test_create_without_mpi)
{
#if CLT_TEST_MPI
    /* MPI builds create under mpirun: mpi_allreduce.sh */
#else
    clt_comm *c = (clt_comm *)&c; /* not NULL: create must clear it */
    clt_status st = clt_comm_mpi_create(&c);
    ck_assert_msg(st == CLT_ERR_UNSUPPORTED, "clt_comm_mpi_create -> %s", clt_status_name(st));
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(clt_last_errmsg(), "-Dmpi=enabled") != NULL, "message: %s",
                  clt_last_errmsg());
    clt_comm_free(NULL);
#endif
}
END_TEST

/* check forks each test, so the environment changes stay in this one */
START_TEST(test_launched)
{
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    ck_assert(!clt_comm_mpi_launched());
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        setenv(vars[i], "2", 1);
        ck_assert_msg(clt_comm_mpi_launched(), "%s set", vars[i]);
        unsetenv(vars[i]);
    }
    setenv("PMI_SIZE", "", 1); /* set but empty names no world */
    ck_assert(!clt_comm_mpi_launched());
}
END_TEST

int main(void)
{
    Suite *suite = suite_create("comm_mpi");
    TCase *tc = tcase_create("comm_mpi");
    tcase_add_test(tc, test_available_matches_build);
    tcase_add_test(tc, test_create_without_mpi);
    tcase_add_test(tc, test_launched);
    suite_add_tcase(suite, tc);
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
