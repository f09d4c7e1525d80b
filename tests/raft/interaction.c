/*
 * interaction.c - data-driven interaction tests for src/raft.
 *
 * GOAL: pin down raft's observable behaviour (messages, Ready contents, state)
 * in readable scripts, one per feature, including the classic tricky cases.
 *
 * METHOD: each script in tests/raft/testdata/ (*.txt) is a list of blocks
 *     command args...
 *     ----
 *     expected output (no blank lines)
 *     <blank line>
 * Lines starting with '#' are comments.  The driver runs every command on an
 * in-memory cluster (one simulated disk per node, a mailbox per node) and
 * compares the output.  With --rewrite it writes the actual output back into
 * the file instead (review the diff!).
 *
 * Commands (ids are node ids, nodes are created with ids 1..N in order):
 *   add-nodes N [voters=(1,2)] [learners=(3)] [index=I] [pre-vote=bool]
 *       [check-quorum=bool] [read-only=lease] [max-inflight=N] [max-size=N]
 *       [forwarding=bool] [election=N] [heartbeat=N]
 *   campaign ID | propose ID DATA | read-index ID CTX
 *   propose-conf-change ID [v1=true] [transition=auto|implicit|explicit] CHG..
 *       (CHG: vN add voter, lN add learner, rN remove, uN update)
 *   tick-election ID | tick-heartbeat ID | tick ID N
 *   process-ready ID.. | deliver-msgs [drop=true] ID.. | stabilize [ID..]
 *   isolate ID | recover | transfer-leader ID TO | report-unreachable ID TO
 *   report-snapshot ID TO ok|fail | compact ID INDEX (snapshot at applied,
 *   drop entries <= INDEX) | restart ID | status ID | raft-state | raft-log ID
 *   log-level none|info|debug
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "raft/raft.h"
#include "util/err.h"

#define MAXN 9

/* ---- output builder ---- */
static char *out;
static size_t out_len, out_cap;
static const char *indent = "";
static int log_level = 1; /* 0 debug, 1 info, 9 none */

static void outf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void outf(const char *fmt, ...)
{
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    size_t n = strlen(indent) + strlen(line) + 2;
    if (out_len + n >= out_cap) {
        out_cap = (out_cap + n) * 2;
        out = realloc(out, out_cap);
    }
    out_len += (size_t)sprintf(out + out_len, "%s%s\n", indent, line);
}

static void logger(void *arg, int level, const char *line)
{
    static const char *names[] = {"DEBUG", "INFO", "WARN", "ERROR"};
    (void)arg;
    if (level >= log_level)
        outf("%s %s", names[level], line);
}

/* ---- nodes ---- */
struct mbox {
    uint8_t **bufs;
    size_t *lens;
    size_t n, cap;
};

struct node {
    raft_id id;
    struct raft *r;
    struct raft_config cfg;            /* for restarts */
    struct raft_hard_state hs;         /* disk */
    struct raft_snapshot snap;         /* disk, data owned */
    struct raft_entry *ents;           /* disk, after snap */
    size_t n_ents, cap_ents;
    struct raft_conf_state conf;       /* applied membership */
    raft_index applied;
    bool isolated;
};

static struct node nodes[MAXN + 1];
static int n_nodes;
static struct mbox boxes[MAXN + 1];

static struct node *node_of(const char *s)
{
    int id = atoi(s);
    if (id < 1 || id > n_nodes) {
        outf("no such node %s", s);
        return NULL;
    }
    return &nodes[id];
}

static void fmt_data(char *buf, size_t cap, const struct raft_entry *e)
{
    if (e->type == RAFT_ENTRY_NORMAL) {
        snprintf(buf, cap, "EntryNormal \"%.*s\"", (int)e->len,
                 e->len ? (const char *)e->data : "");
        return;
    }
    struct raft_conf_change cc;
    size_t w = (size_t)snprintf(buf, cap, "%s",
                                e->type == RAFT_ENTRY_CONF_CHANGE
                                    ? "EntryConfChange"
                                    : "EntryConfChangeV2");
    if (raft_conf_change_decode(e->data, e->len, &cc) != 0) {
        snprintf(buf + w, cap - w, " <invalid>");
        return;
    }
    static const char tc[] = "vrul";
    static const char *tr[] = {"", " transition=implicit",
                               " transition=explicit"};
    for (uint32_t k = 0; k < cc.n_changes && w < cap; k++)
        w += (size_t)snprintf(buf + w, cap - w, " %c%" PRIu64,
                              tc[cc.changes[k].type], cc.changes[k].node_id);
    if (w < cap)
        snprintf(buf + w, cap - w, "%s", tr[cc.transition]);
}

