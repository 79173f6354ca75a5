/* Communicators: what both kinds share (shares, slices, the dispatch) and the in-process group,
 * whose members are threads of one process that meet at a barrier.
 *
 * A group's allreduce: every member publishes its buffer and meets the others at a barrier;
 * then member r sums the index range r of the n values over all buffers in rank order and
 * writes that sum into every buffer (the ranges are disjoint, so the members work in
 * parallel without touching each other's ranges, and every member ends with the same bits);
 * a second barrier keeps each buffer published until every range is written. An abort wakes
 * every member waiting at a barrier: a member that failed elsewhere never arrives, so waiting
 * on it would never end. */
#include "dist/comm_internal.h"

#include "runtime/internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- common ------------------------------------------------------------------------------- */

#define SHARE_MAX 1000000 /* per member: n times a prefix sum stays exact in double */

clt_status clt__comm_set_shares(clt_comm *c, const int *shares)
{
    clt_status st = CLT_OK;
    uint64_t *cum = NULL;
    CLT_ALLOC(NULL, cum, (size_t)c->size + 1);
    cum[0] = 0;
    for (int r = 0; r < c->size; r++) {
        int w = shares ? shares[r] : 1;
        if (w < 1 || w > SHARE_MAX)
            CLT_FAIL(NULL, CLT_ERR_INVALID_ARG,
                     "--device-shares: share %d of replica %d; expected 1 to %d", w, r, SHARE_MAX);
        cum[r + 1] = cum[r] + (uint64_t)w;
    }
    free(c->cum);
    c->cum = cum;
    cum = NULL;
fail:
    free(cum);
    return st;
}

void clt_comm_slice(const clt_comm *c, int rank, size_t n, size_t *begin, size_t *end)
{
    uint64_t T = c->cum[c->size];
    *begin = clt__slice_boundary(n, c->cum[rank], T);
    *end = clt__slice_boundary(n, c->cum[rank + 1], T);
}

size_t clt__comm_slice_max(const clt_comm *c, int rank, size_t max)
{
    return clt__slice_max(max, c->cum[rank], c->cum[rank + 1], c->cum[c->size]);
}

int clt_comm_rank(const clt_comm *c) { return c->rank; }
int clt_comm_size(const clt_comm *c) { return c->size; }
int clt_comm_local_rank(const clt_comm *c) { return c->local_rank; }
int clt_comm_local_size(const clt_comm *c) { return c->local_size; }
const char *clt_comm_kind(const clt_comm *c) { return c->ops->kind; }

clt_status clt_comm_allreduce_f32(clt_comm *c, float *buf, size_t n)
{
    return c->ops->allreduce_f32(c, buf, n);
}

clt_status clt_comm_allreduce_f64(clt_comm *c, double *buf, size_t n, clt_reduce_op op)
{
    return c->ops->allreduce_f64(c, buf, n, op);
}

clt_status clt_comm_allgather(clt_comm *c, const void *mine, size_t bytes, void *all)
{
    return c->ops->allgather(c, mine, bytes, all);
}

void clt_comm_abort(clt_comm *c, const char *message)
{
    c->ops->abort(c, message ? message : "");
}

bool clt_comm_aborted(const clt_comm *c)
{
    return c->ops->aborted(c);
}

void clt_comm_free(clt_comm *c)
{
    if (c && c->ops->free) c->ops->free(c);
}

bool clt_comm_mpi_launched(void)
{
    /* Open MPI's mpirun, and launchers speaking PMI or PMIx (Slurm's srun, MPICH's hydra) */
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return true;
    }
    return false;
}

/* ---- the in-process group ----------------------------------------------------------------- */

struct clt_comm_group {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n;
    int arrived;     /* at the current barrier */
    long generation; /* barriers completed */
    bool aborted;
    char message[1024];
    /* the current collective: each member's buffer and length, published before the first
     * barrier and read until the second */
    void *buf[CLT_COMM_MAX_MEMBERS];
    size_t len[CLT_COMM_MAX_MEMBERS];
    clt_comm member[CLT_COMM_MAX_MEMBERS];
};

static struct clt_comm_group *group_of(const clt_comm *c)
{
    return (struct clt_comm_group *)c->impl;
}

static clt_status aborted_status(struct clt_comm_group *g)
{
    /* called with g->mu held; the message was fixed by the first abort */
    return clt__fail(NULL, CLT_ERR_ABORTED, "%s", g->message);
}

/* Waits until all n members arrive (or any aborts). */
static clt_status barrier(struct clt_comm_group *g)
{
    clt_status st = CLT_OK;
    bool done = false;
    pthread_mutex_lock(&g->mu);
    if (!g->aborted) {
        long gen = g->generation;
        if (++g->arrived == g->n) {
            g->arrived = 0;
            g->generation++;
            pthread_cond_broadcast(&g->cv);
        } else {
            while (gen == g->generation && !g->aborted) pthread_cond_wait(&g->cv, &g->mu);
        }
        done = gen != g->generation;
    }
    /* an abort after this barrier completed is seen at the next one */
    if (!done) st = aborted_status(g);
    pthread_mutex_unlock(&g->mu);
    return st;
}

