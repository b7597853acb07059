/*
 * fence_stress.c: ranks hand data to each other in random pairings through
 * a window, ordered only by kpccl_shm_peer_fence, and verify every word; then
 * everyone-to-everyone rounds ordered by kpccl_shm_win_fence; and segments of
 * different sizes (one of them empty) checked through kpccl_shm_win_query.
 *
 * Every rank's segment holds one inbox per sender, written only by that
 * sender, so a rank may read inbox s while a third rank writes inbox t.
 * A round with partner p: write into p's inbox of mine; peer fence; verify
 * my inbox of p's; peer fence again (p has read mine before I write again).
 *
 * Then a ring ordered only by one-way signals: each round a rank writes into
 * its successor's inbox, kpccl_shm_peer_signal(next), waits for its
 * predecessor's signal, verifies, and acknowledges with a signal back; it
 * writes again only after the successor's acknowledgement.
 *
 * KPCCL_STRESS_ROUNDS (default 1000) sets the rounds of each phase,
 * KPCCL_STRESS_SEED the seed (default: from the clock, printed).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <mpi.h>

#include "check.h"
#include "kpccl.h"

#define WORDS 1024 /* per inbox */

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* The word `i` that `from` hands `to` in `round`. */
static uint64_t word(uint64_t seed, int round, int from, int to, int i)
{
    return mix(seed ^ mix(((uint64_t)round << 40) ^ ((uint64_t)from << 28) ^ ((uint64_t)to << 16) ^ (uint64_t)i));
}

/* The same random perfect matching on every rank: partner[r], or -1 (odd rank out). */
static void pairing(uint64_t seed, int round, int n, int *perm, int *partner)
{
    uint64_t state = mix(seed + (uint64_t)round * 0x9e3779b97f4a7c15ULL);
    for (int i = 0; i < n; i++) {
        perm[i] = i;
        partner[i] = -1;
    }
    for (int i = n - 1; i > 0; i--) {
        state = mix(state + 1);
        int j = (int)(state % (uint64_t)(i + 1));
        int t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int i = 0; i + 1 < n; i += 2) {
        partner[perm[i]] = perm[i + 1];
        partner[perm[i + 1]] = perm[i];
    }
}

static int env_int(const char *name, int fallback)
{
    const char *v = getenv(name);
    return v != NULL && *v != '\0' ? atoi(v) : fallback;
}

/* The first wrong word of `count` at `got`, or -1. */
static long verify(const volatile uint64_t *got, uint64_t seed, int round, int from, int to, int count)
{
    for (int i = 0; i < count; i++) {
        if (got[i] != word(seed, round, from, to, i)) {
            return i;
        }
    }
    return -1;
}

static void random_pairs(kpccl_shm_win_h win, volatile uint64_t **seg, uint64_t seed, int rounds)
{
    int me = win->rank, n = win->nranks;
    int *perm = (int *)malloc(sizeof(int) * (size_t)n);
    int *partner = (int *)malloc(sizeof(int) * (size_t)n);
    for (int round = 0; round < rounds; round++) {
        pairing(seed, round, n, perm, partner);
        int p = partner[me];
        if (p < 0) {
            continue;
        }
        volatile uint64_t *out = seg[p] + (size_t)me * WORDS;
        for (int i = 0; i < WORDS; i++) {
            out[i] = word(seed, round, me, p, i);
        }
        int rc = kpccl_shm_peer_fence(win, p);
        long bad = verify(seg[me] + (size_t)p * WORDS, seed, round, p, me, WORDS);
        int rc2 = kpccl_shm_peer_fence(win, p);
        CHECK(rc == KPCCL_OK && rc2 == KPCCL_OK && bad < 0, "round %d with rank %d: fences %d %d, first bad word %ld",
              round, p, rc, rc2, bad);
    }
    free(perm);
    free(partner);
}