static void fmt_entries(char *buf, size_t cap, const struct raft_entry *e,
                        size_t n)
{
    size_t w = 0;
    buf[0] = 0;
    for (size_t k = 0; k < n && w < cap; k++) {
        char d[512];
        fmt_data(d, sizeof(d), &e[k]);
        w += (size_t)snprintf(buf + w, cap - w, "%s%" PRIu64 "/%" PRIu64 " %s",
                              k ? ", " : "", e[k].term, e[k].index, d);
    }
}

static void fmt_conf(char *buf, size_t cap, const struct raft_conf_state *cs)
{
    size_t w = (size_t)snprintf(buf, cap, "Voters:[");
    for (uint32_t k = 0; k < cs->n_voters; k++)
        w += (size_t)snprintf(buf + w, cap - w, "%s%" PRIu64, k ? " " : "",
                              cs->voters[k]);
    w += (size_t)snprintf(buf + w, cap - w, "] VotersOutgoing:[");
    for (uint32_t k = 0; k < cs->n_voters_outgoing; k++)
        w += (size_t)snprintf(buf + w, cap - w, "%s%" PRIu64, k ? " " : "",
                              cs->voters_outgoing[k]);
    w += (size_t)snprintf(buf + w, cap - w, "] Learners:[");
    for (uint32_t k = 0; k < cs->n_learners; k++)
        w += (size_t)snprintf(buf + w, cap - w, "%s%" PRIu64, k ? " " : "",
                              cs->learners[k]);
    w += (size_t)snprintf(buf + w, cap - w, "] LearnersNext:[");
    for (uint32_t k = 0; k < cs->n_learners_next; k++)
        w += (size_t)snprintf(buf + w, cap - w, "%s%" PRIu64, k ? " " : "",
                              cs->learners_next[k]);
    snprintf(buf + w, cap - w, "] AutoLeave:%s",
             cs->auto_leave ? "true" : "false");
}

static void print_msg(const char *prefix, const struct raft_msg *m)
{
    char line[8192];
    size_t w = (size_t)snprintf(line, sizeof(line),
                                "%s%" PRIu64 "->%" PRIu64 " %s Term:%" PRIu64
                                " Log:%" PRIu64 "/%" PRIu64,
                                prefix, m->from, m->to,
                                raft_msg_type_name(m->type),
                                m->term, m->log_term, m->index);
    if (m->reject)
        w += (size_t)snprintf(line + w, sizeof(line) - w,
                              " Rejected (Hint: %" PRIu64 ")", m->reject_hint);
    if (m->commit)
        w += (size_t)snprintf(line + w, sizeof(line) - w, " Commit:%" PRIu64,
                              m->commit);
    if (m->n_entries) {
        char e[4096];
        fmt_entries(e, sizeof(e), m->entries, m->n_entries);
        w += (size_t)snprintf(line + w, sizeof(line) - w, " Entries:[%s]", e);
    }
    if (m->ctx_len)
        w += (size_t)snprintf(line + w, sizeof(line) - w, " Context:\"%.*s\"",
                              (int)m->ctx_len, (const char *)m->ctx);
    if (m->campaign_transfer)
        w += (size_t)snprintf(line + w, sizeof(line) - w, " Transfer");
    if (m->snapshot) {
        char c[1024];
        fmt_conf(c, sizeof(c), &m->snapshot->meta.conf);
        snprintf(line + w, sizeof(line) - w,
                 " Snapshot: Index:%" PRIu64 " Term:%" PRIu64 " %s",
                 m->snapshot->meta.index, m->snapshot->meta.term, c);
    }
    outf("%s", line);
}

static void mbox_put(const struct raft_msg *m)
{
    struct mbox *b = &boxes[m->to];
    if (m->to < 1 || m->to > (raft_id)n_nodes)
        return;
    size_t len = raft_msg_encoded_size(m);
    uint8_t *buf = malloc(len);
    raft_msg_encode(m, buf, len, &len);
    if (b->n == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 16;
        b->bufs = realloc(b->bufs, b->cap * sizeof(*b->bufs));
        b->lens = realloc(b->lens, b->cap * sizeof(*b->lens));
    }
    b->bufs[b->n] = buf;
    b->lens[b->n++] = len;
}

