/*
 * apply.c - the apply thread: takes committed entries from the raft thread,
 * applies each through the apply chain (applier.h) inside ONE mvcc batch (one LMDB write
 * txn, consistent index stored in it), commits, and only then wakes each
 * waiter with its response.  Also continues unfinished compactions between
 * batches, in bounded steps.
 */
#include "util/check.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mvcc/mvcc.h"
#include "server/server_int.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/pbwalk.h"
#include "util/thread.h"

#define COMPACT_STEP_REVS 1000 /* default revisions compacted per batch */
#define COMPACT_IDLE_MS 10u    /* a pending compaction steps when idle */
#define APPLY_LOOK_MS 100u     /* the idle apply thread looks for one */
/* The deepest entry decoded: the API refuses txns nested deeper than
 * api/kv.c KV_TXN_DEPTH_MAX messages; this leaves room for the wrapper. */
#define APPLY_DEPTH_MAX 2100

/* A response waiting for the batch commit. */
struct pending {
    uint64_t id;                 /* waiter */
    int err;                     /* request-level error */
    ProtobufCMessage *msg;       /* response (arena) */
};

static int apply_one(struct server *s, struct mvcc_batch *b,
                     struct arena *arena, const struct server_entry *e,
                     struct pending *p)
{
    if (e->len == 0) {
        /* A leader's empty entry or a conf change: nothing to apply here,
         * only its index counts. */
        p->id = 0;
        p->err = 0;
        p->msg = NULL;
        return 0;
    }
    /* Bounded nesting first: protobuf-c recurses without a limit, and a
     * forged entry (plain-text peers) must not crash the member. */
    Cetcdpb__InternalRequest *req =
        pb_walk_check(&cetcdpb__internal_request__descriptor, e->data,
                      e->len, APPLY_DEPTH_MAX) == 0
            ? cetcdpb__internal_request__unpack(NULL, e->len, e->data)
            : NULL;
    p->id = e->id;
    p->msg = NULL;
    if (req == NULL) {
        /* Only cetcd writes the log; a record that does not decode means
         * the log was damaged after its CRC check, or a bug. */
        log_error("etcdserver", "cannot decode entry %llu; skipped",
                  (unsigned long long)e->index);
        p->err = ERR_CORRUPT;
        return 0;
    }
    p->id = req->id;
    uint64_t t0 = server__now_ns();
    p->err = server__apply_request(s, b, req, arena, &p->msg);
    server__warn_slow_apply(s, req, p->err, p->msg, server__now_ns() - t0);
    cetcdpb__internal_request__free_unpacked(req, NULL);
    switch (p->err) {
    case 0:
    case ERR_KEY_NOT_FOUND:
    case ERR_LEASE_NOT_FOUND:
    case ERR_LEASE_EXIST:
    case ERR_LEASE_TTL_TOO_LARGE:
    case ERR_COMPACTED:
    case ERR_FUTURE_REV:
    case ERR_INVAL:
    case ERR_TOO_LARGE:
    case ERR_UNSUPPORTED:
    case ERR_NO_SPACE: /* applied, answered as etcd does (quota.c) */
    case ERR_CLUSTER_CORRUPT: /* a CORRUPT alarm refused it (applier.h) */
    case ERR_FULL:     /* the alarm list is full (alarm.c) */
    case ERR_TOO_MANY_REQUESTS: /* auth: a bound of the store or tokens */
    case ERR_AUTH_ROOT_USER_NOT_EXIST: /* the auth applier's answers */
    case ERR_AUTH_ROOT_ROLE_NOT_EXIST:
    case ERR_AUTH_USER_EXISTS:
    case ERR_AUTH_USER_EMPTY:
    case ERR_AUTH_USER_NOT_FOUND:
    case ERR_AUTH_ROLE_EXISTS:
    case ERR_AUTH_ROLE_NOT_FOUND:
    case ERR_AUTH_ROLE_EMPTY:
    case ERR_AUTH_FAILED:
    case ERR_AUTH_PERMISSION_DENIED:
    case ERR_AUTH_ROLE_NOT_GRANTED:
    case ERR_AUTH_PERMISSION_NOT_GRANTED:
    case ERR_AUTH_NOT_ENABLED:
    case ERR_AUTH_INVALID_TOKEN:
    case ERR_AUTH_INVALID_MGMT:
    case ERR_AUTH_OLD_REVISION:
    case ERR_AUTH_VERIFY_ONLY: /* a JWT member with a public key only */
    case ERR_AUTH_SIGN:        /* libcrypto could not sign a JWT */
        return 0;
    default:
        return p->err; /* poisons the batch */
    }
}

