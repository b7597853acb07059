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

#include "kpccl.h"

struct ctx {
    kpccl_shm_oob_cb_t cbs;
    void *group;
    int rank, nranks, peer;
    kpccl_shm_win_h win;
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
    double *s = calloc(b.samples, sizeof *s);
    char key[128];
    if (!s)
        return 1;
    long n;
    if (c.nranks >= 2) {
        if ((n = budget_sample(&b, agree, peer_op, &c, s)) < 0) {
            fprintf(stderr, "kpccl_bench: peer fence failed: %s\n", kpccl_last_error());
            return 1;
        }
        if (c.peer >= c.nranks)
            for (long i = 0; i < n; i++)
                s[i] = NAN;
        snprintf(key, sizeof key, "%s/peer/%d", tag, c.nranks);
        if (report(&c, out, key, s, (uint64_t)n))
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
    if (kpccl_shm_win_free(c.win) != KPCCL_OK || kpccl_shm_comm_destroy(comm) != KPCCL_OK) {
        fprintf(stderr, "kpccl_bench: teardown failed: %s\n", kpccl_last_error());
        return 1;
    }
    return 0;
}
