/*
 * multinode.c: a communicator over several nodes, simulated on one machine
 * by giving each rank a KPCCL_NODE_ID (set here, before each
 * kpccl_shm_comm_create). The ranks are split into 2 and into 4 nodes (as
 * many as there are ranks, at most), in blocks with local ranks given and
 * round-robin with KPCCL_LOCAL_RANK_AUTO; every call is checked on both
 * sides of a node boundary:
 * - kpccl_shm_comm_query / kpccl_shm_comm_node_ranks answer as expected,
 *   kpccl_shm_comm_node_cpus within the CPUs online;
 * - kpccl_shm_win_query answers for this node's ranks, fails for others;
 * - kpccl_shm_peer_fence to another node's rank fails and says why, and
 *   orders data between this node's ranks;
 * - kpccl_shm_win_fence orders data between this node's ranks;
 * - local ranks that do not number each node 0..n-1 (the reference
 *   example's local_rank = rank) fail on every rank, none waits;
 * - an Ascend device window over several nodes is refused on every rank,
 *   also when only one rank asks for one (the others asking for host memory).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "check.h"
#include "kpccl.h"

static kpccl_shm_oob_cb_t cbs;
static MPI_Comm world;
static int me, n;

#define WORDS 64

static uint64_t word(int round, int writer, int i)
{
    return ((uint64_t)round << 40) ^ ((uint64_t)writer << 20) ^ (uint64_t)i ^ 0x5a5a000000000000ull;
}

/* Which simulated node rank r is on: blocks of ceil(n / k), or round-robin. */
static int node_of(int r, int k, int rr)
{
    int per = (n + k - 1) / k;
    return rr ? r % k : r / per;
}

static void set_node(int k, int rr)
{
    char id[64];
    snprintf(id, sizeof id, "c-sim-%d-%s-%d", k, rr ? "rr" : "block", node_of(me, k, rr));
    setenv("KPCCL_NODE_ID", id, 1);
}

static int says(const char *text)
{
    return strstr(kpccl_last_error(), text) != NULL;
}

