/*
 * compactor.c - --auto-compaction-mode and --auto-compaction-retention,
 * with etcd 3.4's semantics and log lines (its v3compactor), on the
 * house thread (server__compactor_house, every pass).  Only the leader
 * compacts (etcd pauses the compactor on followers); the compaction is a
 * CompactionRequest proposed through raft like `etcdctl compact`'s, and
 * "revision has been compacted" counts as done.
 *
 * periodic (retention P, ms): every retry interval R = min(P, 1h) / 10 the
 * store's revision is sampled, the last P / R + 1 samples kept, so the
 * oldest is the revision of P ago.  The first compaction comes P after
 * start, then one every min(P, 1h) after the last success, at the oldest
 * sample; a failure is tried again R later.
 * revision (retention N): every 5 minutes (auto_compact_rev_interval_ms in
 * tests) the leader compacts at current - N, unless that is <= 0 or the
 * revision it compacted last time; a failure is tried 5 minutes later.
 * While a compaction is in flight the clock waits (etcd's loop blocks in
 * Compact); the next interval starts when it is answered.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "mvcc/mvcc.h"
#include "server/server_int.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/str.h"

#define HOUR_MS 3600000u
#define RETRY_DIVISOR 10
#define REV_INTERVAL_MS (5u * 60u * 1000u)
#define PENDING 1 /* compactor.result while the proposal is unanswered */

static uint64_t compact_interval(uint64_t period)
{
    return period > HOUR_MS ? HOUR_MS : period;
}

static uint64_t retry_interval(uint64_t period)
{
    uint64_t r = compact_interval(period) / RETRY_DIVISOR;
    return r > 0 ? r : 1;
}

static size_t retentions(uint64_t period)
{
    return (size_t)(period / retry_interval(period)) + 1;
}

static uint64_t rev_interval(const struct server *s)
{
    return s->cfg.auto_compact_rev_interval_ms
               ? s->cfg.auto_compact_rev_interval_ms
               : REV_INTERVAL_MS;
}

static char *dur(char *buf, size_t cap, uint64_t ms)
{
    return str_go_duration(buf, cap, (unsigned long long)ms * 1000000ull);
}

static int64_t current_rev(struct server *s)
{
    server__store_enter(s);
    int64_t rev = mvcc_current_rev(s->mvcc);
    server__store_leave(s);
    return rev;
}

/* The periodic mode's sample of the store's revision. */
static void sample(struct server *s)
{
    struct server_compactor *c = &s->compactor;
    size_t keep = retentions(s->cfg.auto_compact_retention);
    if (c->revs == NULL) {
        c->revs = mem_calloc(keep, sizeof *c->revs);
        if (c->revs == NULL)
            return; /* tried again at the next sample */
    }
    if (c->n_revs == keep) {
        memmove(c->revs, c->revs + 1, (keep - 1) * sizeof *c->revs);
        c->n_revs--;
    }
    c->revs[c->n_revs++] = current_rev(s);
}

static void answered(void *arg, const struct server_response *r)
{
    struct server *s = arg;
    atomic_store(&s->compactor.result, r->err);
}

/* etcd's zap lines (v3compactor/periodic.go, revision.go). */
static void log_zap_compaction(struct server *s, const char *what,
                               int64_t rev, int err, uint64_t retry_ms)
{
    bool periodic = s->cfg.auto_compact_mode == SERVER_COMPACT_PERIODIC;
    char msg[64];
    snprintf(msg, sizeof msg, "%s auto %s compaction", what,
             periodic ? "periodic" : "revision");
    struct log_field f[] = {
        LOG_INT("revision", rev),
        periodic ? LOG_DUR_MS("compact-period", s->cfg.auto_compact_retention)
                 : LOG_INT("revision-compaction-retention",
                           s->cfg.auto_compact_retention),
        LOG_DUR_MS("took", server__clock_ms(s) - (periodic
                                                  ? s->compactor.last_ok_ms
                                                  : s->compactor.started_ms)),
        LOG_DUR_MS("retry-interval", retry_ms),
        LOG_STR("error", err_str(err))};
    size_t n = what[0] == 's' ? 2 : what[0] == 'c' ? 3 : 5;
    if (what[0] == 'f') /* failed: no "took" */
        f[2] = f[3], f[3] = f[4], n = 4;
    log_zap_at(what[0] == 'f' ? LOG_WARN : LOG_INFO, __FILE__, __LINE__, msg,
               f, n);
}

