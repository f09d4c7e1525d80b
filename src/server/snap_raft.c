/*
 * snap_raft.c - the snapshot chores of the raft-pass holder (raft_mu
 * held, see server.h): asking the worker for pins and exports and taking
 * their results (raft snapshot, WAL marker, log compaction, WAL release),
 * sending exports to followers, stepping staged received snapshots into
 * raft and installing the one raft accepted; and the peer transport's
 * hand-over of a received file.  The design is in snapshot.c's header.
 */
#include "util/check.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/thread.h"
#include "backend/backend.h"
#include "mvcc/mvcc.h"
#include "peer/peer.h"
#include "raft/raft.h"
#include "server/boot_guard.h"
#include "server/server_int.h"
#include "server/snap_int.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/mem.h"
#include "wal/wal.h"

/* After a failed pin (a full disk), the next one asked for the store's
 * growth waits this long: the failure is not retried in a loop. */
#define PIN_RETRY_MS 1000u

/* Asks the worker for an export (a copy to send) at >= target. */
static void ask_copy(struct server *s, uint64_t target)
{
    struct server_snap *sn = &s->snap;
    pthread_mutex_lock(&sn->mu);
    if (!sn->copy_busy) {
        sn->copy_busy = true;
        sn->copy_want = target > 0 ? target : 1;
        pthread_cond_signal(&sn->cv);
    }
    pthread_mutex_unlock(&sn->mu);
}

/* Asks the worker for a pin at >= target (for raft: to become raft's
 * next snapshot; else only to bound the store's growth).  False: one is
 * under way. */
static bool ask_pin(struct server *s, uint64_t target, bool for_raft)
{
    struct server_snap *sn = &s->snap;
    pthread_mutex_lock(&sn->mu);
    bool asked = !sn->pin_busy;
    if (asked) {
        sn->pin_busy = true;
        sn->pin_want = target > 0 ? target : 1;
        sn->pin_raft = for_raft;
        pthread_cond_signal(&sn->cv);
    }
    pthread_mutex_unlock(&sn->mu);
    return asked;
}

/* Truncates raft's log and the WAL behind snapshot index `index`. */
static void release_behind(struct server *s, uint64_t index)
{
    if (index <= SNAP_LOG_KEEP)
        return;
    raft_log_compact(s->node.raft, index - SNAP_LOG_KEEP);
    int rc = wal_release_before(s->wal, index - SNAP_LOG_KEEP);
    if (rc != 0)
        log_warn("etcdserver", "cannot release WAL segments: %s",
                 err_str(rc));
}

/* The WAL in proportion to the store (its pages in use at the last pin,
 * etcd's dbSizeInUse): segments of a WAL_SEG_DIV-th of it (2 MiB to
 * etcd's 64 MB), and the released segments kept (up to --max-wals) within
 * a WAL_KEEP_DIV-th of it.  So the WAL is about two segments (the one in
 * use and the next, pre-created) plus the one holding the SNAP_LOG_KEEP
 * entries behind the pin plus the kept ones: about a sixth of the store,
 * at least 6 MiB (docs/BENCHMARKS.md "The data dir's size"). */
#define WAL_SEG_DIV 32u
#define WAL_KEEP_DIV 16u

static void wal_budget(struct server *s)
{
    struct server_snap *sn = &s->snap;
    pthread_mutex_lock(&sn->mu);
    uint64_t in_use = sn->pin_in_use;
    pthread_mutex_unlock(&sn->mu);
    if (in_use == 0 || in_use == sn->wal_sized_at)
        return;
    sn->wal_sized_at = in_use;
    const uint64_t mib = (uint64_t)1 << 20;
    uint64_t seg = (in_use / WAL_SEG_DIV + mib - 1) / mib * mib;
    if (seg < WAL_SEGMENT_BYTES_STORE_MIN)
        seg = WAL_SEGMENT_BYTES_STORE_MIN;
    if (seg > WAL_SEGMENT_BYTES_STORE_MAX)
        seg = WAL_SEGMENT_BYTES_STORE_MAX;
    uint64_t keep = in_use / WAL_KEEP_DIV;
    wal_set_sizes(s->wal, s->wal_seg_fixed ? 0 : seg, keep > 0 ? keep : 1);
}

/* A durable pin at index: the WAL below index - SNAP_LOG_KEEP is no
 * longer needed here (a restart replays from the store's applied index,
 * >= index; a rebuild after a power loss from the pin), so it is released
 * at every pin, not only at raft's snapshots (raft's own log, which
 * followers catch up from, is compacted only at those). */