static Etcdserverpb__ResponseHeader *header_of(ProtobufCMessage *m)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    if (d == &etcdserverpb__put_response__descriptor)
        return ((Etcdserverpb__PutResponse *)m)->header;
    if (d == &etcdserverpb__delete_range_response__descriptor)
        return ((Etcdserverpb__DeleteRangeResponse *)m)->header;
    if (d == &etcdserverpb__txn_response__descriptor)
        return ((Etcdserverpb__TxnResponse *)m)->header;
    if (d == &etcdserverpb__compaction_response__descriptor)
        return ((Etcdserverpb__CompactionResponse *)m)->header;
    if (d == &etcdserverpb__range_response__descriptor)
        return ((Etcdserverpb__RangeResponse *)m)->header;
    if (d == &etcdserverpb__alarm_response__descriptor)
        return ((Etcdserverpb__AlarmResponse *)m)->header;
    if (d == &etcdserverpb__lease_grant_response__descriptor)
        return ((Etcdserverpb__LeaseGrantResponse *)m)->header;
    if (d == &etcdserverpb__lease_revoke_response__descriptor)
        return ((Etcdserverpb__LeaseRevokeResponse *)m)->header;
    if (d == &etcdserverpb__lease_checkpoint_response__descriptor)
        return ((Etcdserverpb__LeaseCheckpointResponse *)m)->header;
    /* the auth responses: each has its header as field 1 */
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field(d, 1);
    if (f != NULL && f->type == PROTOBUF_C_TYPE_MESSAGE &&
        f->descriptor == &etcdserverpb__response_header__descriptor &&
        strncmp(d->short_name, "Auth", 4) == 0)
        return *(Etcdserverpb__ResponseHeader **)((char *)m + f->offset);
    return NULL;
}

static void fill_headers(struct server *s, struct pending *ps, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (ps[i].err != 0 || ps[i].msg == NULL)
            continue;
        Etcdserverpb__ResponseHeader *h = header_of(ps[i].msg);
        CHECK(h != NULL);
        server__header_fill(s, h); /* apply_mu held: no store swap */
    }
}

static void wake(struct server *s, struct pending *ps, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        server_done_fn done;
        void *arg;
        if (ps[i].id == 0 || !server_wait_take(&s->wait, ps[i].id, &done, &arg))
            continue;
        struct server_response r = {.err = ps[i].err, .msg = ps[i].msg};
        done(arg, &r);
    }
}

/* compact_more takes a step of the pending compaction in b.  In a
 * tentative batch only when the compaction was scheduled before b
 * (durable_compact: the compact revision of the durable state b started
 * from): reads are pinned to that state (mvcc_visible_hold), so they all
 * read at or above that revision and never need what the step deletes.
 * Skipping every tentative batch instead stalled compaction for as long as
 * a lone voter's batches kept being tentative (one client writing in
 * sequence makes nearly all of them so). */