static void propose(struct server *s, int64_t rev)
{
    char buf[40];
    s->compactor.started_ms = server__clock_ms(s);
    if (log_is_zap())
        log_zap_compaction(s, "starting", rev, 0, 0);
    else if (s->cfg.auto_compact_mode == SERVER_COMPACT_PERIODIC)
        log_notice("compactor", "Starting auto-compaction at revision %" PRId64
                   " (retention: %s)", rev,
                   dur(buf, sizeof buf, s->cfg.auto_compact_retention));
    else
        log_notice("compactor", "Starting auto-compaction at revision %" PRId64
                   " (retention: %" PRIu64 " revisions)", rev,
                   s->cfg.auto_compact_retention);
    Etcdserverpb__CompactionRequest c = ETCDSERVERPB__COMPACTION_REQUEST__INIT;
    c.revision = rev;
    Cetcdpb__InternalRequest req = CETCDPB__INTERNAL_REQUEST__INIT;
    req.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_COMPACTION;
    req.compaction = &c;
    s->compactor.target = rev;
    atomic_store(&s->compactor.result, PENDING);
    server_propose(s, &req, answered, s); /* answers a refusal at once */
}

/* The proposal was answered: true if the compaction is done. */
static bool take_result(struct server *s, uint64_t retry_ms)
{
    struct server_compactor *c = &s->compactor;
    int err = atomic_load(&c->result);
    int64_t rev = c->target;
    c->target = 0;
    if (log_is_zap()) {
        log_zap_compaction(s, err == 0 || err == ERR_COMPACTED ? "completed"
                                                               : "failed",
                           rev, err, retry_ms);
        return err == 0 || err == ERR_COMPACTED;
    }
    if (err == 0 || err == ERR_COMPACTED) {
        log_notice("compactor", "Finished auto-compaction at revision %" PRId64,
                   rev);
        return true;
    }
    char buf[40];
    log_notice("compactor", "Failed auto-compaction at revision %" PRId64
               " (%s)", rev, err_str(err));
    log_notice("compactor", "Retry after %s", dur(buf, sizeof buf, retry_ms));
    return false;
}

static bool leading(const struct server *s)
{
    return atomic_load(&s->lead) == s->member_id;
}

static void periodic(struct server *s, uint64_t now)
{
    struct server_compactor *c = &s->compactor;
    uint64_t period = s->cfg.auto_compact_retention;
    uint64_t retry = retry_interval(period);
    if (c->next_ms == 0) { /* start */
        sample(s);
        c->last_ok_ms = now;
        c->base_ms = period;
        c->next_ms = now + retry;
        return;
    }
    if (c->target != 0) {
        if (atomic_load(&c->result) == PENDING)
            return;
        if (take_result(s, retry))
            c->last_ok_ms = now;
        sample(s);
        c->next_ms = now + retry;
        return;
    }
    if (now < c->next_ms)
        return;
    if (leading(s) && now - c->last_ok_ms >= c->base_ms && c->n_revs > 0) {
        if (c->base_ms == period) /* the first wait was the whole period */
            c->base_ms = compact_interval(period);
        propose(s, c->revs[0]);
        return; /* sampled again once answered */
    }
    sample(s);
    c->next_ms = now + retry;
}

static void by_revision(struct server *s, uint64_t now)
{
    struct server_compactor *c = &s->compactor;
    uint64_t every = rev_interval(s);
    if (c->next_ms == 0) {
        c->next_ms = now + every;
        return;
    }
    if (c->target != 0) {
        if (atomic_load(&c->result) == PENDING)
            return;
        int64_t rev = c->target;
        if (take_result(s, every))
            c->prev = rev;
        c->next_ms = now + every;
        return;
    }
    if (now < c->next_ms)
        return;
    c->next_ms = now + every;
    if (!leading(s))
        return;
    int64_t rev = current_rev(s) - (int64_t)s->cfg.auto_compact_retention;
    if (rev <= 0 || rev == c->prev)
        return;
    propose(s, rev);
}

void server__compactor_house(struct server *s, uint64_t now_ms)
{
    if (s->cfg.auto_compact_retention == 0)
        return;
    if (s->cfg.auto_compact_mode == SERVER_COMPACT_PERIODIC)
        periodic(s, now_ms);
    else if (s->cfg.auto_compact_mode == SERVER_COMPACT_REVISION)
        by_revision(s, now_ms);
}

void server__compactor_free(struct server *s)
{
    mem_free(s->compactor.revs);
    s->compactor.revs = NULL;
    s->compactor.n_revs = 0;
}