/* The shared part of both allreduces: publish, meet, check the lengths agree. */
static clt_status group_enter(clt_comm *c, void *buf, size_t n)
{
    struct clt_comm_group *g = group_of(c);
    g->buf[c->rank] = buf; /* read by the others only after the barrier */
    g->len[c->rank] = n;
    clt_status st = barrier(g);
    if (st != CLT_OK) return st;
    for (int r = 0; r < g->n; r++)
        if (g->len[r] != n)
            return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                             "collective: replica %d passed %zu values, replica %d %zu", c->rank,
                             n, r, g->len[r]);
    return CLT_OK;
}

static clt_status group_allreduce_f32(clt_comm *c, float *buf, size_t n)
{
    struct clt_comm_group *g = group_of(c);
    clt_status st = group_enter(c, buf, n);
    if (st == CLT_OK) {
        /* equal ranges of the work, whatever the batch shares */
        size_t lo = n * (size_t)c->rank / (size_t)g->n,
               hi = n * ((size_t)c->rank + 1) / (size_t)g->n;
        for (size_t i = lo; i < hi; i++) {
            float s = ((float *)g->buf[0])[i];
            for (int r = 1; r < g->n; r++) s += ((float *)g->buf[r])[i];
            for (int r = 0; r < g->n; r++) ((float *)g->buf[r])[i] = s;
        }
    }
    clt_status st2 = barrier(g); /* keep every buffer published until all ranges are written */
    return st != CLT_OK ? st : st2;
}

static clt_status group_allreduce_f64(clt_comm *c, double *buf, size_t n, clt_reduce_op op)
{
    struct clt_comm_group *g = group_of(c);
    clt_status st = group_enter(c, buf, n);
    if (st == CLT_OK) {
        size_t lo = n * (size_t)c->rank / (size_t)g->n,
               hi = n * ((size_t)c->rank + 1) / (size_t)g->n;
        for (size_t i = lo; i < hi; i++) {
            double s = ((double *)g->buf[0])[i];
            for (int r = 1; r < g->n; r++) {
                double v = ((double *)g->buf[r])[i];
                s = op == CLT_REDUCE_MAX ? (v > s ? v : s) : s + v;
            }
            for (int r = 0; r < g->n; r++) ((double *)g->buf[r])[i] = s;
        }
    }
    clt_status st2 = barrier(g);
    return st != CLT_OK ? st : st2;
}

static clt_status group_allgather(clt_comm *c, const void *mine, size_t bytes, void *all)
{
    struct clt_comm_group *g = group_of(c);
    clt_status st = group_enter(c, (void *)mine, bytes);
    if (st == CLT_OK)
        for (int r = 0; r < g->n; r++) memcpy((char *)all + (size_t)r * bytes, g->buf[r], bytes);
    clt_status st2 = barrier(g); /* keep every record published until all have copied */
    return st != CLT_OK ? st : st2;
}

static void group_abort(clt_comm *c, const char *message)
{
    struct clt_comm_group *g = group_of(c);
    pthread_mutex_lock(&g->mu);
    if (!g->aborted) {
        g->aborted = true;
        snprintf(g->message, sizeof g->message, "replica %d failed: %s", c->rank, message);
    }
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static bool group_aborted(const clt_comm *c)
{
    struct clt_comm_group *g = group_of(c);
    pthread_mutex_lock(&g->mu);
    bool a = g->aborted;
    pthread_mutex_unlock(&g->mu);
    return a;
}

static const struct clt_comm_ops group_ops = {
    .kind = "group",
    .allreduce_f32 = group_allreduce_f32,
    .allreduce_f64 = group_allreduce_f64,
    .allgather = group_allgather,
    .abort = group_abort,
    .aborted = group_aborted,
    .free = NULL, /* the group owns its members */
};

clt_status clt_comm_group_create(clt_comm_group **out, int n, const int *shares)
{
    clt_status st = CLT_OK;
    struct clt_comm_group *g = NULL;
    *out = NULL;
    if (n < 1 || n > CLT_COMM_MAX_MEMBERS)
        CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "--devices: %d replicas; expected 1 to %d", n,
                 CLT_COMM_MAX_MEMBERS);
    CLT_ALLOC(NULL, g, 1);
    memset(g, 0, sizeof *g);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->n = n;
    for (int r = 0; r < n; r++) {
        clt_comm *c = &g->member[r];
        *c = (clt_comm){.ops = &group_ops, .rank = r, .size = n, .local_rank = r,
                        .local_size = n, .impl = g};
        CLT_TRY(clt__comm_set_shares(c, shares));
    }
    *out = g;
    g = NULL;
fail:
    clt_comm_group_free(g);
    return st;
}

clt_comm *clt_comm_group_member(clt_comm_group *g, int i)
{
    return i >= 0 && i < g->n ? &g->member[i] : NULL;
}

void clt_comm_group_free(clt_comm_group *g)
{
    if (!g) return;
    for (int r = 0; r < g->n; r++) free(g->member[r].cum);
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g);
}