static int compact_more(struct server *s, struct mvcc_batch *b,
                        bool tentative, mvcc_rev durable_compact)
{
    if (!mvcc_compact_pending(s->mvcc))
        return 0;
    if (tentative && mvcc_batch_compact_rev(b) != durable_compact)
        return 0; /* scheduled in b itself: the next batch steps it */
    bool more;
    uint32_t step = s->cfg.compaction_batch_limit;
    if (step == 0)
        step = COMPACT_STEP_REVS;
    int rc = server__compact_step(s, b, step, &more);
    if (rc != 0 && rc != ERR_FULL) /* ERR_FULL: no room now, b unharmed */
        log_warn("mvcc", "compaction step failed: %s", err_str(rc));
    return rc;
}

int server__compact_step(struct server *s, struct mvcc_batch *b,
                         size_t max_revs, bool *more)
{
    int rc = mvcc_compact_step(b, max_revs, more);
    if (rc != 0 || *more)
        return rc;
    /* etcd's mvcc/kvstore_compaction.go line, "took" from the schedule
     * (0 when the compaction was scheduled before this process began) */
    int64_t rev = mvcc_batch_compact_rev(b);
    uint64_t began = s->compact_began_ns, now = server__now_ns();
    int64_t took = began != 0 && now > began ? (int64_t)(now - began) : 0;
    s->compact_began_ns = 0;
    if (log_is_zap()) {
        log_zap(LOG_INFO, "finished scheduled compaction",
                LOG_INT("compact-revision", rev),
                LOG_DUR_NS("took", took));
    } else {
        char d[32];
        log_go_duration(took, d, sizeof d);
        log_info("mvcc", "finished scheduled compaction at %" PRId64
                 " (took %s)", rev, d);
    }
    return 0;
}

/* A committed apply batch whose responses wait in ps[0..n) (in an arena). */
struct applied {
    struct pending *ps;
    size_t n;
    uint64_t last;   /* index of its last entry */
};

/* Applies the chain of n entries in one batch (one LMDB txn) with the
 * responses in arena.  A tentative batch pins what reads see first (see
 * mvcc_visible_hold) and steps only a compaction scheduled before it
 * (compact_more).  Returns 0 or a fatal storage error. */
static int apply_batch(struct server *s, struct server_entry *head, size_t n,
                       struct arena *arena, bool tentative,
                       struct applied *out)
{
    struct pending *ps = arena_alloc(arena, n * sizeof *ps);
    struct mvcc_batch *b;
    /* Everything committed is durable here: a tentative batch starts only
     * with none other out, and committed entries were synced. */
    mvcc_rev durable_compact = mvcc_compact_rev(s->mvcc);
    int rc = ps ? mvcc_batch_begin(s->mvcc, &b) : ERR_NOMEM;
    if (rc != 0)
        return rc;
    s->apply_tentative = tentative;
    size_t i = 0;
    uint64_t last = 0;
    for (struct server_entry *e = head; e != NULL && rc == 0; e = e->next) {
        rc = apply_one(s, b, arena, e, &ps[i++]);
        last = e->index;
    }
    s->apply_tentative = false;
    if (rc == 0)
        (void)compact_more(s, b, tentative, durable_compact);
    if (rc != 0) {
        log_error("etcdserver", "applying entry %llu failed: %s",
                  (unsigned long long)last, err_str(rc));
        mvcc_batch_abort(b);
        server__members_batch_end(s, false);
        return rc;
    }
    if (tentative)
        mvcc_visible_hold(s->mvcc);
    s->watch.tentative = tentative; /* its events wait (watchers.c) */
    rc = mvcc_batch_commit(b, last);
    s->watch.tentative = false;
    server__members_batch_end(s, rc == 0); /* member changes take effect */
    if (rc != 0) {
        log_error("etcdserver", "committing entries up to %llu failed: %s",
                  (unsigned long long)last, err_str(rc));
        return rc;
    }
    server__quota_update(s);
    fill_headers(s, ps, i);
    *out = (struct applied){ps, i, last};
    return 0;
}