static void all_to_all(kpccl_shm_win_h win, volatile uint64_t **seg, uint64_t seed, int rounds)
{
    int me = win->rank, n = win->nranks;
    for (int round = 0; round < rounds; round++) {
        int k = rounds + round; /* other values than the pair phase's */
        for (int to = 0; to < n; to++) {
            volatile uint64_t *out = seg[to] + (size_t)me * WORDS;
            for (int i = 0; i < WORDS / 8; i++) {
                out[i] = word(seed, k, me, to, i);
            }
        }
        int rc = kpccl_shm_win_fence(win);
        int bad_from = -1;
        for (int from = 0; from < n && bad_from < 0; from++) {
            if (verify(seg[me] + (size_t)from * WORDS, seed, k, from, me, WORDS / 8) >= 0) {
                bad_from = from;
            }
        }
        int rc2 = kpccl_shm_win_fence(win);
        CHECK(rc == KPCCL_OK && rc2 == KPCCL_OK && bad_from < 0, "all-to-all round %d: fences %d %d, bad data from %d",
              round, rc, rc2, bad_from);
    }
}

/* kpccl_shm_peer_wait made of tests: polls until one consumes a signal. */
static int tested_wait(kpccl_shm_win_h win, int from)
{
    int flag = 0, rc;
    while ((rc = kpccl_shm_peer_test(win, from, &flag)) == KPCCL_OK && !flag) {
    }
    return rc;
}

/* Every rank writes to its successor and signals it; odd rounds take the
 * signals with tests instead of waits (the two consume from one count). */
static void signal_ring(kpccl_shm_win_h win, volatile uint64_t **seg, uint64_t seed, int rounds)
{
    int me = win->rank, n = win->nranks;
    int next = (me + 1) % n, prev = (me + n - 1) % n;
    for (int round = 0; round < rounds && n > 1; round++) {
        int k = 2 * rounds + round; /* other values than the other phases' */
        int ack = round == 0 ? KPCCL_OK : kpccl_shm_peer_wait(win, next); /* next has read round - 1 */
        volatile uint64_t *out = seg[next] + (size_t)me * WORDS;
        for (int i = 0; i < WORDS / 4; i++) {
            out[i] = word(seed, k, me, next, i);
        }
        int rc = kpccl_shm_peer_signal(win, next);
        int rc2 = round % 2 ? tested_wait(win, prev) : kpccl_shm_peer_wait(win, prev);
        long bad = verify(seg[me] + (size_t)prev * WORDS, seed, k, prev, me, WORDS / 4);
        int rc3 = kpccl_shm_peer_signal(win, prev);
        CHECK(ack == KPCCL_OK && rc == KPCCL_OK && rc2 == KPCCL_OK && rc3 == KPCCL_OK && bad < 0,
              "signal ring round %d: calls %d %d %d %d, first bad word %ld from rank %d", round, ack, rc, rc2, rc3, bad,
              prev);
    }
    if (n > 1 && rounds > 0) {
        CHECK_OK(kpccl_shm_peer_wait(win, next)); /* the last acknowledgement */
        int flag = 1;
        CHECK_OK(kpccl_shm_peer_test(win, prev, &flag));
        CHECK(flag == 0, "no signal is left to take from rank %d", prev);
    }
}

/* Sizes differ per rank, one is 0: every rank sees every segment, with its size, where it should be. */
static void uneven(kpccl_shm_comm_h comm, int me, int n)
{
    size_t size = me == n - 1 && n > 1 ? 0 : (size_t)(me + 1) * 1000 + 3;
    void *base = NULL;
    kpccl_shm_win_h win = NULL;
    CHECK_OK(kpccl_shm_win_alloc(size, comm, &base, &win));
    if (win == NULL) {
        return;
    }
    CHECK(size == 0 ? base == NULL : base != NULL, "own base %p for size %zu", base, size);
    if (base != NULL) {
        memset(base, me + 1, size);
    }
    CHECK_OK(kpccl_shm_win_fence(win));
    for (int r = 0; r < n; r++) {
        size_t got = 1;
        void *ptr = NULL;
        size_t want = r == n - 1 && n > 1 ? 0 : (size_t)(r + 1) * 1000 + 3;
        CHECK_OK(kpccl_shm_win_query(win, r, &got, &ptr));
        CHECK(got == want && (want == 0) == (ptr == NULL), "rank %d's segment: %zu bytes at %p", r, got, ptr);
        CHECK(r != me || ptr == base, "own segment at %p, alloc said %p", ptr, base);
        int same = 1;
        for (size_t i = 0; ptr != NULL && i < got; i++) {
            same &= ((volatile unsigned char *)ptr)[i] == (unsigned char)(r + 1);
        }
        CHECK(same, "rank %d's segment does not hold its bytes", r);
    }
    CHECK_OK(kpccl_shm_win_free(win));
}