static void disk_append(struct node *nd, const struct raft_entry *e, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        size_t pos = (size_t)(e[k].index - nd->snap.meta.index - 1);
        for (size_t j = pos; j < nd->n_ents; j++)
            free(nd->ents[j].data);
        nd->n_ents = pos;
        if (nd->n_ents == nd->cap_ents) {
            nd->cap_ents = nd->cap_ents ? nd->cap_ents * 2 : 16;
            nd->ents = realloc(nd->ents, nd->cap_ents * sizeof(*nd->ents));
        }
        struct raft_entry *x = &nd->ents[nd->n_ents++];
        *x = e[k];
        x->data = malloc(e[k].len + 1);
        if (e[k].len)
            memcpy(x->data, e[k].data, e[k].len);
    }
}

static void disk_snap(struct node *nd, const struct raft_snapshot *s)
{
    free(nd->snap.data);
    nd->snap = *s;
    nd->snap.data = malloc(s->len + 1);
    if (s->len)
        memcpy(nd->snap.data, s->data, s->len);
}

static void apply(struct node *nd, const struct raft_entry *e)
{
    nd->applied = e->index;
    if (e->type == RAFT_ENTRY_NORMAL)
        return;
    struct raft_conf_change cc;
    if (raft_conf_change_decode(e->data, e->len, &cc) != 0)
        return;
    int rc = raft_apply_conf_change(nd->r, &cc, &nd->conf);
    if (rc != 0)
        outf("conf change at %" PRIu64 " refused: %s", e->index, err_name(rc));
}

static bool process_ready(struct node *nd)
{
    if (!raft_has_ready(nd->r))
        return false;
    struct raft_ready rd;
    raft_ready(nd->r, &rd);
    outf("> %" PRIu64 " handling Ready", nd->id);
    indent = "  ";
    outf("Ready MustSync=%s:", rd.must_sync ? "true" : "false");
    if (rd.has_soft_state)
        outf("Lead:%" PRIu64 " State:%s", rd.soft_state.lead,
             raft_role_name(rd.soft_state.role));
    if (rd.has_hard_state)
        outf("HardState Term:%" PRIu64 " Vote:%" PRIu64 " Commit:%" PRIu64,
             rd.hard_state.term, rd.hard_state.vote, rd.hard_state.commit);
    char buf[8192];
    if (rd.n_entries) {
        outf("Entries:");
        for (size_t k = 0; k < rd.n_entries; k++) {
            fmt_entries(buf, sizeof(buf), &rd.entries[k], 1);
            outf("%s", buf);
        }
    }
    if (rd.snapshot) {
        fmt_conf(buf, sizeof(buf), &rd.snapshot->meta.conf);
        outf("Snapshot Index:%" PRIu64 " Term:%" PRIu64 " %s",
             rd.snapshot->meta.index, rd.snapshot->meta.term, buf);
        for (size_t k = 0; k < nd->n_ents; k++)
            free(nd->ents[k].data);
        nd->n_ents = 0;
        disk_snap(nd, rd.snapshot);
        nd->applied = rd.snapshot->meta.index;
        nd->conf = rd.snapshot->meta.conf;
    }
    disk_append(nd, rd.entries, rd.n_entries);
    if (rd.has_hard_state)
        nd->hs = rd.hard_state;
    if (rd.n_committed) {
        outf("CommittedEntries:");
        for (size_t k = 0; k < rd.n_committed; k++) {
            fmt_entries(buf, sizeof(buf), &rd.committed[k], 1);
            outf("%s", buf);
        }
    }
    if (rd.n_msgs) {
        outf("Messages:");
        for (size_t k = 0; k < rd.n_msgs; k++) {
            print_msg("", &rd.msgs[k]);
            mbox_put(&rd.msgs[k]);
        }
    }
    for (size_t k = 0; k < rd.n_read_states; k++)
        outf("ReadState Index:%" PRIu64 " Context:\"%.*s\"",
             rd.read_states[k].index, (int)rd.read_states[k].ctx_len,
             (const char *)rd.read_states[k].ctx);
    for (size_t k = 0; k < rd.n_committed; k++)
        apply(nd, &rd.committed[k]);
    raft_advance(nd->r, &rd);
    indent = "";
    return true;
}