/* The batch is applied and durable: readers may see it, waiters learn. */
static void publish(struct server *s, const struct applied *a,
                    bool wake_waiters)
{
    atomic_store(&s->applied_index, a->last);
    if (wake_waiters)
        wake(s, a->ps, a->n);
    pthread_mutex_lock(&s->applied_mu);
    pthread_cond_broadcast(&s->applied_cv);
    pthread_mutex_unlock(&s->applied_mu);
    atomic_fetch_add(&s->stat_apply_batches, 1);
}

int server__apply_entries(struct server *s, struct server_entry *head,
                          size_t n, bool wake_waiters)
{
    struct applied a;
    /* The observer's events (in the commit) and the answers: each event
     * loop is woken once, after both (util/thread.h "Held wake-ups"). */
    thread_wakes_hold();
    int rc = apply_batch(s, head, n, &s->apply_arena, false, &a);
    if (rc == 0)
        publish(s, &a, wake_waiters);
    thread_wakes_release();
    return rc;
}

/*
 * Speculative apply (a lone voter only).  When this member is the only
 * voter, each entry it appends is committed as soon as its own WAL fsync
 * returns, and nothing can replace it.  So the raft thread hands the
 * entries to the applier right after writing them (before the fsync), and
 * applying overlaps the fsync instead of following it.  Nothing leaks
 * early: the batch is committed to LMDB with reads pinned to the state
 * before it (mvcc_visible_hold), and its waiters are woken only once the
 * raft thread has seen the entries committed (server__spec_durable).
 * Whichever of the applier and the raft thread finishes last publishes.
 *
 * Crash safety: the WAL write precedes the LMDB commit, so a killed
 * process leaves the WAL at or ahead of the store; at restart the store's
 * index counts as applied (a lone voter commits its whole log anyway).
 * If the machine loses power the boot guard rebuilds the store from the
 * WAL, and a failed fsync distrusts the store first (raft_ready.c).
 */
static void spec_finish(struct server *s)
{
    /* spec.mu not held: only the caller that saw both halves gets here. */
    struct applied a = {s->spec.done.ps, s->spec.done.n, s->spec.done.last};
    mvcc_visible_release(s->mvcc);
    thread_wakes_hold(); /* the events and answers: one wake per loop */
    server__watch_release(s); /* durable: watchers may see it */
    publish(s, &a, true);
    thread_wakes_release();
    arena_reset(&s->spec_arena);
}

/* One half of a tentative batch is done: the applier committed it (a
 * non-NULL) or raft committed it (a NULL).  The second half publishes. */
static void spec_half_done(struct server *s, const struct applied *a)
{
    pthread_mutex_lock(&s->spec.mu);
    CHECK(s->spec.active);
    if (a != NULL) {
        s->spec.done.ps = a->ps;
        s->spec.done.n = a->n;
        s->spec.done.last = a->last;
        s->spec.applied = true;
    } else {
        s->spec.durable = true;
    }
    bool last = s->spec.applied && s->spec.durable;
    if (last)
        s->spec.active = false;
    pthread_mutex_unlock(&s->spec.mu);
    if (last)
        spec_finish(s);
}

bool server__spec_begin(struct server *s, struct server_entry *head,
                        struct server_entry *tail, size_t n)
{
    if (pthread_mutex_trylock(&s->apply_mu) != 0)
        return false;
    bool idle = server_queue_is_empty(&s->committed);
    pthread_mutex_unlock(&s->apply_mu);
    if (!idle)
        return false;
    pthread_mutex_lock(&s->spec.mu);
    CHECK(!s->spec.active);
    s->spec.active = true;
    s->spec.applied = false;
    s->spec.durable = false;
    s->spec.last = tail->index;
    pthread_mutex_unlock(&s->spec.mu);
    for (struct server_entry *e = head; e != NULL; e = e->next)
        e->tentative = true;
    server_queue_push_list(&s->committed, head, tail, n);
    return true;
}

uint64_t server__spec_last(struct server *s)
{
    pthread_mutex_lock(&s->spec.mu);
    uint64_t last = s->spec.active ? s->spec.last : 0;
    pthread_mutex_unlock(&s->spec.mu);
    return last;
}