static void release_wal_behind(struct server *s, uint64_t index)
{
    wal_budget(s);
    if (index <= SNAP_LOG_KEEP)
        return;
    int rc = wal_release_before(s->wal, index - SNAP_LOG_KEEP);
    if (rc != 0)
        log_warn("etcdserver", "cannot release WAL segments: %s",
                 err_str(rc));
}

static void save_marker(struct server *s, uint64_t index, uint64_t term)
{
    struct wal_snapshot ws = {index, term};
    int rc = wal_save_snapshot(s->wal, &ws);
    if (rc != 0) {
        log_error("etcdserver", "cannot write a WAL snapshot marker: %s; "
                  "stopping", err_str(rc));
        abort();
    }
}

/* Raft thread: raft's newest snapshot is (index, term, conf). */
static void set_newest(struct server *s, uint64_t index, uint64_t term,
                       const struct raft_conf_state *conf)
{
    struct server_snap *sn = &s->snap;
    CHECK(conf != NULL && index > 0);
    pthread_mutex_lock(&sn->mu);
    sn->newest_index = index;
    sn->newest_term = term;
    sn->newest_conf = *conf;
    pthread_mutex_unlock(&sn->mu);
}

int server__snap_newest(struct server *s, struct raft_snapshot_meta *out)
{
    struct server_snap *sn = &s->snap;
    pthread_mutex_lock(&sn->mu);
    *out = (struct raft_snapshot_meta){sn->newest_index, sn->newest_term,
                                       sn->newest_conf};
    pthread_mutex_unlock(&sn->mu);
    return out->index > 0 ? 0 : ERR_NOTFOUND;
}

/* A durable pin at index exists: it becomes raft's snapshot and the WAL's
 * marker, and the logs behind it are dropped.  Its metadata is the state
 * as of index: conf is the pinned store's members, not raft's membership
 * now (conf changes after index may already have taken effect in raft;
 * the log after index re-delivers them). */
static void copy_done(struct server *s, uint64_t index,
                      const struct raft_conf_state *conf)
{
    server__snap_prune(s);
    if (index < s->snap.newest_index || index == 0 || conf->n_voters == 0)
        return; /* before an installed snapshot, or nothing applied yet */
    raft_term term;
    int rc = raft_term_at(s->node.raft, index, &term);
    if (rc != 0) {
        log_warn("etcdserver", "snapshot at index %" PRIu64 " dropped: its "
                 "term is unknown (%s)", index, err_str(rc));
        return;
    }
    if (index > s->node.snap_index) {
        rc = raft_snapshot_create(s->node.raft, index, conf, NULL, 0);
        if (rc == 0)
            s->node.snap_index = index;
        else
            log_warn("etcdserver", "raft refused the snapshot at index %"
                     PRIu64 ": %s", index, err_str(rc));
    }
    set_newest(s, index, term, conf);
    save_marker(s, index, term);
    release_behind(s, s->node.snap_index);
    char cs[1024];
    server__conf_fmt(conf, cs, sizeof cs);
    log_info("etcdserver", "saved snapshot of the store at index %" PRIu64
             " (term %" PRIu64 ", %s; pinned, not copied)", index, term, cs);
}

/* An export at index was made: it replaces the previous one. */
static void export_done(struct server *s, uint64_t index,
                        const struct raft_conf_state *conf)
{
    struct server_snap *sn = &s->snap;
    raft_term term;
    int rc = raft_term_at(s->node.raft, index, &term);
    if (rc != 0 || index <= sn->export_index) {
        char p[SNAP_PATH_MAX];
        server__snap_export_file(s, index, p, sizeof p);
        if (index != sn->export_index)
            unlink(p);
        if (rc != 0)
            log_warn("etcdserver", "copy at index %" PRIu64 " dropped: its "
                     "term is unknown (%s)", index, err_str(rc));
        return;
    }
    server__snap_export_drop(s);
    sn->export_index = index;
    sn->export_term = term;
    sn->export_conf = *conf;
    sn->export_ms = server__clock_ms(s);
}