static bool deliver(struct node *nd, bool drop)
{
    struct mbox *b = &boxes[nd->id];
    if (b->n == 0)
        return false;
    outf("> %" PRIu64 " receiving messages", nd->id);
    indent = "  ";
    size_t n = b->n;
    uint8_t **bufs = b->bufs;
    size_t *lens = b->lens;
    memset(b, 0, sizeof(*b));
    for (size_t k = 0; k < n; k++) {
        struct raft_msg m;
        if (raft_msg_decode(bufs[k], lens[k], &m) != 0) {
            outf("decode failed");
            continue;
        }
        bool dropped = drop || nd->isolated || nodes[m.from].isolated;
        print_msg(dropped ? "dropped: " : "", &m);
        if (!dropped) {
            int rc = raft_step(nd->r, &m);
            if (rc != 0)
                outf("step: %s", err_name(rc));
        }
        raft_msg_release(&m);
        free(bufs[k]);
    }
    free(bufs);
    free(lens);
    indent = "";
    return true;
}

static bool parse_bool(const char *v)
{
    return strcmp(v, "true") == 0;
}

static void parse_ids(const char *v, raft_id *ids, uint32_t *n)
{
    *n = 0;
    for (const char *p = v; *p; p++)
        if (*p >= '0' && *p <= '9') {
            ids[(*n)++] = strtoull(p, (char **)&p, 10);
            p--;
        }
}

static void start(struct node *nd)
{
    struct raft_config c = nd->cfg;
    c.hard_state = nd->hs;
    c.snapshot = nd->snap;
    c.conf = nd->snap.meta.index ? nd->snap.meta.conf : nd->cfg.conf;
    c.entries = nd->ents;
    c.n_entries = nd->n_ents;
    c.applied = nd->snap.meta.index;
    nd->applied = c.applied;
    nd->conf = c.conf;
    nd->r = malloc(raft_sizeof());
    int rc = raft_init(nd->r, &c);
    if (rc != 0)
        outf("raft_init: %s", err_name(rc));
}

static void cmd_add_nodes(int argc, char **argv)
{
    struct raft_config c = {0};
    c.election_tick = 10;
    c.heartbeat_tick = 1;
    c.max_size_per_msg = UINT64_MAX;
    c.max_inflight_msgs = 256;
    c.pre_vote = false;
    c.check_quorum = false;
    c.logger = logger;
    raft_index index = 0;
    int n = atoi(argv[1]);
    for (int i = 2; i < argc; i++) {
        char *k = argv[i], *v = strchr(argv[i], '=');
        if (v == NULL)
            continue;
        *v++ = 0;
        if (!strcmp(k, "voters"))
            parse_ids(v, c.conf.voters, &c.conf.n_voters);
        else if (!strcmp(k, "learners"))
            parse_ids(v, c.conf.learners, &c.conf.n_learners);
        else if (!strcmp(k, "index"))
            index = strtoull(v, NULL, 10);
        else if (!strcmp(k, "pre-vote"))
            c.pre_vote = parse_bool(v);
        else if (!strcmp(k, "check-quorum"))
            c.check_quorum = parse_bool(v);
        else if (!strcmp(k, "read-only"))
            c.read_only = !strcmp(v, "lease") ? RAFT_READ_ONLY_LEASE_BASED
                                              : RAFT_READ_ONLY_SAFE;
        else if (!strcmp(k, "max-inflight"))
            c.max_inflight_msgs = (uint32_t)atoi(v);
        else if (!strcmp(k, "max-size"))
            c.max_size_per_msg = strtoull(v, NULL, 10);
        else if (!strcmp(k, "forwarding"))
            c.disable_proposal_forwarding = !parse_bool(v);
        else if (!strcmp(k, "election"))
            c.election_tick = atoi(v);
        else if (!strcmp(k, "heartbeat"))
            c.heartbeat_tick = atoi(v);
        else
            outf("unknown arg %s", k);
    }
    for (int i = 0; i < n && n_nodes < MAXN; i++) {
        struct node *nd = &nodes[++n_nodes];
        memset(nd, 0, sizeof(*nd));
        nd->id = (raft_id)n_nodes;
        nd->cfg = c;
        nd->cfg.id = nd->id;
        nd->cfg.seed = nd->id;
        if (index > 0) {
            /* Bootstrap from a snapshot holding the membership. */
            struct raft_snapshot s = {.data = (uint8_t *)"", .len = 0};
            s.meta.index = index;
            s.meta.term = 1;
            s.meta.conf = c.conf;
            disk_snap(nd, &s);
            nd->hs = (struct raft_hard_state){1, 0, index};
            memset(&nd->cfg.conf, 0, sizeof(nd->cfg.conf));
        }
        start(nd);
    }
}

