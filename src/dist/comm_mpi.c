/* The MPI communicator: one member per process of MPI_COMM_WORLD, the sums made by
 * MPI_Allreduce. It works on its own duplicate of MPI_COMM_WORLD, with MPI_ERRORS_RETURN, so
 * that its collectives never match a caller's and a failure comes back as a status. It
 * finalises MPI only when it initialised it. */
#include "dist/comm_internal.h"

#include "runtime/internal.h"

#include <mpi.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

/* The most bytes one MPI_Allreduce moves. Counts are int, and messages of 2 GiB or more have
 * been a source of bugs in MPI transports; at 1 GiB a chunk's extra call costs nothing. Every
 * member passes the same n, so every member makes the same calls. (Defined smaller in a test
 * build to exercise the chunking.) */
#ifndef CLT_MPI_CHUNK_BYTES
#define CLT_MPI_CHUNK_BYTES ((size_t)1 << 30)
#endif

struct mpi_state {
    MPI_Comm comm;    /* our duplicate of MPI_COMM_WORLD */
    bool initialised; /* this end called MPI_Init_thread, so it finalises */
};

static struct mpi_state *state_of(const clt_comm *c)
{
    return (struct mpi_state *)c->impl;
}

/* Records "WHAT failed: <MPI's text for code>" and returns status. */
static clt_status mpi_fail(clt_status status, const char *what, int code)
{
    char text[MPI_MAX_ERROR_STRING + 1] = "";
    int len = 0;
    if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "error %d", code);
    return clt__fail(NULL, status, "%s failed: %s", what, text);
}

static clt_status allreduce(clt_comm *c, void *buf, size_t n, size_t elem, MPI_Datatype type,
                            MPI_Op op)
{
    size_t chunk = CLT_MPI_CHUNK_BYTES / elem;
    for (size_t off = 0; off < n; off += chunk) {
        size_t k = n - off < chunk ? n - off : chunk;
        int rc = MPI_Allreduce(MPI_IN_PLACE, (char *)buf + off * elem, (int)k, type, op,
                               state_of(c)->comm);
        if (rc != MPI_SUCCESS) return mpi_fail(CLT_ERR_IO, "MPI_Allreduce", rc);
    }
    return CLT_OK;
}

static clt_status mpi_allreduce_f32(clt_comm *c, float *buf, size_t n)
{
    return allreduce(c, buf, n, sizeof *buf, MPI_FLOAT, MPI_SUM);
}

static clt_status mpi_allreduce_f64(clt_comm *c, double *buf, size_t n, clt_reduce_op op)
{
    return allreduce(c, buf, n, sizeof *buf, MPI_DOUBLE, op == CLT_REDUCE_MAX ? MPI_MAX : MPI_SUM);
}

static clt_status mpi_allgather(clt_comm *c, const void *mine, size_t bytes, void *all)
{
    if (bytes > INT_MAX)
        return clt__fail(NULL, CLT_ERR_INVALID_ARG, "MPI_Allgather: %zu bytes per member; "
                         "expected at most %d", bytes, INT_MAX);
    int rc = MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE,
                           state_of(c)->comm);
    if (rc != MPI_SUCCESS) return mpi_fail(CLT_ERR_IO, "MPI_Allgather", rc);
    return CLT_OK;
}

static void mpi_abort(clt_comm *c, const char *message)
{
    (void)c;
    (void)message; /* the caller has printed it */
    /* MPI_Abort kills this process without flushing stdio: keep the caller's line */
    fflush(stdout);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static bool mpi_aborted(const clt_comm *c)
{
    (void)c;
    return false; /* an abort ends every process: no member lives to see it */
}

/* Frees what create made (c may be half-made); finalises MPI if this end initialised it. */
static void mpi_free(clt_comm *c)
{
    struct mpi_state *s = state_of(c);
    if (s) {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized) {
            if (s->comm != MPI_COMM_NULL) MPI_Comm_free(&s->comm);
            if (s->initialised) MPI_Finalize();
        }
        free(s);
    }
    free(c->cum);
    free(c);
}

static const struct clt_comm_ops mpi_ops = {
    .kind = "mpi",
    .allreduce_f32 = mpi_allreduce_f32,
    .allreduce_f64 = mpi_allreduce_f64,
    .allgather = mpi_allgather,
    .abort = mpi_abort,
    .aborted = mpi_aborted,
    .free = mpi_free,
};

bool clt_comm_mpi_available(void)
{
    return true;
}

static const char *thread_level_name(int level)
{
    switch (level) {
    case MPI_THREAD_SINGLE:
        return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
        return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
        return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
        return "MPI_THREAD_MULTIPLE";
    default:
        return "an unknown level";
    }
}

clt_status clt_comm_mpi_create(clt_comm **out)
{
    clt_status st = CLT_OK;
    clt_comm *c = NULL;
    struct mpi_state *s = NULL;
    MPI_Comm local = MPI_COMM_NULL;
    int initialized = 0, finalized = 0, provided = MPI_THREAD_SINGLE, rc;
    *out = NULL;
    CLT_ALLOC(NULL, c, 1);
    CLT_ALLOC(NULL, s, 1);
    s->comm = MPI_COMM_NULL;
    c->ops = &mpi_ops;
    c->impl = s;

    MPI_Finalized(&finalized);
    if (finalized)
        CLT_FAIL(NULL, CLT_ERR_UNSUPPORTED,
                 "MPI could not be initialised: this process has already finalised it");
    MPI_Initialized(&initialized);
    if (!initialized) {
        /* SERIALIZED, not FUNNELED: the trainer may make its MPI calls from a thread other
         * than the one that created the communicator, but never from two at once */
        rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
        if (rc != MPI_SUCCESS) {
            st = mpi_fail(CLT_ERR_UNSUPPORTED, "MPI could not be initialised: MPI_Init_thread", rc);
            goto fail;
        }
        s->initialised = true;
        /* MPI is ours, so is its handler: from MPI_Comm_dup on, failures return codes */
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    } else {
        MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_SERIALIZED)
        CLT_FAIL(NULL, CLT_ERR_UNSUPPORTED,
                 "MPI could not be initialised: it provides %s; cltrain needs "
                 "MPI_THREAD_SERIALIZED (initialise MPI with MPI_Init_thread)",
                 thread_level_name(provided));

    rc = MPI_Comm_dup(MPI_COMM_WORLD, &s->comm);
    if (rc != MPI_SUCCESS) {
        st = mpi_fail(CLT_ERR_UNSUPPORTED, "MPI could not be initialised: MPI_Comm_dup", rc);
        goto fail;
    }
    MPI_Comm_set_errhandler(s->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(s->comm, &c->rank);
    MPI_Comm_size(s->comm, &c->size);
    rc = MPI_Comm_split_type(s->comm, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &local);
    if (rc != MPI_SUCCESS) {
        st = mpi_fail(CLT_ERR_UNSUPPORTED, "MPI could not be initialised: MPI_Comm_split_type", rc);
        goto fail;
    }
    MPI_Comm_rank(local, &c->local_rank);
    MPI_Comm_size(local, &c->local_size);
    CLT_TRY(clt__comm_set_shares(c, NULL));
    *out = c;
    c = NULL;
fail:
    if (local != MPI_COMM_NULL) MPI_Comm_free(&local);
    if (c) mpi_free(c); /* with s, once allocated */
    return st;
}
