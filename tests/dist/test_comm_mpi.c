/* Tests of the MPI communicator that need no mpirun: clt_comm_mpi_available says how the
 * library was built (CLT_TEST_MPI, from tests/dist/meson.build), a build without MPI refuses
 * clt_comm_mpi_create with a message saying how to get it (a test MPI builds leave out), and
 * clt_comm_mpi_launched reads the launchers' variables. The collectives run under mpirun in mpi_allreduce.sh (mpi_probe.c). */
#include "common.h"
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

#if !CLT_TEST_MPI
/* Only without MPI: an MPI build's create initialises MPI, which is tested under mpirun
 * (mpi_allreduce.sh); main() says so when it leaves this test out. */
START_TEST(test_create_without_mpi)
{
    clt_comm *c = (clt_comm *)&c; /* not NULL: create must clear it */
    clt_status st = clt_comm_mpi_create(&c);
    ck_assert_msg(st == CLT_ERR_UNSUPPORTED, "clt_comm_mpi_create -> %s", clt_status_name(st));
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(clt_last_errmsg(), "-Dmpi=enabled") != NULL, "message: %s",
                  clt_last_errmsg());
    clt_comm_free(NULL);
}
END_TEST
#endif

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
#if CLT_TEST_MPI
    tc_skip_case("create_without_mpi", "this build has MPI (create runs under mpirun: "
                                       "mpi_allreduce.sh)");
#else
    tcase_add_test(tc, test_create_without_mpi);
#endif
    tcase_add_test(tc, test_launched);
    suite_add_tcase(suite, tc);
    return tc_run(suite);
}
