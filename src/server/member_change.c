/*
 * member_change.c - membership changes and leader transfer.
 *
 * An API thread asks (server_member_change, server_move_leader); the
 * request is checked against the members store (etcd's membership
 * checks: URLs, duplicates, learner count), a waiter is registered, and a
 * job is queued for the raft thread (whoever holds raft_mu owns struct
 * raft: server.h, "Execution contexts and lock order").  The
 * raft thread runs the checks that need raft state or the transport (the
 * strict reconfig check, a learner's progress before a promotion) and
 * proposes the change as a one-step (v1) conf change whose context is the
 * packed InternalRequest{member_change}.  When the entry commits, the raft
 * thread applies it to raft and hands the context to the applier
 * (members.c), which updates the store and wakes the waiter.  Only the
 * leader knows a learner's progress: a follower hands a promotion to
 * member_forward.c, which asks the leader to check and propose it.
 */
#include "util/check.h"
#include <ctype.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dial/dial.h"
#include "peer/peer.h"
#include "raft/raft.h"
#include "server/members.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"

#define LEARNERS_MAX 1          /* etcd 3.4's maxLearners */
#define READY_PERCENT 90        /* learner match vs leader's, to promote */
/* A promotion's waiter outlives its forwarding deadline by this much, so
 * the forwarding code gives the answer (no leader, timeout) itself. */
#define PROMOTE_WAIT_SLACK_MS 1000

/* A waiting membership change: the API's callback and the member id. */
struct change_waiter {
    server_member_fn fn;
    void *arg;
    uint64_t id;
};

static void change_done(void *arg, const struct server_response *r)
{
    struct change_waiter *w = arg;
    struct server_member_result res = {.err = r->err,
                                       .id = r->err == 0 ? w->id : 0};
    /* A promotion forwarded to the leader: its list of the members. */
    if (r->err == 0 && r->msg != NULL &&
        r->msg->descriptor == &cetcdpb__promote_response__descriptor) {
        const Cetcdpb__PromoteResponse *pr =
            (const Cetcdpb__PromoteResponse *)r->msg;
        res.members = pr->members;
        res.n_members = pr->n_members;
    }
    w->fn(w->arg, &res);
    mem_free(w);
}

/* etcd's types.NewURLs: scheme http, https, unix or unixs; host:port;
 * no path.  And a URL the peer transport dials (dial_url_parse, at most
 * PEER_URL_LEN_MAX bytes): peer_add refuses others, and the member would
 * be added but never reached. */
static bool url_ok(const char *u)
{
    char target[PEER_URL_LEN_MAX + 8];
    enum dial_security sec;
    const char *rest;
    size_t len = strlen(u);
    if (len >= PEER_URL_LEN_MAX ||
        dial_url_parse(u, len, target, sizeof target, &sec) != 0 ||
        sec == DIAL_SECURITY_DEFAULT)
        return false;
    /* unix and unixs too: etcd wants host:port of every scheme. */
    if (strncmp(u, "http://", 7) == 0 || strncmp(u, "unix://", 7) == 0)
        rest = u + 7;
    else if (strncmp(u, "https://", 8) == 0 || strncmp(u, "unixs://", 8) == 0)
        rest = u + 8;
    else
        return false;
    const char *colon = strrchr(rest, ':');
    if (colon == NULL || colon == rest || strchr(rest, '/') != NULL)
        return false;
    /* The bytes Go's url.Parse takes in a host: no space or control. */
    for (const char *p = rest; p < colon; p++)
        if (!isalnum((unsigned char)*p) && (unsigned char)*p < 0x80 &&
            strchr("-._~!$&'()*+;=:[]<>\"%", *p) == NULL)
            return false;
    for (const char *p = colon + 1; *p; p++)
        if (*p < '0' || *p > '9')
            return false;
    return colon[1] != '\0';
}

static bool urls_ok(const struct server_member_change *c)
{
    if (c->n_peer_urls == 0 || c->n_peer_urls > PEER_URLS_MAX)
        return false;
    for (size_t i = 0; i < c->n_peer_urls; i++)
        if (!url_ok(c->peer_urls[i]) || strchr(c->peer_urls[i], ',') != NULL)
            return false;
    return true;
}