void server__spec_durable(struct server *s)
{
    spec_half_done(s, NULL);
}

static void free_chain(struct server_entry *e)
{
    while (e != NULL) {
        struct server_entry *n = e->next;
        mem_free(e);
        e = n;
    }
}

/* The store's disk is full: the chain head..(n entries) was not applied.
 * It goes back to the head of the queue, for the apply thread to retry
 * (apply_main), and the member stays up: the WAL holds these entries,
 * they are applied in order once the disk has room. */
static void stall(struct server *s, struct server_entry *head, size_t n)
{
    struct server_entry *tail = head;
    while (tail->next != NULL)
        tail = tail->next;
    if (!s->apply_full) {
        s->apply_full = true;
        log_error("etcdserver", "the store's disk is full: applying entry "
                  "%llu is stopped and retried until space is freed (the "
                  "WAL keeps it; writes are refused with NOSPACE)",
                  (unsigned long long)head->index);
    }
    server_queue_push_front(&s->committed, head, tail, n);
    server__alarms_reload(s); /* the aborted batch may have changed it */
    server__leases_reload(s); /* and the leases */
    server__auth_reload(s);   /* and the auth store */
}

/* Applies the chain (apply_mu held).  Returns false, with the chain back
 * in the queue, when the store's disk is full (see stall); any other
 * failure stops the member. */
static bool apply_or_die(struct server *s, struct server_entry *head,
                         size_t n)
{
    int rc = 0;
    if (head->tentative) {
        /* server__spec_begin queued the tentative entries into an empty
         * queue, so they lead the chain; committed ones may follow. */
        struct server_entry *t = head;
        size_t k = 1;
        while (t->next != NULL && t->next->tentative) {
            t = t->next;
            k++;
        }
        struct server_entry *rest = t->next;
        t->next = NULL;
        struct applied a;
        rc = apply_batch(s, head, k, &s->spec_arena, true, &a);
        if (rc == 0) {
            free_chain(head);
            spec_half_done(s, &a);
            head = rest;
            n -= k;
        } else {
            t->next = rest;
            arena_reset(&s->spec_arena);
        }
    }
    if (rc == 0 && head != NULL)
        rc = server__apply_entries(s, head, n, true);
    arena_reset(&s->apply_arena);
    if (rc == ERR_NOSPC) {
        stall(s, head, n);
        return false;
    }
    if (rc != 0) {
        /* The WAL holds these entries; stopping here and replaying at
         * the next start loses nothing.  Serving on would. */
        log_error("etcdserver", "apply failed: %s; stopping the member",
                  err_str(rc));
        abort();
    }
    if (s->apply_full) {
        s->apply_full = false;
        log_info("etcdserver", "the store's disk has room: applying again");
    }
    free_chain(head);
    return true;
}

/* A store swap (snapshot.c) first applies what is queued, under apply_mu,
 * so that nothing older than the snapshot reaches the new store. */
void server__apply_drain_locked(struct server *s)
{
    size_t n;
    struct server_entry *head = server_queue_try_pop_all(&s->committed, &n);
    if (head != NULL)
        apply_or_die(s, head, n);
}

/*
 * Who applies: normally the apply thread, so that applying batch N overlaps
 * the WAL fsync of batch N+1.  But when nothing is queued and nobody is
 * applying, the raft thread applies the batch itself: a lone client then
 * pays no thread hand-off between its fsync and its answer.  Order holds
 * because applying needs apply_mu and the apply thread only pops the queue
 * while holding it.
 */
void server__apply_handoff(struct server *s, struct server_entry *head,
                           struct server_entry *tail, size_t n)
{
    if (pthread_mutex_trylock(&s->apply_mu) == 0) {
        if (server_queue_is_empty(&s->committed)) {
            apply_or_die(s, head, n);
            pthread_mutex_unlock(&s->apply_mu);
            return;
        }
        pthread_mutex_unlock(&s->apply_mu);
    }
    server_queue_push_list(&s->committed, head, tail, n);
}