static void cmd_conf_change(struct node *nd, int argc, char **argv)
{
    struct raft_conf_change cc = {0};
    bool v1 = false;
    for (int i = 2; i < argc; i++) {
        char *a = argv[i];
        if (!strcmp(a, "v1=true")) {
            v1 = true;
        } else if (!strncmp(a, "transition=", 11)) {
            cc.transition = !strcmp(a + 11, "implicit")   ? 1
                            : !strcmp(a + 11, "explicit") ? 2
                                                          : 0;
        } else {
            const char *t = strchr("vrul", a[0]);
            if (t == NULL || cc.n_changes == RAFT_MAX_MEMBERS)
                continue;
            cc.changes[cc.n_changes].type = (uint8_t)(t - "vrul");
            cc.changes[cc.n_changes++].node_id = strtoull(a + 1, NULL, 10);
        }
    }
    int rc = raft_propose_conf_change(nd->r, &cc, !v1);
    if (rc != 0)
        outf("error: %s", err_name(rc));
}

static void cmd_status(struct node *nd)
{
    struct raft_status st;
    raft_status(nd->r, &st);
    static const char *ps[] = {"StateProbe", "StateReplicate",
                               "StateSnapshot"};
    if (st.role != RAFT_LEADER) {
        outf("%" PRIu64 " %s term:%" PRIu64 " lead:%" PRIu64, st.id,
             raft_role_name(st.role), st.term, st.lead);
        return;
    }
    for (uint32_t k = 0; k < st.n_progress; k++) {
        const struct raft_progress_status *p = &st.progress[k];
        char snap[48] = "";
        if (p->pending_snapshot)
            snprintf(snap, sizeof(snap), " pendingSnap=%" PRIu64,
                     p->pending_snapshot);
        outf("%" PRIu64 ": %s match=%" PRIu64 " next=%" PRIu64 "%s%s%s"
             " inflight=%u", p->id, ps[p->state], p->match, p->next,
             p->is_learner ? " learner" : "", p->paused ? " paused" : "",
             snap, p->inflight);
    }
}

static void cmd_raft_state(void)
{
    for (int i = 1; i <= n_nodes; i++) {
        struct raft_status st;
        raft_status(nodes[i].r, &st);
        char c[1024];
        fmt_conf(c, sizeof(c), &st.conf);
        outf("%d: %s (%s) Term:%" PRIu64 " Lead:%" PRIu64 " Commit:%" PRIu64
             " Applied:%" PRIu64 " %s", i, raft_role_name(st.role),
             st.is_learner ? "Non-Voter" : "Voter", st.term, st.lead,
             st.commit, st.applied, c);
    }
}

static void cmd_raft_log(struct node *nd)
{
    struct raft_status st;
    raft_status(nd->r, &st);
    if (st.last_index < st.first_index) {
        outf("log is empty: first index=%" PRIu64 ", last index=%" PRIu64,
             st.first_index, st.last_index);
        return;
    }
    /* The disk holds exactly what is persisted; show it. */
    for (size_t k = 0; k < nd->n_ents; k++) {
        char buf[1024];
        if (nd->ents[k].index < st.first_index)
            continue;
        fmt_entries(buf, sizeof(buf), &nd->ents[k], 1);
        outf("%s", buf);
    }
}

static void cmd_compact(struct node *nd, raft_index index)
{
    char data[32];
    snprintf(data, sizeof(data), "snap@%" PRIu64, nd->applied);
    int rc = raft_snapshot_create(nd->r, nd->applied, &nd->conf, data,
                                  strlen(data));
    if (rc == 0) {
        struct raft_snapshot s = {.data = (uint8_t *)data,
                                  .len = strlen(data)};
        s.meta.index = nd->applied;
        raft_term_at(nd->r, nd->applied, &s.meta.term);
        s.meta.conf = nd->conf;
        /* keep the disk in step: entries up to the snapshot go */
        size_t k = (size_t)(nd->applied - nd->snap.meta.index);
        if (k > nd->n_ents)
            k = nd->n_ents;
        for (size_t j = 0; j < k; j++)
            free(nd->ents[j].data);
        memmove(nd->ents, nd->ents + k, (nd->n_ents - k) * sizeof(*nd->ents));
        nd->n_ents -= k;
        disk_snap(nd, &s);
        rc = raft_log_compact(nd->r, index);
    }
    if (rc != 0)
        outf("error: %s", err_name(rc));
    else
        outf("snapshot at %" PRIu64 ", log compacted to %" PRIu64,
             nd->applied, index);
}