static void split(int k, int rr)
{
    set_node(k, rr);
    int mine = node_of(me, k, rr);
    int size = 0, local = -1, nodes = 0;
    int ranks[64];
    for (int r = 0; r < n; r++) {
        if (node_of(r, k, rr) == mine) {
            if (r == me) {
                local = size;
            }
            ranks[size++] = r;
        }
        if (node_of(r, k, rr) + 1 > nodes) {
            nodes = node_of(r, k, rr) + 1;
        }
    }

    kpccl_shm_comm_h comm = NULL;
    CHECK_OK(kpccl_shm_comm_create(n, me, rr ? KPCCL_LOCAL_RANK_AUTO : local, &cbs, &world, &comm));
    if (comm == NULL) {
        return;
    }

    kpccl_shm_comm_info_t info;
    memset(&info, 0xff, sizeof info);
    CHECK_OK(kpccl_shm_comm_query(comm, &info));
    CHECK(info.rank == me && info.nranks == n, "rank %d of %d", info.rank, info.nranks);
    CHECK(info.nnodes == nodes && info.node == mine, "node %d of %d, expected %d of %d", info.node, info.nnodes, mine,
          nodes);
    CHECK(info.local_rank == local && info.local_size == size, "local rank %d of %d, expected %d of %d",
          info.local_rank, info.local_size, local, size);
    CHECK_FAILS(kpccl_shm_comm_query(comm, NULL), "kpccl_shm_comm_query");
    CHECK_FAILS(kpccl_shm_comm_query(NULL, &info), "kpccl_shm_comm_query");

    int cpus = -1;
    CHECK_OK(kpccl_shm_comm_node_cpus(comm, &cpus));
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    CHECK(cpus >= 1 && (online < 1 || cpus <= online), "node cpus %d, %ld online", cpus, online);
    CHECK_FAILS(kpccl_shm_comm_node_cpus(comm, NULL), "kpccl_shm_comm_node_cpus");
    CHECK_FAILS(kpccl_shm_comm_node_cpus(NULL, &cpus), "kpccl_shm_comm_node_cpus");

    int got[64];
    memset(got, 0xff, sizeof got);
    CHECK_OK(kpccl_shm_comm_node_ranks(comm, got, 64));
    CHECK(memcmp(got, ranks, (size_t)size * sizeof(int)) == 0 && got[size] == -1, "node ranks");
    CHECK_FAILS(kpccl_shm_comm_node_ranks(comm, got, size - 1), "kpccl_shm_comm_node_ranks");
    CHECK_FAILS(kpccl_shm_comm_node_ranks(comm, NULL, 64), "kpccl_shm_comm_node_ranks");

    kpccl_shm_win_h win = NULL;
    void *base = NULL;
    CHECK_OK(kpccl_shm_win_alloc((size_t)(WORDS + me) * 8, comm, &base, &win));
    if (win == NULL) {
        kpccl_shm_comm_destroy(comm);
        return;
    }
    CHECK(win->rank == me && win->nranks == n, "win->rank %d, win->nranks %d", win->rank, win->nranks);

    /* Queries and peer fences on both sides of the boundary. */
    uint64_t *seg[64] = {0};
    for (int r = 0; r < n; r++) {
        size_t bytes = 0;
        void *p = NULL;
        if (node_of(r, k, rr) == mine) {
            CHECK_OK(kpccl_shm_win_query(win, r, &bytes, &p));
            CHECK(bytes == (size_t)(WORDS + r) * 8 && p != NULL, "rank %d's segment: %zu bytes", r, bytes);
            if (r == me) {
                CHECK(p == base, "my own segment is the one alloc gave");
            }
            seg[r] = (uint64_t *)p;
        } else {
            CHECK_FAILS(kpccl_shm_win_query(win, r, &bytes, &p), "kpccl_shm_win_query");
            CHECK(says("not on this node") && says("shared memory does not cross nodes"), "win_query(%d)", r);
            CHECK_FAILS(kpccl_shm_peer_fence(win, r), "kpccl_shm_peer_fence");
            CHECK(says("not on this node") && says("shared memory does not cross nodes"), "peer_fence(%d)", r);
        }
    }
    CHECK_FAILS(kpccl_shm_peer_fence(win, n), "kpccl_shm_peer_fence");

    /* Window fences order the node's ranks. */
    for (int round = 0; round < 10; round++) {
        for (int i = 0; i < WORDS + me; i++) {
            seg[me][i] = word(round, me, i);
        }
        CHECK_OK(kpccl_shm_win_fence(win));
        int bad = 0;
        for (int l = 0; l < size; l++) {
            int r = ranks[l];
            for (int i = 0; i < WORDS + r; i++) {
                bad += seg[r][i] != word(round, r, i);
            }
        }
        CHECK(bad == 0, "round %d: %d words wrong after win_fence", round, bad);
        CHECK_OK(kpccl_shm_win_fence(win));
    }

    /* Peer fences: local rank 0 of each node hands data to the others. */
    for (int round = 10; round < 20; round++) {
        if (local == 0) {
            for (int i = 0; i < WORDS + me; i++) {
                seg[me][i] = word(round, me, i);
            }
            for (int l = 1; l < size; l++) {
                CHECK_OK(kpccl_shm_peer_fence(win, ranks[l]));
            }
            for (int l = 1; l < size; l++) {
                CHECK_OK(kpccl_shm_peer_fence(win, ranks[l]));
            }
        } else {
            int leader = ranks[0], bad = 0;
            CHECK_OK(kpccl_shm_peer_fence(win, leader));
            for (int i = 0; i < WORDS + leader; i++) {
                bad += seg[leader][i] != word(round, leader, i);
            }
            CHECK(bad == 0, "round %d: %d words from rank %d wrong after peer_fence", round, bad, leader);
            CHECK_OK(kpccl_shm_peer_fence(win, leader));
        }
    }

    CHECK_OK(kpccl_shm_win_free(win));

    /* Device memory does not cross nodes either: every rank refuses alike. */
    if (nodes > 1) {
        kpccl_shm_win_attr_t attr;
        CHECK_OK(kpccl_shm_win_attr_init(&attr));
        attr.memory_kind = KPCCL_SHM_MEMORY_ASCEND;
        attr.device = 0;
        void *dev_base = NULL;
        kpccl_shm_win_h dev = NULL;
        CHECK_FAILS(kpccl_shm_win_alloc_ex(64, comm, &attr, &dev_base, &dev), "kpccl_shm_win_alloc_ex");
        CHECK(dev == NULL && says("device memory does not cross nodes"), "a device window over %d nodes", nodes);
        /* Mixed kinds: rank 0 asks for device memory, the others for host
         * memory. Rank 0 refuses inside the window's collective, so every
         * rank fails and none waits; the communicator still works. */
        int rc = me == 0 ? kpccl_shm_win_alloc_ex(64, comm, &attr, &dev_base, &dev)
                         : kpccl_shm_win_alloc(64, comm, &dev_base, &dev);
        CHECK(rc == KPCCL_ERROR && dev == NULL, "mixed memory kinds over %d nodes: rc %d", nodes, rc);
        CHECK(says(me == 0 ? "device memory does not cross nodes" : "rank 0 refused its part"),
              "each rank says why: %s", kpccl_last_error());
        CHECK_OK(kpccl_shm_win_alloc(64, comm, &dev_base, &dev));
        if (dev != NULL) {
            CHECK_OK(kpccl_shm_win_free(dev));
        }
    }
    CHECK_OK(kpccl_shm_comm_destroy(comm));
}

/* The reference example's local_rank = rank over k nodes: every rank fails, none waits. */
static void bad_local_ranks(int k)
{
    set_node(k, 0);
    kpccl_shm_comm_h comm = (kpccl_shm_comm_h)&comm;
    int rc = kpccl_shm_comm_create(n, me, me, &cbs, &world, &comm);
    CHECK(rc == KPCCL_ERROR && comm == NULL, "local_rank = rank on %d nodes: rc %d", k, rc);
    CHECK(says("kpccl_shm_comm_create") && says("says local_rank") && says("local ranks must be 0 to"),
          "the error says what is wrong");
}

int main(void)
{
    check_init(NULL, NULL, &me, &n, &cbs);
    world = MPI_COMM_WORLD;
    if (n > 64) {
        fprintf(stderr, "multinode: at most 64 ranks\n");
        return 2;
    }

    int ks[] = {1, 2, 4};
    for (int i = 0; i < 3; i++) {
        if (ks[i] <= n) {
            split(ks[i], 0);
            split(ks[i], 1);
        }
        if (ks[i] <= n && ks[i] > 1) {
            bad_local_ranks(ks[i]);
        }
    }
    unsetenv("KPCCL_NODE_ID");
    return check_finish(world);
}