/* How often entries that a full disk refused are tried again. */
#define STALL_RETRY_MS 100

/* A compaction left pending (its steps run one per apply batch, after the
 * batch that scheduled it) goes on when no write comes: the apply thread
 * takes a step in a batch of its own once the queue stayed empty for
 * COMPACT_IDLE_MS (etcd pauses 10 ms between its compaction batches), but
 * not while a tentative batch is out (its readers are pinned below it:
 * compact_more).  Without it a lone member that received a compaction and
 * then no write deleted nothing: Status and a defragmentation saw the
 * whole history still there. */
static void compact_idle(struct server *s)
{
    pthread_mutex_lock(&s->apply_mu);
    if (!server_queue_is_empty(&s->committed) || server__spec_last(s) != 0 ||
        !mvcc_compact_pending(s->mvcc)) {
        pthread_mutex_unlock(&s->apply_mu);
        return;
    }
    struct mvcc_batch *b;
    int rc = mvcc_batch_begin(s->mvcc, &b);
    if (rc == 0 && compact_more(s, b, false, 0) == ERR_FULL) {
        /* no room for a step until a pin makes freed pages reusable:
         * nothing to commit (an empty commit takes pages too) */
        mvcc_batch_abort(b);
        pthread_mutex_unlock(&s->apply_mu);
        return;
    }
    if (rc == 0)
        rc = mvcc_batch_commit(b, mvcc_consistent_index(s->mvcc));
    if (rc == 0)
        server__quota_update(s);
    else if (rc != ERR_NOSPC) /* a full disk: said by the apply stall */
        log_warn("mvcc", "compaction step failed: %s (retried)",
                 err_str(rc));
    pthread_mutex_unlock(&s->apply_mu);
}

/* The store's disk was full: has room come back while no write came (a
 * pin released a compaction's deletes, or space was freed)?  The API's
 * check reads the answer (server__quota_update). */
static void space_idle(struct server *s)
{
    pthread_mutex_lock(&s->apply_mu);
    if (server_queue_is_empty(&s->committed) && backend_space_low(s->be)) {
        backend_space_recheck(s->be);
        server__quota_update(s);
    }
    pthread_mutex_unlock(&s->apply_mu);
}

/* Waits for committed entries; false once the queue is closed and empty.
 * Meanwhile it looks for a pending compaction every APPLY_LOOK_MS (a
 * batch applied inline by the log thread may have left one: it does not
 * wake this thread) and steps it every COMPACT_IDLE_MS, and while the
 * store's disk is full it looks for room every APPLY_LOOK_MS. */
static bool wait_work(struct server *s)
{
    for (;;) {
        pthread_mutex_lock(&s->apply_mu);
        bool pending = mvcc_compact_pending(s->mvcc);
        bool low = backend_space_low(s->be);
        pthread_mutex_unlock(&s->apply_mu);
        int w = server_queue_wait_nonempty_ms(
            &s->committed, pending ? COMPACT_IDLE_MS : APPLY_LOOK_MS);
        if (w != 0)
            return w > 0;
        if (pending)
            compact_idle(s);
        else if (low)
            space_idle(s);
    }
}

void *server__apply_main(void *arg)
{
    struct server *s = arg;
    while (wait_work(s)) {
        pthread_mutex_lock(&s->apply_mu);
        size_t n;
        struct server_entry *head = server_queue_pop_all(&s->committed, &n);
        bool ok = head == NULL || apply_or_die(s, head, n);
        pthread_mutex_unlock(&s->apply_mu);
        if (ok)
            continue;
        if (atomic_load(&s->stopping)) {
            /* Stopping with a full disk: the WAL replays these. */
            free_chain(server_queue_try_pop_all(&s->committed, &n));
            break;
        }
        struct timespec ts = {0, STALL_RETRY_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
    return NULL;
}