/* Does a member other than `except` already use one of the URLs? */
static bool url_taken(struct server_ms *ms, const struct server_member_change *c,
                      uint64_t except)
{
    for (size_t i = 0; i < ms->n; i++) {
        if (ms->m[i].id == except)
            continue;
        char buf[1024];
        const char *have[PEER_URLS_MAX * 2];
        snprintf(buf, sizeof buf, "%s", ms->m[i].peer_urls);
        size_t n = server__urls_split(buf, have, PEER_URLS_MAX * 2);
        for (size_t k = 0; k < n; k++)
            for (size_t j = 0; j < c->n_peer_urls; j++)
                if (strcmp(have[k], c->peer_urls[j]) == 0)
                    return true;
    }
    return false;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* etcd's id for an added member: SHA-1 over the sorted peer URLs, the
 * cluster token and the Unix time in seconds; first 8 bytes big-endian. */
static uint64_t new_member_id(struct server *s,
                              const struct server_member_change *c)
{
    const char *sorted[PEER_URLS_MAX];
    memcpy(sorted, c->peer_urls, c->n_peer_urls * sizeof sorted[0]);
    qsort(sorted, c->n_peer_urls, sizeof sorted[0], cmp_str);
    SHA_CTX h;
    unsigned char d[SHA_DIGEST_LENGTH];
    char now[32];
    snprintf(now, sizeof now, "%lld", (long long)time(NULL));
    SHA1_Init(&h);
    for (size_t i = 0; i < c->n_peer_urls; i++)
        SHA1_Update(&h, sorted[i], strlen(sorted[i]));
    SHA1_Update(&h, s->cfg.cluster_token, strlen(s->cfg.cluster_token));
    SHA1_Update(&h, now, strlen(now));
    SHA1_Final(d, &h);
    uint64_t id = 0;
    for (int i = 0; i < 8; i++)
        id = id << 8 | d[i];
    return id;
}

/* The store's checks (under ms->mu); may pick the new id. */
static int check_change(struct server *s, const struct server_member_change *c,
                        uint64_t *id)
{
    struct server_ms *ms = s->ms;
    struct server_member_info *m = server__ms_find(ms, c->id);
    size_t learners = 0;
    for (size_t i = 0; i < ms->n; i++)
        learners += ms->m[i].is_learner;
    *id = c->id;
    switch (c->op) {
    case SERVER_MEMBER_ADD:
        if (!urls_ok(c))
            return ERR_MEMBER_BAD_URLS;
        if (url_taken(ms, c, 0))
            return ERR_PEER_URL_EXIST;
        if (c->is_learner && learners + 1 > LEARNERS_MAX)
            return ERR_TOO_MANY_LEARNERS;
        *id = new_member_id(s, c);
        if (server__ms_find(ms, *id) || server__ms_is_removed(ms, *id))
            return ERR_MEMBER_EXIST;
        return ms->n < SERVER_MEMBERS_MAX ? 0 : ERR_FULL;
    case SERVER_MEMBER_UPDATE:
        if (!urls_ok(c))
            return ERR_MEMBER_BAD_URLS;
        if (m == NULL)
            return ERR_MEMBER_NOT_FOUND;
        return url_taken(ms, c, c->id) ? ERR_PEER_URL_EXIST : 0;
    case SERVER_MEMBER_REMOVE:
        return m == NULL ? ERR_MEMBER_NOT_FOUND : 0;
    case SERVER_MEMBER_PROMOTE:
        if (m == NULL)
            return ERR_MEMBER_NOT_FOUND;
        return m->is_learner ? 0 : ERR_MEMBER_NOT_LEARNER;
    default:
        return ERR_INVAL;
    }
}

/* The conf change's context: InternalRequest{id, member_change}. */
static struct server_ms_job *change_job(const struct server_member_change *c,
                                        uint64_t id, uint64_t req_id)
{
    static const int kinds[] = {CETCDPB__MEMBER_CHANGE__KIND__ADD,
                                CETCDPB__MEMBER_CHANGE__KIND__REMOVE,
                                CETCDPB__MEMBER_CHANGE__KIND__UPDATE,
                                CETCDPB__MEMBER_CHANGE__KIND__PROMOTE};
    Etcdserverpb__Member m = ETCDSERVERPB__MEMBER__INIT;
    m.id = id;
    m.n_peerurls = c->n_peer_urls;
    m.peerurls = (char **)c->peer_urls;
    m.islearner = c->op == SERVER_MEMBER_ADD && c->is_learner;
    Cetcdpb__MemberChange mc = CETCDPB__MEMBER_CHANGE__INIT;
    mc.kind = kinds[c->op];
    mc.member = &m;
    Cetcdpb__InternalRequest req = CETCDPB__INTERNAL_REQUEST__INIT;
    req.id = req_id;
    req.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_MEMBER_CHANGE;
    req.member_change = &mc;
    size_t len = cetcdpb__internal_request__get_packed_size(&req);
    struct server_ms_job *j = mem_calloc(1, sizeof *j + len);
    if (j == NULL)
        return NULL;
    j->kind = SERVER_MS_JOB_CONF;
    j->op = c->op;
    j->id = id;
    j->req_id = req_id;
    j->len = cetcdpb__internal_request__pack(&req, j->data);
    CHECK(j->len == len);
    return j;
}

void server__ms_job_push(struct server *s, struct server_ms_job *j,
                         bool kick)
{
    CHECK(j != NULL && j->next == NULL);
    pthread_mutex_lock(&s->ms->mu);
    struct server_ms_job **p = &s->ms->jobs;
    while (*p != NULL)
        p = &(*p)->next;
    *p = j;
    pthread_mutex_unlock(&s->ms->mu);
    if (kick)
        server__kick(s);
}

/* Admits a new job (false: SERVER_MS_JOBS_MAX are alive already). */
static bool job_reserve(struct server *s)
{
    if (atomic_fetch_add(&s->ms->n_jobs, 1) < SERVER_MS_JOBS_MAX)
        return true;
    atomic_fetch_sub(&s->ms->n_jobs, 1);
    return false;
}

static void job_unreserve(struct server *s)
{
    CHECK(atomic_load(&s->ms->n_jobs) > 0);
    atomic_fetch_sub(&s->ms->n_jobs, 1);
}

void server__ms_job_free(struct server *s, struct server_ms_job *j)
{
    CHECK(j != NULL);
    job_unreserve(s);
    mem_free(j);
}

static void job_push(struct server *s, struct server_ms_job *j)
{
    server__ms_job_push(s, j, true);
}

static void refuse_now(server_member_fn fn, void *arg, int err)
{
    struct server_member_result r = {.err = err};
    CHECK(err != 0);
    fn(arg, &r);
}

/* A promotion's forwarding state: the deadline is the request timeout,
 * as etcd's forwarding context. */
static void promote_init(struct server *s, struct server_ms_job *j,
                         const struct server_member_change *c)
{
    j->s = s;
    j->from_peer = c->from_peer;
    j->deadline_ms = server__clock_ms(s) + server__request_timeout_ms(s);
    j->fwd_err = ERR_NO_LEADER;
}

void server_member_change(struct server *s,
                          const struct server_member_change *c,
                          server_member_fn fn, void *arg)
{
    CHECK(c->op >= SERVER_MEMBER_ADD && c->op <= SERVER_MEMBER_PROMOTE);
    if (atomic_load(&s->stopping) || server_removed(s)) {
        refuse_now(fn, arg, ERR_STOPPED);
        return;
    }
    uint64_t id = c->id;
    int rc = 0;
    /* etcd's PromoteMember: a follower checks nothing itself and asks the
     * leader, which checks the learner (its own members may lag behind the
     * leader's: a learner just added is "not found" here). */
    bool ask_leader = c->op == SERVER_MEMBER_PROMOTE && !c->from_peer &&
                      atomic_load(&s->lead) != s->member_id;
    if (!ask_leader) {
        pthread_mutex_lock(&s->ms->mu);
        rc = check_change(s, c, &id);
        pthread_mutex_unlock(&s->ms->mu);
    }
    bool reserved = rc == 0 && job_reserve(s);
    if (rc == 0 && !reserved)
        rc = ERR_TOO_MANY_REQUESTS;
    struct change_waiter *w = rc == 0 ? mem_malloc(sizeof *w) : NULL;
    if (rc == 0 && w == NULL)
        rc = ERR_NOMEM;
    uint64_t req_id = atomic_fetch_add(&s->next_id, 1);
    struct server_ms_job *j = rc == 0 ? change_job(c, id, req_id) : NULL;
    if (rc == 0 && j == NULL)
        rc = ERR_NOMEM;
    if (rc == 0) {
        *w = (struct change_waiter){fn, arg, id};
        uint64_t now = server__clock_ms(s);
        uint64_t wait_ms = server__request_timeout_ms(s);
        if (c->op == SERVER_MEMBER_PROMOTE) {
            promote_init(s, j, c);
            wait_ms += PROMOTE_WAIT_SLACK_MS;
        }
        rc = server_wait_register(&s->wait, req_id, change_done, w, now,
                                  now + wait_ms);
    }
    if (rc != 0) {
        mem_free(w);
        mem_free(j);
        if (reserved)
            job_unreserve(s);
        refuse_now(fn, arg, rc == ERR_FULL ? ERR_TOO_MANY_REQUESTS : rc);
        return;
    }
    job_push(s, j);
}

void server_move_leader(struct server *s, uint64_t target,
                        uint64_t deadline_ms, server_leader_fn fn, void *arg)
{
    if (atomic_load(&s->stopping)) {
        fn(arg, ERR_STOPPED);
        return;
    }
    if (!job_reserve(s)) {
        fn(arg, ERR_TOO_MANY_REQUESTS);
        return;
    }
    struct server_ms_job *j = mem_calloc(1, sizeof *j);
    if (j == NULL) {
        job_unreserve(s);
        fn(arg, ERR_NOMEM);
        return;
    }
    j->kind = SERVER_MS_JOB_TRANSFER;
    j->id = target;
    j->deadline_ms = deadline_ms;
    j->fn = fn;
    j->arg = arg;
    job_push(s, j);
}

/* --- the raft thread ---------------------------------------------------- */

void server__ms_job_answer(struct server *s, uint64_t req_id, int err,
                           const ProtobufCMessage *msg)
{
    server_done_fn done;
    void *arg;
    CHECK(err == 0 || msg == NULL);
    if (server_wait_take(&s->wait, req_id, &done, &arg)) {
        struct server_response r = {.err = err, .msg = msg};
        done(arg, &r);
    }
}

static void fail_change(struct server *s, uint64_t req_id, int err)
{
    CHECK(err != 0);
    server__ms_job_answer(s, req_id, err, NULL);
}

/* etcd's HealthInterval: a peer counts as connected once its stream has
 * been up this long. */
#define HEALTH_INTERVAL_MS 5000

static bool stream_up(struct server *s, uint64_t id)
{
    struct peer_stats st;
    return s->transport != NULL && peer_stats(s->transport, id, &st) == 0 &&
           st.active;
}

/* Raft thread, each pass: when each member's stream came up (0: down). */
static void track_active(struct server *s)
{
    struct server_ms *ms = s->ms;
    uint64_t now = server__clock_ms(s);
    pthread_mutex_lock(&ms->mu);
    for (size_t i = 0; i < ms->n; i++) {
        uint64_t id = ms->m[i].id;
        if (ms->active_id[i] != id) {
            ms->active_id[i] = id;
            ms->active_since[i] = 0;
        }
        if (!stream_up(s, id))
            ms->active_since[i] = 0;
        else if (ms->active_since[i] == 0)
            ms->active_since[i] = now;
    }
    pthread_mutex_unlock(&ms->mu);
}

/* Under ms->mu: id has been connected for HEALTH_INTERVAL_MS (ourselves
 * always). */
static bool peer_active(struct server *s, uint64_t id)
{
    struct server_ms *ms = s->ms;
    if (id == s->member_id)
        return true;
    for (size_t i = 0; i < ms->n; i++)
        if (ms->active_id[i] == id)
            return ms->active_since[i] != 0 &&
                   server__clock_ms(s) - ms->active_since[i] >=
                       HEALTH_INTERVAL_MS;
    return false;
}

/* etcd's --strict-reconfig-check (membership.RaftCluster.IsReadyTo*,
 * EtcdServer.mayAddMember / mayRemoveMember): a change must leave a
 * quorum of started voters, and this member must reach the voters. */
static int strict_check(struct server *s, const struct server_ms_job *j)
{
    struct server_ms *ms = s->ms;
    size_t voters = 0, started = 0, active = 0;
    bool target_active = false;
    pthread_mutex_lock(&ms->mu);
    for (size_t i = 0; i < ms->n; i++) {
        const struct server_member_info *m = &ms->m[i];
        if (m->is_learner)
            continue;
        bool up = peer_active(s, m->id);
        active += up;
        if (m->id == j->id) {
            target_active = up;
            if (j->op == SERVER_MEMBER_REMOVE)
                continue;
        }
        voters++;
        started += m->name[0] != '\0';
    }
    struct server_member_info *t = server__ms_find(ms, j->id);
    bool voter_target = t != NULL && !t->is_learner;
    pthread_mutex_unlock(&ms->mu);
    switch (j->op) {
    case SERVER_MEMBER_ADD:
        /* The new voter counts as a member that has not started; adding
         * a second member to a lone one is allowed (restoring a cluster). */
        if (!(started == 1 && voters == 1) &&
            started < (voters + 1) / 2 + 1)
            return ERR_MEMBER_NOT_ENOUGH_STARTED;
        return active == voters ? 0 : ERR_UNHEALTHY;
    case SERVER_MEMBER_PROMOTE:
        /* The learner counts as a started voter. */
        return started + 1 < (voters + 1) / 2 + 1
                   ? ERR_MEMBER_NOT_ENOUGH_STARTED
                   : 0;
    case SERVER_MEMBER_REMOVE:
        if (!voter_target)
            return 0;
        if (started < voters / 2 + 1)
            return ERR_MEMBER_NOT_ENOUGH_STARTED;
        /* A member that is down is safe to remove. */
        if (j->id != s->member_id && !target_active)
            return 0;
        return active - 1 < 1 + voters / 2 ? ERR_UNHEALTHY : 0;
    default:
        return 0;
    }
}

/* etcd's isLearnerReady: the learner's match must be at least 90% of
 * the leader's.  Only the leader knows: ERR_NOT_LEADER elsewhere.  A
 * member raft does not track passes (the apply refuses it later). */
static int learner_ready(struct server *s, uint64_t id)
{
    struct raft_status *st = mem_malloc(sizeof *st);
    if (st == NULL)
        return ERR_NOMEM;
    raft_status(s->node.raft, st);
    uint64_t lead_match = 0, match = 0;
    bool leader = st->role == RAFT_LEADER, found = false;
    for (uint32_t i = 0; i < st->n_progress; i++) {
        if (st->progress[i].id == st->id)
            lead_match = st->progress[i].match;
        if (st->progress[i].id == id) {
            match = st->progress[i].match;
            found = true;
        }
    }
    mem_free(st);
    if (!leader)
        return ERR_NOT_LEADER;
    return found && match * 100 < lead_match * READY_PERCENT
               ? ERR_LEARNER_NOT_READY
               : 0;
}

static void run_conf(struct server *s, struct server_ms_job *j)
{
    int rc = 0;
    if (j->op == SERVER_MEMBER_PROMOTE)
        rc = learner_ready(s, j->id);
    /* etcd's PromoteMember: a follower asks the leader; the leader answers
     * a forwarded one itself (never forwarding it on). */
    if (rc == ERR_NOT_LEADER && !j->from_peer) {
        server__promote_forward(s, j);
        return;
    }
    if (rc == 0 && s->cfg.strict_reconfig_check)
        rc = strict_check(s, j);
    if (rc == 0) {
        struct raft_conf_change cc;
        memset(&cc, 0, sizeof cc);
        cc.n_changes = 1;
        cc.changes[0].node_id = j->id;
        Cetcdpb__InternalRequest *req =
            cetcdpb__internal_request__unpack(NULL, j->len, j->data);
        bool learner = req && req->member_change &&
                       req->member_change->member &&
                       req->member_change->member->islearner;
        if (req)
            cetcdpb__internal_request__free_unpacked(req, NULL);
        static const uint8_t types[] = {RAFT_CC_ADD_NODE, RAFT_CC_REMOVE_NODE,
                                        RAFT_CC_UPDATE_NODE, RAFT_CC_ADD_NODE};
        cc.changes[0].type = types[j->op];
        if (j->op == SERVER_MEMBER_ADD && learner)
            cc.changes[0].type = RAFT_CC_ADD_LEARNER;
        cc.ctx = j->data;
        cc.ctx_len = j->len;
        rc = raft_propose_conf_change(s->node.raft, &cc, false);
        if (rc == ERR_PROPOSAL_DROPPED)
            rc = ERR_NO_LEADER;
    }
    if (rc != 0)
        fail_change(s, j->req_id, rc);
    server__ms_job_free(s, j);
}

static bool is_voter(struct server *s, uint64_t id)
{
    pthread_mutex_lock(&s->ms->mu);
    struct server_member_info *m = server__ms_find(s->ms, id);
    bool v = m != NULL && !m->is_learner;
    pthread_mutex_unlock(&s->ms->mu);
    return v;
}

static void run_transfer(struct server *s, struct server_ms_job *j)
{
    struct raft_status *st = mem_malloc(sizeof *st);
    int rc = st ? 0 : ERR_NOMEM;
    if (rc == 0) {
        raft_status(s->node.raft, st);
        if (st->role != RAFT_LEADER)
            rc = ERR_NOT_LEADER;
        mem_free(st);
    }
    if (rc == 0 && !is_voter(s, j->id))
        rc = ERR_BAD_LEADER_TRANSFEREE;
    if (rc == 0 && j->id != s->member_id) {
        log_info("etcdserver", "%016llx starts leadership transfer from "
                 "%016llx to %016llx", (unsigned long long)s->member_id,
                 (unsigned long long)s->member_id, (unsigned long long)j->id);
        rc = raft_transfer_leader(s->node.raft, j->id);
    }
    if (rc != 0) {
        j->fn(j->arg, rc);
        server__ms_job_free(s, j);
        return;
    }
    j->next = s->ms->transfers;
    s->ms->transfers = j;
}

/* Transfers end when the leader is the target, or at their deadline. */
static void check_transfers(struct server *s)
{
    uint64_t now = server__clock_ms(s), lead = atomic_load(&s->lead);
    for (struct server_ms_job **p = &s->ms->transfers; *p;) {
        struct server_ms_job *j = *p;
        int rc = 1;
        if (lead == j->id)
            rc = 0;
        else if (now >= j->deadline_ms)
            rc = ERR_LEADER_TRANSFER_TIMEOUT;
        if (rc == 1) {
            p = &j->next;
            continue;
        }
        *p = j->next;
        if (rc == 0)
            log_info("etcdserver", "%016llx finished leadership transfer to "
                     "%016llx", (unsigned long long)s->member_id,
                     (unsigned long long)j->id);
        j->fn(j->arg, rc);
        server__ms_job_free(s, j);
    }
}

void server__members_raft_pass(struct server *s)
{
    pthread_mutex_lock(&s->ms->mu);
    struct server_ms_job *j = s->ms->jobs;
    s->ms->jobs = NULL;
    pthread_mutex_unlock(&s->ms->mu);
    while (j != NULL) {
        struct server_ms_job *next = j->next;
        j->next = NULL;
        if (j->kind == SERVER_MS_JOB_CONF)
            run_conf(s, j);
        else
            run_transfer(s, j);
        j = next;
    }
    check_transfers(s);
    if (s->cfg.strict_reconfig_check)
        track_active(s);
}

void server__conf_change_committed(struct server *s,
                                   const struct raft_entry *e,
                                   const uint8_t **data, size_t *len)
{
    struct raft_conf_change cc;
    struct raft_conf_state cs;
    *data = NULL;
    *len = 0;
    if (raft_conf_change_decode(e->data, e->len, &cc) != 0) {
        log_error("etcdserver", "cannot decode conf change at %llu",
                  (unsigned long long)e->index);
        return;
    }
    int rc = raft_apply_conf_change(s->node.raft, &cc, &cs);
    Cetcdpb__InternalRequest *req =
        cc.ctx_len ? cetcdpb__internal_request__unpack(NULL, cc.ctx_len,
                                                       cc.ctx)
                   : NULL;
    bool ours = req != NULL &&
                req->request_case ==
                    CETCDPB__INTERNAL_REQUEST__REQUEST_MEMBER_CHANGE;
    uint64_t req_id = req ? req->id : 0;
    if (req)
        cetcdpb__internal_request__free_unpacked(req, NULL);
    if (rc != 0) {
        log_warn("etcdserver", "conf change at %llu refused by raft: %s",
                 (unsigned long long)e->index, err_str(rc));
        fail_change(s, req_id, ERR_INVAL);
        return;
    }
    if (ours) {
        *data = cc.ctx;
        *len = cc.ctx_len;
    }
}

void server__members_close(struct server *s)
{
    if (s->ms == NULL)
        return;
    struct server_ms_job *lists[2] = {s->ms->jobs, s->ms->transfers};
    for (int k = 0; k < 2; k++) {
        for (struct server_ms_job *j = lists[k], *next; j != NULL; j = next) {
            next = j->next;
            if (j->kind == SERVER_MS_JOB_TRANSFER)
                j->fn(j->arg, ERR_STOPPED);
            else
                fail_change(s, j->req_id, ERR_STOPPED);
            server__ms_job_free(s, j);
        }
    }
    mem_free(s->ms->staged);
    pthread_mutex_destroy(&s->ms->mu);
    mem_free(s->ms);
    s->ms = NULL;
}
