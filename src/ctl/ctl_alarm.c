/*
 * ctl_alarm.c - "alarm list" and "alarm disarm": etcdctl 3.4's view of
 * the cluster's alarms (NOSPACE, CORRUPT).
 *
 * "disarm" is clientv3's AlarmDisarm with no member and no alarm given: it
 * lists the alarms, then deactivates each one by its own request, and
 * answers with the alarms those requests returned and no header (the
 * response clientv3 builds itself).
 */
#include <assert.h>
#include <stdlib.h>

#include "ctl/commands.h"
#include "ctl/print.h"
#include "etcdserverpb/rpc.pb-c.h"

#define ALARM_METHOD "/etcdserverpb.Maintenance/Alarm"

/* alarm_call sends one AlarmRequest; exits on failure. */
static Etcdserverpb__AlarmResponse *
alarm_call(Etcdserverpb__AlarmRequest__AlarmAction action, uint64_t member,
           Etcdserverpb__AlarmType type)
{
    Etcdserverpb__AlarmRequest req = ETCDSERVERPB__ALARM_REQUEST__INIT;
    req.action = action;
    req.memberid = member;
    req.alarm = type;
    return (Etcdserverpb__AlarmResponse *)ctl_call(
        ALARM_METHOD, &req.base, &etcdserverpb__alarm_response__descriptor);
}

/* alarm_print is etcdctl's display.Alarm. */
static void alarm_print(enum ctl_output o, const Etcdserverpb__AlarmResponse *r)
{
    switch (o) {
    case CTL_OUT_SIMPLE: /* Go's %+v of each AlarmMember: its String() */
        for (size_t i = 0; i < r->n_alarms; i++) {
            ctl_text_message(stdout, &r->alarms[i]->base);
            fputc('\n', stdout);
        }
        break;
    case CTL_OUT_FIELDS:
        /* etcdctl 3.4 dereferences the header here and panics when there
         * is none (always after disarm, and for a list etcd answers without
         * one); we print its fields as zeros instead. */
        ctl_fields_alarm(stdout, r);
        break;
    default:
        ctl_cluster_print_rpc(o, &r->base);
    }
}

static int list_run(int argc, char **argv)
{
    (void)argv;
    if (argc != 0)
        ctl_exit(CTL_EXIT_BAD_ARGS, "alarm list command accepts no "
                                    "arguments");
    enum ctl_output o = ctl_output_format();
    Etcdserverpb__AlarmResponse *r =
        alarm_call(ETCDSERVERPB__ALARM_REQUEST__ALARM_ACTION__GET, 0,
                   ETCDSERVERPB__ALARM_TYPE__NONE);
    alarm_print(o, r);
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return CTL_EXIT_SUCCESS;
}

/* disarm_all deactivates every alarm of list, one request each, and
 * returns the responses (list->n_alarms of them; the caller frees). */
static Etcdserverpb__AlarmResponse **
disarm_all(const Etcdserverpb__AlarmResponse *list)
{
    Etcdserverpb__AlarmResponse **keep =
        calloc(list->n_alarms + 1, sizeof *keep);
    if (!keep)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    for (size_t i = 0; i < list->n_alarms; i++) {
        const Etcdserverpb__AlarmMember *a = list->alarms[i];
        keep[i] = alarm_call(
            ETCDSERVERPB__ALARM_REQUEST__ALARM_ACTION__DEACTIVATE,
            a->memberid, a->alarm);
    }
    return keep;
}

static int disarm_run(int argc, char **argv)
{
    (void)argv;
    if (argc != 0)
        ctl_exit(CTL_EXIT_BAD_ARGS, "alarm disarm command accepts no "
                                    "arguments");
    enum ctl_output o = ctl_output_format();
    Etcdserverpb__AlarmResponse *list =
        alarm_call(ETCDSERVERPB__ALARM_REQUEST__ALARM_ACTION__GET, 0,
                   ETCDSERVERPB__ALARM_TYPE__NONE);
    Etcdserverpb__AlarmResponse **keep = disarm_all(list);
    size_t total = 0;
    for (size_t i = 0; i < list->n_alarms; i++)
        total += keep[i]->n_alarms;
    Etcdserverpb__AlarmResponse ret = ETCDSERVERPB__ALARM_RESPONSE__INIT;
    ret.alarms = calloc(total + 1, sizeof *ret.alarms);
    if (!ret.alarms)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    for (size_t i = 0; i < list->n_alarms; i++)
        for (size_t k = 0; k < keep[i]->n_alarms; k++)
            ret.alarms[ret.n_alarms++] = keep[i]->alarms[k];
    assert(ret.n_alarms == total);
    alarm_print(o, &ret);
    for (size_t i = 0; i < list->n_alarms; i++)
        protobuf_c_message_free_unpacked(&keep[i]->base, NULL);
    protobuf_c_message_free_unpacked(&list->base, NULL);
    free(keep);
    free(ret.alarms);
    return CTL_EXIT_SUCCESS;
}

static const struct ctl_cmd disarm_cmd = {
    .use = "disarm",
    .short_desc = "Disarms all alarms",
    .run = disarm_run,
};

static const struct ctl_cmd list_cmd = {
    .use = "list",
    .short_desc = "Lists all alarms",
    .run = list_run,
};

static const struct ctl_cmd *const alarm_subs[] = {
    &disarm_cmd, &list_cmd, NULL,
};

const struct ctl_cmd ctl_cmd_alarm = {
    .use = "alarm <subcommand>",
    .short_desc = "Alarm related commands",
    .subs = alarm_subs,
};
