/*
 * house.c - the housekeeping thread (cetcd-house): trims the store map's
 * pages from the process's RSS on a budget, publishes this member until
 * it is published (members.c), runs the auto-compaction clock
 * (compactor.c) and the lessor's tick (lease_primary.c), and fails
 * requests past their deadline (timeout.c).  It holds house_mu for its
 * whole loop (server.h, "Execution contexts and lock order"); a publish
 * or compaction proposal may run an inline raft pass on it.
 */
#include <pthread.h>
#include <time.h>

#include "backend/backend.h"
#include "server/server_int.h"
#include "util/mem.h"
#include "util/thread.h"

/* Store pages the process maps, by reading them, stay in its RSS until
 * dropped (the page cache keeps them).  Under a write load they come fast:
 * LMDB writes every changed page to a new place, each is mapped on its next
 * read, and the kernel maps up to 16 neighbours of a faulting page with it;
 * a store copy (a raft snapshot, every --snapshot-count entries) reads the
 * whole store through the map (backend_copy_fd trims as it goes).  Late in
 * a 1M-key load 20-40 MB came back within 10 ms of a trim, and trimming on
 * a clock (10/s) let the 1M-key load's RSS peak at 188-219 MiB.  The house
 * thread instead trims on a budget: it looks at the process's file-backed
 * RSS every HOUSE_TICK_MS (HOUSE_IDLE_MS once HOUSE_IDLE_LOOKS looks in a
 * row saw it grow by less than HOUSE_IDLE_GROWTH) and drops the map's
 * pages once they pass HOUSE_MAP_BUDGET above what the last trim left
 * (binaries and the hot pages mapped again since).  A look is one pread
 * of /proc/self/statm; a trim ~30 µs plus re-faulting the hot pages.
 *
 * The budget was set (session 8, docs/BENCHMARKS.md) when the store was
 * written in place through the map, where a trim also unmapped the pages
 * LMDB writes: 48 MiB let the 1M-key load peak at 117-121 MiB (24 MiB:
 * 89-143; 64 MiB: 132-134; the goal is 150, etcd 3.4.23 takes ~600).
 * Since session 18 LMDB writes with pwrite (server__store_open): a trim
 * costs only the read faults that map the hot pages again.  That is dear
 * under random keys over a store larger than the budget (every put reads
 * a random leaf; a fault maps 16 neighbours, so the budget fills within
 * a fraction of a second): at 100 clients, 30 s, the member spent ~126
 * us of CPU per put against ~53 with no trims (docs/BENCHMARKS.md session
 * 20); a budget that grew under such loads also let the 1M-key load's
 * peak reach 466 MiB, so it was not kept.  Session 21 (the key index apart
 * from the revision log, its hot set much smaller): 95 us per put against
 * 61 without trims; a 128 MiB budget gave 66 us but a 1M-key peak of 200
 * MiB.  A trim that spared the index's pages could have both (not built). */
#define HOUSE_MAP_BUDGET (48u << 20)
#define HOUSE_TICK_MS 5
#define HOUSE_IDLE_MS 100
#define HOUSE_IDLE_GROWTH (1u << 20)
#define HOUSE_IDLE_LOOKS 100
/* Publishing this member and failing timed-out requests: twice a second,
 * every 50 ms until the member has published itself (clients wait). */
#define HOUSE_SLOW_MS 500
#define HOUSE_START_MS 50

/* house_wait sleeps ms (house_mu held) or until stop. */
static void house_wait(struct server *s, uint64_t ms)
{
    struct timespec ts = thread_deadline_ms(CLOCK_REALTIME, ms);
    pthread_cond_timedwait(&s->house_cv, &s->house_mu, &ts);
}

/* house_unmap drops the store map's pages from the RSS.  The member
 * writes its store with pwrite (no write map): the write txn's pages are
 * LMDB's own buffers, not the map, so the trim runs beside the writer,
 * inside the store gate (which keeps the store from being swapped).
 * Until session 20 it took apply_mu, as a write map needs (below), and
 * waited for it behind back-to-back apply batches: 9 ms at the median,
 * 124 ms at p99 and up to 227 ms during the 1M-key load, while the map
 * grew (peak RSS 231-281 MiB, goal 150; docs/BENCHMARKS.md session 20).
 * With a write map, a trim in the middle of a write txn would unmap the
 * pages it has dirtied, and LMDB's commit touches every dirty page again
 * (mdb_page_flush), a write fault each: that mode trims between batches,
 * under apply_mu (house_mu -> apply_mu is in lock order). */
static void house_unmap(struct server *s)
{
    server__store_enter(s);
    bool in_place = s->be != NULL && backend_write_map(s->be);
    if (s->be != NULL && !in_place)
        backend_rss_trim(s->be);
    server__store_leave(s);
    if (in_place) {
        pthread_mutex_lock(&s->apply_mu);
        if (s->be != NULL)
            backend_rss_trim(s->be);
        pthread_mutex_unlock(&s->apply_mu);
    }
}

/* house_trim trims the store map when its pages passed the budget;
 * returns the file-backed RSS growth since the last look. */
static size_t house_trim(struct server *s, size_t *base, size_t *last)
{
    size_t now = mem_rss_shared();
    size_t grew = now > *last ? now - *last : 0;
    *last = now;
    if (now == 0 || now > *base + HOUSE_MAP_BUDGET) {
        house_unmap(s);
        *base = *last = mem_rss_shared();
    } else if (now < *base) {
        *base = now; /* something else unmapped */
    }
    return grew;
}

/* The housekeeping thread: map trims, member publishing, timeouts. */
void *server__house_main(void *arg)
{
    struct server *s = arg;
    uint64_t slow_next = 0;
    size_t base = 0, last = 0;
    int calm = 0; /* looks in a row that saw little growth */
    pthread_mutex_lock(&s->house_mu);
    while (!atomic_load(&s->stopping)) {
        bool published = server_published(s);
        uint64_t ms = calm < HOUSE_IDLE_LOOKS ? HOUSE_TICK_MS : HOUSE_IDLE_MS;
        if (!published && ms > HOUSE_START_MS)
            ms = HOUSE_START_MS;
        house_wait(s, ms);
        if (atomic_load(&s->stopping))
            break;
        if (house_trim(s, &base, &last) >= HOUSE_IDLE_GROWTH)
            calm = 0;
        else if (calm < HOUSE_IDLE_LOOKS)
            calm++;
        uint64_t now = server__clock_ms(s);
        server__compactor_house(s, now); /* --auto-compaction-* */
        server__lease_forward_house(s, now); /* waiting renewals */
        if (!published || now >= slow_next) {
            server__members_house(s);
            server__leases_tick(s, now); /* lease.h: the lessor */
            server__timeouts_expire(s, now);
            slow_next = now + HOUSE_SLOW_MS;
        }
    }
    pthread_mutex_unlock(&s->house_mu);
    return NULL;
}
