/* The communicator's private side: one struct for both kinds, with the operations a kind
 * provides in a table (comm.c: the in-process group; comm_mpi.c: MPI, or comm_nompi.c when
 * built without it). The shares and the slicing are common (comm.c). */
#ifndef CLTRAIN_DIST_COMM_INTERNAL_H
#define CLTRAIN_DIST_COMM_INTERNAL_H

#include "cltrain/dist.h"

#include <stdint.h>

/* The largest slice member rank gets of any n <= max (its slice of max, or one more): what a
 * replica's model and loader must hold. */
size_t clt__comm_slice_max(const clt_comm *c, int rank, size_t max);

struct clt_comm_ops {
    const char *kind;
    clt_status (*allreduce_f32)(clt_comm *c, float *buf, size_t n);
    clt_status (*allreduce_f64)(clt_comm *c, double *buf, size_t n, clt_reduce_op op);
    clt_status (*allgather)(clt_comm *c, const void *mine, size_t bytes, void *all);
    void (*abort)(clt_comm *c, const char *message);
    bool (*aborted)(const clt_comm *c);
    void (*free)(clt_comm *c); /* clt_comm_free: MPI's end (a group's members: NULL) */
};

struct clt_comm {
    const struct clt_comm_ops *ops;
    int rank, size;
    int local_rank, local_size;
    /* prefix sums of the shares: member r takes [cum[r], cum[r + 1]) of cum[size] */
    uint64_t *cum;
    void *impl; /* the kind's state: the group, or MPI's */
};

/* Sets c's shares (NULL: equal; else `size` positive integers). CLT_ERR_INVALID_ARG,
 * CLT_ERR_HOST_MEMORY; the message names --device-shares. */
clt_status clt__comm_set_shares(clt_comm *c, const int *shares);

#endif