int main(int argc, char **argv)
{
    int me, n;
    kpccl_shm_oob_cb_t cbs;
    check_init(&argc, &argv, &me, &n, &cbs);
    MPI_Comm world = MPI_COMM_WORLD;
    kpccl_shm_comm_h comm = NULL;
    CHECK_OK(kpccl_shm_comm_create(n, me, me, &cbs, &world, &comm));

    /* Rank 0's seed, for everyone. */
    uint64_t seed = (uint64_t)env_int("KPCCL_STRESS_SEED", (int)(time(NULL) & 0x7fffffff));
    uint64_t *seeds = (uint64_t *)calloc((size_t)n, sizeof(uint64_t));
    MPI_Allgather(&seed, (int)sizeof seed, MPI_CHAR, seeds, (int)sizeof seed, MPI_CHAR, world);
    seed = seeds[0];
    free(seeds);
    int rounds = env_int("KPCCL_STRESS_ROUNDS", 1000);
    if (me == 0) {
        printf("fence_stress: %d ranks, %d rounds, KPCCL_STRESS_SEED=%llu\n", n, rounds, (unsigned long long)seed);
        fflush(stdout);
    }

    /* Contiguous, aligned, then contiguous with the flat barrier and lazy memory. */
    for (int variant = 0; comm != NULL && variant < 3; variant++) {
        kpccl_shm_win_attr_t attr;
        CHECK_OK(kpccl_shm_win_attr_init(&attr));
        attr.layout = variant == 1 ? KPCCL_SHM_LAYOUT_ALIGNED : KPCCL_SHM_LAYOUT_CONTIGUOUS;
        if (variant == 2) {
            attr.barrier = KPCCL_SHM_BARRIER_FLAT;
            attr.reserve = KPCCL_SHM_RESERVE_LAZY;
        }
        attr.timeout_ms = 60000; /* a lost fence fails the test instead of hanging it */
        void *base = NULL;
        kpccl_shm_win_h win = NULL;
        CHECK_OK(kpccl_shm_win_alloc_ex(sizeof(uint64_t) * WORDS * (size_t)n, comm, &attr, &base, &win));
        if (win == NULL) {
            break;
        }
        CHECK(win->rank == me && win->nranks == n, "win says rank %d of %d", win->rank, win->nranks);
        volatile uint64_t **seg = (volatile uint64_t **)calloc((size_t)n, sizeof *seg);
        for (int r = 0; r < n; r++) {
            size_t size = 0;
            void *ptr = NULL;
            CHECK_OK(kpccl_shm_win_query(win, r, &size, &ptr));
            seg[r] = (volatile uint64_t *)ptr;
        }
        CHECK(seg[me] == base, "query and alloc disagree on my segment");
        random_pairs(win, seg, seed + (uint64_t)variant, rounds);
        all_to_all(win, seg, seed + (uint64_t)variant, rounds / 4 + 1);
        signal_ring(win, seg, seed + (uint64_t)variant, rounds);
        random_pairs(win, seg, seed + (uint64_t)variant + 1, rounds / 8 + 1); /* fences still match after signals */
        free((void *)seg);
        CHECK_OK(kpccl_shm_win_free(win));
    }
    if (comm != NULL) {
        uneven(comm, me, n);
        CHECK_OK(kpccl_shm_comm_destroy(comm));
    }
    return check_finish(world);
}
