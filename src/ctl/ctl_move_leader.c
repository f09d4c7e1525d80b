/*
 * ctl_move_leader.c - "move-leader <transferee-member-id>": etcdctl 3.4
 * asks each endpoint in turn for its Status until it finds the one that
 * is the leader, and sends MoveLeader there (only the leader can hand its
 * leadership over).
 */
#include <assert.h>
#include <string.h>

#include "ctl/commands.h"
#include "ctl/print.h"
#include "etcdserverpb/rpc.pb-c.h"

/* call sends one unary call on c; exits with etcdctl's error line. */
static ProtobufCMessage *call(struct cetcd_client *c, const char *method,
                              const ProtobufCMessage *req,
                              const ProtobufCMessageDescriptor *desc)
{
    ProtobufCMessage *resp = NULL;
    struct cetcd_status st = {0};
    if (ctl_unary(c, method, req, desc, &resp, &st) != 0)
        ctl_exit_status(CTL_EXIT_ERROR, &st);
    assert(resp);
    return resp;
}

/* no_leader exits as etcdctl does when no endpoint is the leader: the
 * endpoints as Go's %v of a []string. */
__attribute__((noreturn)) static void
no_leader(const struct ctl_strings *eps)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    for (size_t i = 0; i < eps->n; i++)
        fprintf(f, "%s%s", i ? " " : "", eps->v[i]);
    fclose(f);
    ctl_exit(CTL_EXIT_BAD_ARGS, "no leader endpoint given at [%s]", text);
}

/* find_leader returns a client on the leader's endpoint and its id. */
static struct cetcd_client *find_leader(uint64_t *leader_out)
{
    const struct ctl_strings *eps = ctl_endpoint_list();
    for (size_t i = 0; i < eps->n; i++) {
        struct cetcd_client *c = ctl_client_for(eps->v[i]);
        Etcdserverpb__StatusRequest req = ETCDSERVERPB__STATUS_REQUEST__INIT;
        Etcdserverpb__StatusResponse *s =
            (Etcdserverpb__StatusResponse *)call(
                c, "/etcdserverpb.Maintenance/Status", &req.base,
                &etcdserverpb__status_response__descriptor);
        uint64_t me = s->header ? s->header->member_id : 0;
        bool leader = me == s->leader;
        *leader_out = s->leader;
        protobuf_c_message_free_unpacked(&s->base, NULL);
        if (leader)
            return c;
        cetcd_client_close(c);
    }
    no_leader(eps);
}

static int run(int argc, char **argv)
{
    if (argc != 1)
        ctl_exit(CTL_EXIT_BAD_ARGS, "move-leader command needs 1 argument");
    uint64_t target, leader = 0;
    char err[700];
    if (ctl_cluster_id_parse(argv[0], &target, err, sizeof err) != 0)
        ctl_exit(CTL_EXIT_BAD_ARGS, "%s", err);
    enum ctl_output o = ctl_output_format();
    /* etcdctl makes (and closes) a client on all the endpoints first:
     * with --user, that is where a failed Authenticate stops it */
    (void)ctl_client();
    struct cetcd_client *c = find_leader(&leader);
    Etcdserverpb__MoveLeaderRequest req =
        ETCDSERVERPB__MOVE_LEADER_REQUEST__INIT;
    req.targetid = target;
    ProtobufCMessage *r =
        call(c, "/etcdserverpb.Maintenance/MoveLeader", &req.base,
             &etcdserverpb__move_leader_response__descriptor);
    if (o == CTL_OUT_SIMPLE)
        printf("Leadership transferred from %llx to %llx\n",
               (unsigned long long)leader, (unsigned long long)target);
    else
        ctl_cluster_print_rpc(o, r);
    protobuf_c_message_free_unpacked(r, NULL);
    cetcd_client_close(c);
    return CTL_EXIT_SUCCESS;
}

const struct ctl_cmd ctl_cmd_move_leader = {
    .use = "move-leader <transferee-member-id>",
    .short_desc = "Transfers leadership to another etcd cluster member.",
    .run = run,
};