/* Sends the export to w->to (its index >= w->index). */
static void send_one(struct server *s, struct server_snap_want *w)
{
    char path[SNAP_PATH_MAX];
    server__snap_export_file(s, s->snap.export_index, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    int rc = fd < 0 ? err_from_errno(errno) : 0;
    if (rc == 0 && fstat(fd, &st) != 0)
        rc = err_from_errno(errno);
    if (rc == 0) {
        /* The metadata of the copy sent, as of its index. */
        struct raft_snapshot snap = {
            .meta = {s->snap.export_index, s->snap.export_term,
                     s->snap.export_conf}};
        struct raft_msg m = {.type = RAFT_MSG_SNAP, .from = s->member_id,
                             .to = w->to, .term = w->term, .snapshot = &snap};
        rc = peer_send_snapshot(s->transport, w->to, &m, fd,
                                (uint64_t)st.st_size);
    }
    if (rc == 0) {
        log_info("etcdserver", "sending snapshot at index %" PRIu64 " (%lld "
                 "bytes) to %016" PRIx64, s->snap.export_index,
                 (long long)st.st_size, w->to);
        w->sent_index = s->snap.export_index;
        w->sent_ms = server__clock_ms(s);
        s->snap.export_ms = w->sent_ms;
    }
    if (rc != 0 && fd >= 0)
        close(fd);
    if (rc != 0 && rc != ERR_BUSY) {
        log_warn("etcdserver", "cannot send a snapshot to %016" PRIx64 ": %s",
                 w->to, err_str(rc));
        raft_report_snapshot(s->node.raft, w->to, false);
    }
    w->pending = false;
}

void server__snap_want_send(struct server *s, const struct raft_msg *m)
{
    struct server_snap_want *free_slot = NULL;
    uint64_t index = m->snapshot != NULL ? m->snapshot->meta.index : 0;
    for (size_t i = 0; i < SERVER_MEMBERS_MAX; i++) {
        struct server_snap_want *w = &s->snap.want[i];
        if (w->to == m->to || (w->to == 0 && free_slot == NULL))
            free_slot = w;
        if (w->to == m->to)
            break;
    }
    if (free_slot == NULL || s->transport == NULL) {
        /* Inside a Ready raft takes no report: queue it. */
        pthread_mutex_lock(&s->node.ev_mu);
        if (s->node.n_reports < SERVER_MEMBERS_MAX * 3)
            s->node.reports[s->node.n_reports++] = (struct server_report){
                m->to, SERVER_REPORT_SNAP_FAIL};
        pthread_mutex_unlock(&s->node.ev_mu);
        return;
    }
    free_slot->to = m->to;
    free_slot->pending = true;
    free_slot->index = index;
    free_slot->term = m->term;
}

/* The follower took our copy a moment ago and is still installing it:
 * raft, seeing its log still behind, asks again.  Wait a little rather
 * than send the same file again; drop the request once raft no longer
 * waits for a snapshot (the follower acknowledged the installed one). */
static bool resent_too_soon(struct server *s, struct server_snap_want *w)
{
    if (w->sent_index != s->snap.export_index ||
        server__clock_ms(s) >= w->sent_ms + SNAP_RESEND_MS)
        return false;
    struct raft_status st;
    raft_status(s->node.raft, &st);
    for (uint32_t i = 0; i < st.n_progress; i++)
        if (st.progress[i].id == w->to &&
            st.progress[i].state != RAFT_PROGRESS_SNAPSHOT)
            w->pending = false;
    return true;
}

/* Removes what a stepped snapshot left if raft did not install it. */
static void cleanup_stepped(struct server *s)
{
    uint64_t index = s->snap.stepped_index;
    s->snap.stepped_index = 0;
    if (index == 0 || index == s->snap.installed_index)
        return;
    char dir[SNAP_PATH_MAX], st[SNAP_PATH_MAX + 32], f[SNAP_PATH_MAX];
    server__snap_dir(s, dir, sizeof dir);
    server__pathf(st, sizeof st, "%s/.recv-%016" PRIx64 ".d", dir, index);
    server__snap_rm_staging(st);
    server__snap_file(s, index, f, sizeof f);
    unlink(f);
}

/* The ConfState raft installs with a received snapshot is the one its
 * store holds (as of its index): a leader that described it otherwise
 * (cetcd before this check sent its membership at send time) would leave
 * raft's membership inconsistent with the store and with the conf changes
 * the log re-delivers after the index. */
static void conf_from_store(struct server_snap_recv *r, struct raft_msg *m,
                            struct raft_snapshot *fixed)
{
    if (!r->has_conf || m->snapshot == NULL ||
        server__conf_same(&r->conf, &m->snapshot->meta.conf))
        return;
    char got[1024], want[1024];
    server__conf_fmt(&m->snapshot->meta.conf, got, sizeof got);
    server__conf_fmt(&r->conf, want, sizeof want);
    log_warn("etcdserver", "the snapshot at index %" PRIu64 " from %016"
             PRIx64 " says %s, its store holds %s: installing the store's",
             r->index, m->from, got, want);
    *fixed = *m->snapshot;
    fixed->meta.conf = r->conf;
    m->snapshot = fixed;
}

/* Steps one staged snapshot into raft; the Ready installs it. */
static void step_staged(struct server *s, struct server_snap_recv *r)
{
    struct raft_msg m;
    struct raft_snapshot fixed;
    int rc = raft_msg_decode(r->msg, r->len, &m);
    if (rc == 0) {
        conf_from_store(r, &m, &fixed);
        s->snap.stepped_index = r->index;
        rc = raft_step(s->node.raft, &m);
        raft_msg_release(&m);
    }
    if (rc != 0)
        log_warn("etcdserver", "snapshot at index %" PRIu64 " not taken: %s",
                 r->index, err_str(rc));
    mem_free(r);
}

int server__snap_pin_now(struct server *s)
{
    uint64_t target = atomic_load(&s->applied_index);
    uint64_t deadline = server__clock_ms(s) + SNAP_APPLY_WAIT_MS;
    struct raft_snapshot_meta m;
    for (;;) {
        if (server__snap_newest(s, &m) == 0 && m.index >= target)
            return 0;
        if (server__clock_ms(s) >= deadline)
            return ERR_TIMEOUT;
        ask_pin(s, target, true); /* a no-op while one is under way */
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* A finished job's result, taken under mu: busy, want (0 once taken by
 * the worker), done (its index, 0 on failure) and failed. */
static bool take(bool *busy, uint64_t want, uint64_t *done, bool *failed,
                 uint64_t *index_out)
{
    bool finished = *busy && want == 0 && (*done != 0 || *failed);
    *index_out = finished ? *done : 0;
    if (finished) {
        *busy = false;
        *done = 0;
        *failed = false;
    }
    return finished;
}

/* Raft thread: takes what the worker finished (pins, exports, staged). */
static void take_results(struct server *s)
{
    struct server_snap *sn = &s->snap;
    uint64_t pin = 0, exp = 0;
    pthread_mutex_lock(&sn->mu);
    struct raft_conf_state pin_conf = sn->pin_conf, exp_conf = sn->copy_conf;
    bool for_raft = sn->pin_raft;
    if (sn->pin_busy && sn->pin_want == 0 && sn->pin_failed)
        sn->pin_retry_ms = server__clock_ms(s) + PIN_RETRY_MS;
    take(&sn->pin_busy, sn->pin_want, &sn->pin_done, &sn->pin_failed, &pin);
    take(&sn->copy_busy, sn->copy_want, &sn->copy_done, &sn->copy_failed,
         &exp);
    struct server_snap_recv *r = sn->staged_head;
    if (r != NULL) {
        sn->staged_head = r->next;
        sn->n_recv--;
    }
    pthread_mutex_unlock(&sn->mu);
    if (pin != 0 && for_raft)
        copy_done(s, pin, &pin_conf);
    else if (pin != 0)
        server__snap_prune(s); /* a pin that bounds the store's growth only */
    if (pin != 0)
        release_wal_behind(s, pin);
    if (exp != 0)
        export_done(s, exp, &exp_conf);
    if (r != NULL)
        step_staged(s, r);
}

void server__snap_tick(struct server *s)
{
    struct server_snap *sn = &s->snap;
    cleanup_stepped(s);
    take_results(s);
    wal_budget(s); /* the start-up pin's (a no-op when unchanged) */
    uint64_t every = s->cfg.snapshot_count ? s->cfg.snapshot_count : 100000;
    bool due = s->node.applied_raft >= sn->copy_asked_at + every;
    bool grown = server__clock_ms(s) >= sn->pin_retry_ms &&
                 server__pin_grown(s);
    if ((due || grown) &&
        ask_pin(s, s->node.applied_raft, due) && due)
        sn->copy_asked_at = s->node.applied_raft;
    bool pending = false;
    for (size_t i = 0; i < SERVER_MEMBERS_MAX; i++) {
        struct server_snap_want *w = &sn->want[i];
        if (w->to == 0 || !w->pending)
            continue;
        pending = true;
        if (resent_too_soon(s, w))
            continue;
        if (sn->export_index > 0 && sn->export_index >= w->index)
            send_one(s, w);
        else
            ask_copy(s, w->index > s->node.applied_raft ? s->node.applied_raft
                                                   : w->index);
    }
    if (!pending && sn->export_index != 0 &&
        server__clock_ms(s) >= sn->export_ms + SNAP_EXPORT_KEEP_MS)
        server__snap_export_drop(s);
}

int server__snap_install(struct server *s, const struct raft_snapshot *snap)
{
    uint64_t index = snap->meta.index, term = snap->meta.term;
    char dir[SNAP_PATH_MAX], st[SNAP_PATH_MAX + 32], data[SNAP_PATH_MAX + 48];
    server__snap_dir(s, dir, sizeof dir);
    server__pathf(st, sizeof st, "%s/.recv-%016" PRIx64 ".d", dir, index);
    server__pathf(data, sizeof data, "%s/data.mdb", st);
    if (access(data, R_OK) != 0) {
        log_error("etcdserver", "raft installed a snapshot at index %" PRIu64
                  " but no store for it is staged", index);
        return ERR_CORRUPT;
    }
    save_marker(s, index, term);
    pthread_mutex_lock(&s->apply_mu);
    server__apply_drain_locked(s);
    server__store_gate_close(s);
    int rc = server__store_replace(s, data, true);
    server__store_gate_open(s);
    pthread_mutex_unlock(&s->apply_mu);
    server__snap_rm_staging(st);
    if (rc == 0 && mvcc_consistent_index(s->mvcc) != index)
        rc = ERR_CORRUPT;
    if (rc != 0)
        return rc;
    s->node.applied_raft = index;
    s->node.snap_index = index;
    s->snap.copy_asked_at = index;
    s->snap.installed_index = index;
    set_newest(s, index, term, &snap->meta.conf);
    atomic_store(&s->committed_index, index);
    atomic_store(&s->applied_index, index);
    pthread_mutex_lock(&s->applied_mu);
    pthread_cond_broadcast(&s->applied_cv);
    pthread_mutex_unlock(&s->applied_mu);
    int wrc = wal_release_before(s->wal, index > SNAP_LOG_KEEP
                                             ? index - SNAP_LOG_KEEP : 0);
    if (wrc != 0)
        log_warn("etcdserver", "cannot release WAL segments: %s",
                 err_str(wrc));
    server__snap_prune(s);
    char cs[1024];
    server__conf_fmt(&snap->meta.conf, cs, sizeof cs);
    log_info("etcdserver", "installed snapshot of the store at index %" PRIu64
             " (term %" PRIu64 ", %s) from the leader", index, term, cs);
    return 0;
}

int server__snap_received(struct server *s, const struct raft_msg *m,
                          const char *path)
{
    if (m->snapshot == NULL || m->snapshot->meta.index == 0 ||
        strlen(path) >= SNAP_PATH_MAX)
        return ERR_INVAL;
    size_t len = raft_msg_encoded_size(m);
    struct server_snap_recv *r = mem_malloc(sizeof *r + len);
    if (r == NULL)
        return ERR_NOMEM;
    int rc = raft_msg_encode(m, r->msg, len, &r->len);
    if (rc != 0) {
        mem_free(r);
        return rc;
    }
    r->next = NULL;
    r->index = m->snapshot->meta.index;
    server__pathf(r->path, sizeof r->path, "%s", path);
    struct server_snap *sn = &s->snap;
    pthread_mutex_lock(&sn->mu);
    /* The leader resends while we stage (raft probes, finds the log
     * still behind, sends again).  The transport stored the same index
     * under the same name: the queued one reads it; do not refuse (the
     * transport would delete that very file). */
    bool dup = sn->staging_index == r->index;
    for (int list = 0; list < 2; list++)
        for (struct server_snap_recv *q = list ? sn->staged_head
                                               : sn->recv_head;
             q != NULL; q = q->next)
            dup = dup || q->index == r->index;
    if (dup) {
        pthread_mutex_unlock(&sn->mu);
        mem_free(r);
        return 0;
    }
    if (sn->n_recv >= SERVER_SNAP_RECV_MAX || !sn->started) {
        pthread_mutex_unlock(&sn->mu);
        mem_free(r);
        return ERR_BUSY;
    }
    struct server_snap_recv **p = &sn->recv_head;
    while (*p != NULL)
        p = &(*p)->next;
    *p = r;
    sn->n_recv++;
    pthread_cond_signal(&sn->cv);
    pthread_mutex_unlock(&sn->mu);
    log_info("etcdserver", "received snapshot at index %" PRIu64 " (term %"
             PRIu64 ") from %016" PRIx64, r->index, m->snapshot->meta.term,
             m->from);
    return 0;
}