static bool stabilize_round(int argc, char **argv)
{
    bool any = false;
    for (int i = 1; i <= n_nodes; i++) {
        bool listed = argc <= 1;
        for (int k = 1; k < argc; k++)
            listed |= atoi(argv[k]) == i;
        if (listed)
            any |= process_ready(&nodes[i]);
    }
    for (int i = 1; i <= n_nodes; i++) {
        bool listed = argc <= 1;
        for (int k = 1; k < argc; k++)
            listed |= atoi(argv[k]) == i;
        if (listed)
            any |= deliver(&nodes[i], false);
    }
    return any;
}

static void run(int argc, char **argv)
{
    const char *c = argv[0];
    struct node *nd = NULL;
    bool needs_node = strcmp(c, "add-nodes") && strcmp(c, "stabilize") &&
                      strcmp(c, "process-ready") && strcmp(c, "recover") &&
                      strcmp(c, "deliver-msgs") && strcmp(c, "raft-state") &&
                      strcmp(c, "log-level");
    if (needs_node && (argc < 2 || (nd = node_of(argv[1])) == NULL))
        return;
    int rc = 0;
    if (!strcmp(c, "add-nodes")) {
        cmd_add_nodes(argc, argv);
    } else if (!strcmp(c, "log-level")) {
        log_level = !strcmp(argv[1], "debug") ? 0
                    : !strcmp(argv[1], "info") ? 1 : 9;
    } else if (!strcmp(c, "campaign")) {
        rc = raft_campaign(nd->r);
    } else if (!strcmp(c, "propose")) {
        rc = raft_propose(nd->r, argv[2], strlen(argv[2]));
    } else if (!strcmp(c, "read-index")) {
        rc = raft_read_index(nd->r, argv[2], strlen(argv[2]));
    } else if (!strcmp(c, "propose-conf-change")) {
        cmd_conf_change(nd, argc, argv);
    } else if (!strcmp(c, "tick-election") || !strcmp(c, "tick-heartbeat") ||
               !strcmp(c, "tick")) {
        int n = c[5] == 'e' ? nd->cfg.election_tick
                : c[5] == 'h' ? nd->cfg.heartbeat_tick : atoi(argv[2]);
        for (int i = 0; i < n; i++)
            raft_tick(nd->r);
    } else if (!strcmp(c, "process-ready")) {
        for (int i = 1; i < argc; i++)
            if ((nd = node_of(argv[i])) != NULL)
                process_ready(nd);
    } else if (!strcmp(c, "deliver-msgs")) {
        bool drop = argc > 1 && !strcmp(argv[1], "drop=true");
        for (int i = drop ? 2 : 1; i < argc; i++)
            if ((nd = node_of(argv[i])) != NULL)
                deliver(nd, drop);
    } else if (!strcmp(c, "stabilize")) {
        while (stabilize_round(argc, argv)) {
        }
    } else if (!strcmp(c, "isolate")) {
        nd->isolated = true;
    } else if (!strcmp(c, "recover")) {
        for (int i = 1; i <= n_nodes; i++)
            nodes[i].isolated = false;
    } else if (!strcmp(c, "transfer-leader")) {
        rc = raft_transfer_leader(nd->r, strtoull(argv[2], NULL, 10));
    } else if (!strcmp(c, "report-unreachable")) {
        rc = raft_report_unreachable(nd->r, strtoull(argv[2], NULL, 10));
    } else if (!strcmp(c, "report-snapshot")) {
        rc = raft_report_snapshot(nd->r, strtoull(argv[2], NULL, 10),
                                  !strcmp(argv[3], "ok"));
    } else if (!strcmp(c, "compact")) {
        cmd_compact(nd, strtoull(argv[2], NULL, 10));
    } else if (!strcmp(c, "restart")) {
        raft_close(nd->r);
        free(nd->r);
        struct mbox *b = &boxes[nd->id];
        for (size_t k = 0; k < b->n; k++)
            free(b->bufs[k]);
        b->n = 0;
        start(nd);
    } else if (!strcmp(c, "status")) {
        cmd_status(nd);
    } else if (!strcmp(c, "raft-state")) {
        cmd_raft_state();
    } else if (!strcmp(c, "raft-log")) {
        cmd_raft_log(nd);
    } else {
        outf("unknown command %s", c);
    }
    if (rc != 0)
        outf("error: %s", err_name(rc));
}

