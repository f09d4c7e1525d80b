/*
 * peers.c - the member's end of the peer transport (src/peer): incoming
 * raft messages go to the raft thread's inbox, losses and snapshot outcomes
 * are reported to raft by the raft thread, and the raft thread's messages
 * leave through peer_send.  The transport asks the members store whether
 * an unknown sender was removed (it then refuses it as such) and tells us
 * when a peer refuses this member as removed (it then stops).  Snapshots
 * of the store arrive as verified files in <member>/snap and are installed
 * through snapshot.c.
 */
#include <stdio.h>
#include <string.h>

#include "peer/peer.h"
#include "server/server_int.h"
#include "util/err.h"
#include "util/log.h"

static void on_messages(void *arg, raft_id from, const struct raft_msg *msgs,
                        size_t n)
{
    struct server *s = arg;
    (void)from;
    for (size_t i = 0; i < n; i++)
        server__raft_receive(s, &msgs[i]);
    server__raft_poke(s);
}

/* Reports for raft (it belongs to the raft_mu holder): a short list of ids,
 * de-duplicated; a lost report only delays raft's back-off. */
static void note_report(struct server *s, raft_id id, int kind)
{
    pthread_mutex_lock(&s->node.ev_mu);
    for (size_t i = 0; i < s->node.n_reports; i++)
        if (s->node.reports[i].id == id && s->node.reports[i].kind == kind)
            goto out;
    if (s->node.n_reports < SERVER_MEMBERS_MAX * 3)
        s->node.reports[s->node.n_reports++] = (struct server_report){id, kind};
    s->node.ev = true;
    pthread_cond_signal(&s->node.ev_cv);
out:
    pthread_mutex_unlock(&s->node.ev_mu);
}

static void on_unreachable(void *arg, raft_id id)
{
    note_report(arg, id, SERVER_REPORT_UNREACHABLE);
}

static void on_snapshot_status(void *arg, raft_id to, bool ok)
{
    note_report(arg, to, ok ? SERVER_REPORT_SNAP_OK : SERVER_REPORT_SNAP_FAIL);
}

static int on_snapshot(void *arg, raft_id from, const struct raft_msg *m,
                       const char *path)
{
    (void)from; /* m->from */
    return server__snap_received(arg, m, path);
}

static bool is_removed(void *arg, raft_id id)
{
    return server__member_id_removed(arg, id);
}

static void on_removed(void *arg, raft_id by)
{
    server__member_removed_by(arg, by);
}

static void send_one(void *arg, const struct raft_msg *m)
{
    struct server *s = arg;
    peer_send(s->transport, m, 1);
}

static int add_member(struct server *s, const struct server_member *m)
{
    char buf[sizeof m->peer_urls];
    const char *urls[PEER_URLS_MAX];
    size_t n = 0;
    snprintf(buf, sizeof buf, "%s", m->peer_urls);
    for (char *save, *t = strtok_r(buf, ",", &save); t && n < PEER_URLS_MAX;
         t = strtok_r(NULL, ",", &save))
        urls[n++] = t;
    int rc = peer_add(s->transport, m->id, urls, n);
    if (rc != 0)
        log_error("etcdserver", "cannot add peer %s (%016llx) at %s: %s",
                  m->name, (unsigned long long)m->id, m->peer_urls,
                  err_str(rc));
    return rc;
}

int server__peers_open(struct server *s, struct rpc_server *srv)
{
    if (srv == NULL)
        return s->n_members == 1 ? 0 : ERR_INVAL;
    struct peer_config pc;
    memset(&pc, 0, sizeof pc);
    pc.self = s->member_id;
    pc.cluster_id = s->cluster_id;
    char snap_dir[sizeof s->member_dir + 8];
    snprintf(snap_dir, sizeof snap_dir, "%s/snap", s->member_dir);
    pc.snap_dir = snap_dir; /* copied; made by server__snap_open */
    pc.tls = s->cfg.peer_tls; /* copied */
    pc.cb = (struct peer_callbacks){.arg = s,
                                    .on_messages = on_messages,
                                    .on_unreachable = on_unreachable,
                                    .on_snapshot = on_snapshot,
                                    .on_snapshot_status = on_snapshot_status,
                                    .is_removed = is_removed,
                                    .on_removed = on_removed};
    int rc = peer_transport_create(&pc, &s->transport);
    if (rc == 0)
        rc = peer_transport_register(s->transport, srv);
    for (size_t i = 0; rc == 0 && i < s->n_members; i++)
        if (s->members[i].id != s->member_id)
            rc = add_member(s, &s->members[i]);
    if (rc == 0) {
        s->node.send_fn = send_one;
        s->node.send_arg = s;
    }
    return rc;
}

void server__peers_close(struct server *s)
{
    peer_transport_close(s->transport);
    s->transport = NULL;
}
