/*
 * kpccl_bench.c: the C API's fences, timed — one rank of a job started by
 * the kpccl launcher (kpccl-bench or kpccl-run), no MPI.
 *
 *   kpccl_bench TAG BUDGET OUT     (BUDGET: see bench.h)
 *
 * Measures kpccl_shm_peer_fence between ranks 2i and 2i+1 (TAG/peer/N) and
 * kpccl_shm_win_fence over every rank (TAG/fence/N); rank 0 appends the
 * results to OUT.
 */
#include "bench.h"

#include <stdatomic.h>

#include "kpccl.h"

struct ctx {
    kpccl_shm_oob_cb_t cbs;
    void *group;
    int rank, nranks, peer;
    kpccl_shm_win_h win;
    /* The paired reference's flags: the first word of this rank's segment and of the peer's. */
    _Atomic uint64_t *mine, *theirs;
};

static uint64_t agree(void *p, uint64_t mine)
{
    struct ctx *c = p;
    uint64_t *all = calloc((size_t)c->nranks, sizeof *all);
    if (!all || c->cbs.oob_allgather(&mine, all, (int)sizeof mine, c->group, KPCCL_SHM_DATATYPE_CHAR)) {
        fprintf(stderr, "kpccl_bench: allgather failed\n");
        exit(1);
    }
    uint64_t k = all[0];
    free(all);
    return k;
}

static int peer_op(void *p)
{
    struct ctx *c = p;
    return c->peer < c->nranks ? kpccl_shm_peer_fence(c->win, c->peer) : 0;
}

/* The reference paired with peer_op: the bare flag exchange between the
 * same two processes, with the spin hint the library's wait uses
 * (bench/src/reference.rs, `Spin::Hint`). */
static int ref_op(void *p)
{
    struct ctx *c = p;
    if (c->peer >= c->nranks)
        return 0;
    uint64_t e = atomic_load_explicit(c->mine, memory_order_relaxed) + 1;
    atomic_store_explicit(c->mine, e, memory_order_release);
    while (atomic_load_explicit(c->theirs, memory_order_acquire) < e)
        spin_hint();
    return 0;
}

static int fence_op(void *p)
{
    struct ctx *c = p;
    return kpccl_shm_win_fence(c->win);
}

static int report(struct ctx *c, const char *out, const char *key, const double *mine, uint64_t k)
{
    double *all = calloc((size_t)c->nranks * k, sizeof *all);
    if (!all)
        return -1;
    int rc = c->cbs.oob_allgather(mine, all, (int)(k * sizeof *mine), c->group, KPCCL_SHM_DATATYPE_CHAR);
    if (!rc && c->rank == 0)
        rc = result_append(out, key, "ns", all, c->nranks, k);
    free(all);
    return rc;
}

int main(int argc, char **argv)
{
    budget_t b;
    if (argc != 4 || budget_parse(argv[2], &b)) {
        fprintf(stderr, "usage: kpccl_bench TAG WARMUP:WARMUP_NS:SAMPLES:SAMPLE_NS:MAX_ITERS:MAX_NS OUT\n");
        return 2;
    }
    const char *tag = argv[1], *out = argv[3];
    struct ctx c = {0};
    kpccl_shm_comm_h comm = NULL;
    void *base = NULL;
    if (kpccl_run_oob(&c.cbs, &c.group, &c.rank, &c.nranks) != KPCCL_OK ||
        kpccl_shm_comm_create(c.nranks, c.rank, c.rank, &c.cbs, c.group, &comm) != KPCCL_OK ||
        kpccl_shm_win_alloc(4096, comm, &base, &c.win) != KPCCL_OK) {
        fprintf(stderr, "kpccl_bench: setup failed: %s\n", kpccl_last_error());
        return 1;
    }
    c.peer = c.rank ^ 1;
    double *s = calloc(b.samples, sizeof *s), *r = calloc(b.samples, sizeof *r);
    char key[128];
    if (!s || !r)
        return 1;
    long n;
    if (c.nranks >= 2) {
        size_t size;
        void *mine = NULL, *theirs = NULL;
        if (kpccl_shm_win_query(c.win, c.rank, &size, &mine) != KPCCL_OK ||
            kpccl_shm_win_query(c.win, c.peer < c.nranks ? c.peer : c.rank, &size, &theirs) != KPCCL_OK) {
            fprintf(stderr, "kpccl_bench: query failed: %s\n", kpccl_last_error());
            return 1;
        }
        c.mine = mine;
        c.theirs = theirs;
        /* Paired with the reference only while every rank has a CPU: its
         * spinning would take the CPUs that other pairs' fences need. */
        int paired = c.nranks == 2;
        if ((n = budget_sample_paired(&b, agree, peer_op, paired ? ref_op : NULL, &c, s, r)) < 0) {
            fprintf(stderr, "kpccl_bench: peer fence failed: %s\n", kpccl_last_error());
            return 1;
        }
        if (c.peer >= c.nranks)
            for (long i = 0; i < n; i++)
                s[i] = r[i] = NAN;
        snprintf(key, sizeof key, "%s/peer/%d", tag, c.nranks);
        if (report(&c, out, key, s, (uint64_t)n))
            return 1;
        snprintf(key, sizeof key, "%s/peer-ref/%d", tag, c.nranks);
        if (paired && report(&c, out, key, r, (uint64_t)n))
            return 1;
    }
    if ((n = budget_sample(&b, agree, fence_op, &c, s)) < 0) {
        fprintf(stderr, "kpccl_bench: window fence failed: %s\n", kpccl_last_error());
        return 1;
    }
    snprintf(key, sizeof key, "%s/fence/%d", tag, c.nranks);
    if (report(&c, out, key, s, (uint64_t)n))
        return 1;
    free(s);
    free(r);
    if (kpccl_shm_win_free(c.win) != KPCCL_OK || kpccl_shm_comm_destroy(comm) != KPCCL_OK) {
        fprintf(stderr, "kpccl_bench: teardown failed: %s\n", kpccl_last_error());
        return 1;
    }
    return 0;
}