static void reset_cluster(void)
{
    for (int i = 1; i <= n_nodes; i++) {
        struct node *nd = &nodes[i];
        raft_close(nd->r);
        free(nd->r);
        for (size_t k = 0; k < nd->n_ents; k++)
            free(nd->ents[k].data);
        free(nd->ents);
        free(nd->snap.data);
        struct mbox *b = &boxes[i];
        for (size_t k = 0; k < b->n; k++)
            free(b->bufs[k]);
        free(b->bufs);
        free(b->lens);
        memset(b, 0, sizeof(*b));
    }
    n_nodes = 0;
    log_level = 1;
}

/* Runs one script; returns the number of mismatching blocks. */
static int run_file(const char *path, bool rewrite)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        perror(path);
        return 1;
    }
    char *text = NULL;
    size_t cap = 0, len = 0;
    char chunk[4096];
    size_t r;
    while ((r = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        text = realloc(text, cap = len + r + 1);
        memcpy(text + len, chunk, r);
        len += r;
    }
    fclose(f);
    if (text == NULL)
        return 0;
    text[len] = 0;
    char *res = NULL;
    size_t res_len = 0;
    FILE *w = open_memstream(&res, &res_len);
    int fails = 0, lineno = 0;
    char *p = text;
    while (*p) {
        char *nl = strchr(p, '\n');
        char *line = p;
        if (nl) { *nl = 0; p = nl + 1; } else { p += strlen(p); }
        lineno++;
        if (line[0] == 0 || line[0] == '#') {
            fprintf(w, "%s\n", line);
            continue;
        }
        /* command; then "----"; then expected until blank line */
        char cmd[1024];
        snprintf(cmd, sizeof(cmd), "%s", line);
        int cmd_line = lineno;
        char *exp = NULL;
        size_t exp_len = 0;
        FILE *e = open_memstream(&exp, &exp_len);
        nl = strchr(p, '\n');
        if (nl && !strncmp(p, "----", 4)) {
            p = nl + 1;
            lineno++;
            while (*p && *p != '\n') {
                nl = strchr(p, '\n');
                size_t l = nl ? (size_t)(nl - p) : strlen(p);
                fwrite(p, 1, l, e);
                fputc('\n', e);
                p += l + (nl ? 1 : 0);
                lineno++;
            }
        }
        fclose(e);
        char *argv[64];
        int argc = 0;
        for (char *t = strtok(line, " "); t && argc < 64; t = strtok(NULL, " "))
            argv[argc++] = t;
        out_len = 0;
        if (out == NULL) {
            out_cap = 4096;
            out = malloc(out_cap);
        }
        run(argc, argv);
        if (out_len == 0)
            outf("ok");
        out[out_len] = 0;
        if (strcmp(out, exp) != 0) {
            fails++;
            if (!rewrite)
                fprintf(stderr, "%s:%d: %s\n--- expected\n%s--- got\n%s\n",
                        path, cmd_line, cmd, exp, out);
        }
        fprintf(w, "%s\n----\n%s", cmd, out);
        if (*p == '\n') {
            fprintf(w, "\n");
            p++;
            lineno++;
        }
        free(exp);
    }
    fclose(w);
    if (rewrite) {
        f = fopen(path, "w");
        fwrite(res, 1, res_len, f);
        fclose(f);
    }
    free(res);
    free(text);
    reset_cluster();
    return rewrite ? 0 : fails;
}

int main(int argc, char **argv)
{
    bool rewrite = false;
    int fails = 0, files = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rewrite")) {
            rewrite = true;
            continue;
        }
        files++;
        int f = run_file(argv[i], rewrite);
        if (f)
            fprintf(stderr, "FAIL %s (%d blocks)\n", argv[i], f);
        fails += f;
    }
    printf("%s: %d scripts\n", fails ? "FAIL" : "ok", files);
    return fails ? 1 : 0;
}
