/*
 * fuzz_cmd_join.c - goal: the answer a new member gets from the running
 * cluster when it joins (--initial-cluster-state=existing: cetcd's Join
 * service, a cetcdpb.JoinResponse) never crashes it, leaks or trips a
 * sanitizer, whatever its bytes; an answer src/cmd/join.c accepts names
 * this member (by its advertised peer URLs) with non-zero ids, and the
 * members store seeded from it opens, and opens again after a restart
 * with the same table and ids.
 *
 * Method: the real join_fetch runs; the link wraps (--wrap, see
 * fuzz/CMakeLists.txt) the libcetcd calls it makes for each peer URL it
 * asks: cetcd_client_open (which must be given the other members' URLs,
 * one at a time, in --initial-cluster's order), cetcd_call_unary (which
 * checks the JoinRequest, then answers with the input's status and
 * unpacks the input's bytes with the descriptor it is given, as libcetcd
 * does) and cetcd_client_close; and dial_tls_probe, which join.c runs to
 * explain an unreachable TLS peer.  An accepted answer then goes where
 * cetcd.c sends it: server__members_open seeds the store of an empty data
 * dir from it (members_env.h), and a second open, as after a restart,
 * must agree.
 *
 * Input: u8 flags (bits 0-1 this member's advertised peer URLs, bits 2-4
 * how many of the peers asked fail before one answers, bit 5 they fail
 * FAILED_PRECONDITION, as for another cluster token, else UNAVAILABLE),
 * then the JoinResponse bytes.  Seeds: fuzz/seeds.c.
 */
#include <fcntl.h>

#include "cetcd/cetcd.h"
#include "cmd/join.h"
#include "dial/dial.h"
#include "members_env.h"

static const char *const initial_cluster =
    "m1=http://127.0.0.1:2380,m2=unix://m2.sock,m2=http://127.0.0.2:2380,"
    "m3=https://127.0.0.3:2380,m4=http://127.0.0.4:2380";
/* The peers join_fetch asks, in turn. */
static const char *const asked[] = {
    "http://127.0.0.1:2380", "unix://m2.sock", "http://127.0.0.2:2380",
    "https://127.0.0.3:2380"};
#define N_ASKED (sizeof asked / sizeof asked[0])
static const char *const self_urls[] = {
    "http://127.0.0.4:2380",
    "http://127.0.0.4:2380,unix://m4.sock",
    "unix://m4.sock,http://127.0.0.4:2380",
    "http://127.0.0.4:2380,http://127.0.0.4:2380",
};

/* What the fake peers answer. */
static struct {
    size_t failing;    /* the first peers asked fail ... */
    int fail_code;     /* ... with this cetcd_code */
    const uint8_t *p;  /* then one answers these JoinResponse bytes */
    size_t len;
    size_t opens;      /* clients opened */
    size_t calls;      /* calls made */
} answer;

static int fake_client;

int __wrap_cetcd_client_open(const struct cetcd_client_opts *opts,
                             struct cetcd_client **client_out,
                             struct cetcd_status *st)
{
    check(answer.opens < N_ASKED && opts->endpoints != NULL);
    check(strcmp(opts->endpoints, asked[answer.opens]) == 0);
    check(opts->tls == NULL); /* the member has no peer TLS material */
    answer.opens++;
    *client_out = (struct cetcd_client *)&fake_client;
    if (st != NULL)
        memset(st, 0, sizeof *st);
    return 0;
}

void __wrap_cetcd_client_close(struct cetcd_client *c)
{
    check(c == (struct cetcd_client *)&fake_client);
}

int __wrap_cetcd_call_unary(struct cetcd_client *c, const char *method,
                            const ProtobufCMessage *req,
                            const ProtobufCMessageDescriptor *desc,
                            ProtobufCMessage **resp_out,
                            struct cetcd_status *st)
{
    check(c == (struct cetcd_client *)&fake_client);
    check(strcmp(method, "/cetcdpb.Join/Members") == 0);
    check(req->descriptor == &cetcdpb__join_request__descriptor);
    check(strcmp(((const Cetcdpb__JoinRequest *)req)->cluster_token,
                 "fuzz-token") == 0);
    check(desc == &cetcdpb__join_response__descriptor);
    int code = answer.calls++ < answer.failing ? answer.fail_code : CETCD_OK;
    *resp_out = NULL;
    memset(st, 0, sizeof *st);
    if (code == CETCD_OK) {
        *resp_out = protobuf_c_message_unpack(desc, NULL, answer.len,
                                              answer.p);
        if (*resp_out == NULL) /* libcetcd: an undecodable reply */
            code = CETCD_INTERNAL;
    }
    st->code = code;
    if (code != CETCD_OK)
        snprintf(st->message, sizeof st->message, "fuzz");
    return code;
}

int __wrap_dial_tls_probe(const char *target, const struct dial_tls *tls,
                          int timeout_ms, char *why, size_t cap)
{
    check(target != NULL && tls != NULL && timeout_ms > 0);
    snprintf(why, cap, "fuzz: no handshake");
    return ERR_IO;
}

/* same_set: the comma list a holds the URLs of m, in any order. */
static bool same_set(const char *a, const Etcdserverpb__Member *m)
{
    char buf[512];
    size_t n = 0;
    snprintf(buf, sizeof buf, "%s", a);
    for (char *save, *t = strtok_r(buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save), n++) {
        bool found = false;
        for (size_t i = 0; i < m->n_peerurls; i++)
            found = found || strcmp(t, m->peerurls[i]) == 0;
        if (!found)
            return false;
    }
    return n == m->n_peerurls;
}

/* join_check: what join_fetch accepted names us, with non-zero ids. */
static void join_check(const struct join_result *j, const char *self)
{
    const struct server_join *sj = &j->join;
    check(j->resp != NULL && sj->cluster_id != 0 && sj->member_id != 0);
    bool found = false;
    for (size_t i = 0; i < sj->n_members; i++)
        found = found || (sj->members[i]->id == sj->member_id &&
                          same_set(self, sj->members[i]));
    check(found);
}

static int quiet_fd = -1, stderr_fd = -1;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (be == NULL) {
        log_set_level(LOG_FATAL);
        env_build("cmd_join");
        quiet_fd = open("/dev/null", O_WRONLY);
        stderr_fd = dup(2);
        check(quiet_fd >= 0 && stderr_fd >= 0);
    }
    if (size < 1)
        return 0;
    struct server_config cfg = {
        .name = "m4",
        .peer_urls = self_urls[data[0] & 3],
        .cluster_token = "fuzz-token",
        .initial_cluster = initial_cluster,
        .election_ms = 1000,
    };
    answer.failing = (data[0] >> 2) & 7;
    answer.fail_code =
        data[0] & 32 ? CETCD_FAILED_PRECONDITION : CETCD_UNAVAILABLE;
    answer.p = data + 1;
    answer.len = size - 1;
    answer.opens = answer.calls = 0;
    struct join_result j;
    dup2(quiet_fd, 2); /* join_fetch explains refusals on stderr */
    int rc = join_fetch(&cfg, &j);
    dup2(stderr_fd, 2);
    check(answer.calls == answer.opens && answer.calls >= 1);
    if (rc != 0) {
        check(rc == 1 && j.resp == NULL);
        return 0;
    }
    join_check(&j, cfg.peer_urls);
    store_write(NULL, 0);
    ids_write(NULL, 0, false);
    struct server *s = member_new(&j.join);
    check(server__members_open(s) == 0);
    store_check(s);
    reopen_same_free(s);
    join_free(&j);
    return 0;
}
