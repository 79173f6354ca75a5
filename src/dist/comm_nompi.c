/* Built without MPI: the MPI communicator says so (the in-process group still works). */
#include "dist/comm_internal.h"

#include "runtime/internal.h"

bool clt_comm_mpi_available(void)
{
    return false;
}

clt_status clt_comm_mpi_create(clt_comm **out)
{
    *out = NULL;
    return clt__fail(NULL, CLT_ERR_UNSUPPORTED,
                     "this cltrain was built without MPI: install "
                     "libopenmpi-dev and rebuild (meson -Dmpi=enabled)");
}
