/* Data-parallel training: a communicator joins the replicas of one run, each a model on its own
 * ctx, so that every global batch is split across them and their gradients are summed before
 * every replica takes the same optimizer step. Two kinds exist:
 *   - a group of n replicas in one process (clt_comm_group_create), one thread per replica
 *     (clt_train_setup_run_group runs them), the sums made in host memory by the threads;
 *   - one replica per MPI process (clt_comm_mpi_create), the sums made by MPI_Allreduce; built
 *     when Open MPI is present (clt_comm_mpi_available).
 * Every member gets a bit-identical sum, so the replicas' weights stay bit-identical (the
 * trainer checks this at the start and at every checkpoint). A failing member aborts the
 * communicator: the other members' pending and later calls return CLT_ERR_ABORTED with the
 * failing member's message, so no member waits forever. See docs/distributed.md.
 *
 * Usage:
 *
 *     clt_comm_group *g;                      // two replicas in this process
 *     clt_comm_group_create(&g, 2, NULL);
 *     // set-up i: p.train.comm = clt_comm_group_member(g, i); then
 *     // clt_train_setup_run_group(setups, 2, &failed);
 *     clt_comm_group_free(g);
 */
#ifndef CLTRAIN_DIST_H
#define CLTRAIN_DIST_H

#include "cltrain/export.h"

#include "cltrain/status.h"

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct clt_comm clt_comm;             /* one member's end */
typedef struct clt_comm_group clt_comm_group; /* n members in one process */

#define CLT_COMM_MAX_MEMBERS 64 /* members of an in-process group */

/* n members (1 to CLT_COMM_MAX_MEMBERS) with the given shares of every batch (n positive
 * integers; NULL: equal shares). CLT_ERR_INVALID_ARG, CLT_ERR_HOST_MEMORY. Thread-safe. */
CLT_API clt_status clt_comm_group_create(clt_comm_group **out, int n, const int *shares);
/* Member i's end (owned by the group). Each member's calls come from one thread at a time. */
CLT_API clt_comm *clt_comm_group_member(clt_comm_group *g, int i);
/* Frees the group; no member may be in a call. Accepts NULL. */
CLT_API void clt_comm_group_free(clt_comm_group *g);

/* Whether this library was built with MPI. */
CLT_API bool clt_comm_mpi_available(void);
/* Whether this process was started by mpirun (Open MPI's, or a PMI/PMIx launcher): the
 * environment names a world size. Thread-safe. */
CLT_API bool clt_comm_mpi_launched(void);
/* This process's end of MPI_COMM_WORLD, every rank with an equal share. Initialises MPI
 * (MPI_Init_thread, MPI_THREAD_SERIALIZED) unless the caller already has; clt_comm_free then
 * finalises what it initialised. CLT_ERR_UNSUPPORTED when built without MPI. */
CLT_API clt_status clt_comm_mpi_create(clt_comm **out);
/* Frees an end made by clt_comm_mpi_create (a group's members belong to the group). Accepts
 * NULL. */
CLT_API void clt_comm_free(clt_comm *c);

/* This member's index (0 to size - 1) and the number of members. */
CLT_API int clt_comm_rank(const clt_comm *c);
CLT_API int clt_comm_size(const clt_comm *c);
/* The node-local index of this member among the members sharing its machine (MPI: the rank
 * within MPI_COMM_TYPE_SHARED; a group: its rank) and how many share it. */
CLT_API int clt_comm_local_rank(const clt_comm *c);
CLT_API int clt_comm_local_size(const clt_comm *c);
/* "group" or "mpi". */
CLT_API const char *clt_comm_kind(const clt_comm *c);

/* Member rank's slice [*begin, *end) of n items: with shares w_0..w_{size-1} and their prefix
 * sums C_r (C_0 = 0, total T), [floor(n C_r / T), floor(n C_{r+1} / T)). The slices of all
 * members tile [0, n) in rank order; a slice may be empty when n is small. Pure. */
CLT_API void clt_comm_slice(const clt_comm *c, int rank, size_t n, size_t *begin, size_t *end);

typedef enum clt_reduce_op { CLT_REDUCE_SUM = 0, CLT_REDUCE_MAX } clt_reduce_op;
/* Every member passes n values; on return each holds the elementwise sum (or maximum) over the
 * members, the same bits on every member (a group sums in rank order). Blocks until every
 * member has called. CLT_ERR_ABORTED after clt_comm_abort on any member, CLT_ERR_INVALID_ARG
 * when the members' n differ (the group checks; MPI cannot). Not for two threads of one
 * member at once. */
CLT_API clt_status clt_comm_allreduce_f32(clt_comm *c, float *buf, size_t n);
CLT_API clt_status clt_comm_allreduce_f64(clt_comm *c, double *buf, size_t n, clt_reduce_op op);
/* Every member passes `bytes` bytes in `mine`; on return all (size * bytes, caller-owned)
 * holds every member's in rank order, the same on every member. A small record, exchanged
 * once (the trainer's check that the members run the same thing: clt_train_setup_agree).
 * Blocks until every member has called; CLT_ERR_ABORTED, CLT_ERR_INVALID_ARG as the
 * allreduces. Not for two threads of one member at once. */
CLT_API clt_status clt_comm_allgather(clt_comm *c, const void *mine, size_t bytes, void *all);
/* Stops the run of every member: a group wakes its waiting members, whose calls return
 * CLT_ERR_ABORTED with "replica R failed: MESSAGE"; MPI prints nothing and calls MPI_Abort
 * (the caller prints its one line first). The first abort's message wins. */
CLT_API void clt_comm_abort(clt_comm *c, const char *message);
/* Whether any member aborted (group; MPI: false). */
CLT_API bool clt_comm_aborted(const clt_comm *c);

#ifdef __cplusplus
}
#endif
#endif
