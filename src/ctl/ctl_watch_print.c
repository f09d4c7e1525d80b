/*
 * ctl_watch_print.c - the output of "watch" (etcdctl's display.Watch): a
 * watch response in the simple (with --hex), json, protobuf and fields
 * formats, written to stdout and flushed at once, as a watch streams.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "ctl/ctl_watch.h"
#include "ctl/print.h"
#include "etcdserverpb/rpc.pb-c.h"

void ctl_watch__flush_out(void)
{
    if (fflush(stdout) == 0 || errno != EPIPE)
        return;
    signal(SIGPIPE, SIG_DFL);
    raise(SIGPIPE);
    exit(CTL_EXIT_ERROR);
}

/* A response in the protobuf-c form the printers take, pointing into the
 * libcetcd response it was built from. */
struct pb_watch {
    Etcdserverpb__WatchResponse r;  /* the response */
    Etcdserverpb__ResponseHeader h; /* its header */
    Mvccpb__Event *ev;              /* r.n_events events */
    Mvccpb__Event **evp;            /* r.events: pointers to them */
    Mvccpb__KeyValue *kv;           /* 2 per event: kv, prev_kv */
};

static void kv_to_pb(const struct cetcd_kv *in, Mvccpb__KeyValue *out)
{
    *out = (Mvccpb__KeyValue)MVCCPB__KEY_VALUE__INIT;
    out->key.data = (uint8_t *)in->key;
    out->key.len = in->key_len;
    out->value.data = (uint8_t *)in->value;
    out->value.len = in->value_len;
    out->create_revision = in->create_revision;
    out->mod_revision = in->mod_revision;
    out->version = in->version;
    out->lease = in->lease;
}

static void pb_build(struct pb_watch *p, const struct cetcd_watch_response *r)
{
    size_t n = r->events_len;
    p->r = (Etcdserverpb__WatchResponse)ETCDSERVERPB__WATCH_RESPONSE__INIT;
    p->h = (Etcdserverpb__ResponseHeader)ETCDSERVERPB__RESPONSE_HEADER__INIT;
    p->h.cluster_id = r->header.cluster_id;
    p->h.member_id = r->header.member_id;
    p->h.revision = r->header.revision;
    p->h.raft_term = r->header.raft_term;
    p->ev = calloc(n + 1, sizeof *p->ev);
    p->evp = calloc(n + 1, sizeof *p->evp);
    p->kv = calloc(2 * n + 1, sizeof *p->kv);
    if (!p->ev || !p->evp || !p->kv)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const struct cetcd_watch_event *e = &r->events[i];
        p->ev[i] = (Mvccpb__Event)MVCCPB__EVENT__INIT;
        p->ev[i].type = (Mvccpb__Event__EventType)e->type;
        kv_to_pb(&e->kv, &p->kv[2 * i]);
        p->ev[i].kv = &p->kv[2 * i];
        if (e->has_prev_kv) {
            kv_to_pb(&e->prev_kv, &p->kv[2 * i + 1]);
            p->ev[i].prev_kv = &p->kv[2 * i + 1];
        }
        p->evp[i] = &p->ev[i];
    }
    p->r.header = &p->h;
    p->r.n_events = n;
    p->r.events = p->evp;
    p->r.compact_revision = r->compact_revision;
    p->r.canceled = r->canceled;
    p->r.created = r->created;
}

static void pb_free(struct pb_watch *p)
{
    free(p->ev);
    free(p->evp);
    free(p->kv);
}

/* event_type writes mvccpb.Event_EventType's String(). */
static void event_type(FILE *f, int type)
{
    if (type == CETCD_EVENT_PUT)
        fputs("PUT", f);
    else if (type == CETCD_EVENT_DELETE)
        fputs("DELETE", f);
    else
        fprintf(f, "%d", type);
}

static void show_simple(const Etcdserverpb__WatchResponse *r)
{
    for (size_t i = 0; i < r->n_events; i++) {
        event_type(stdout, r->events[i]->type);
        fputc('\n', stdout);
        if (r->events[i]->prev_kv)
            ctl_simple_kv(stdout, ctl_g.hex, false, r->events[i]->prev_kv);
        ctl_simple_kv(stdout, ctl_g.hex, false, r->events[i]->kv);
    }
}

void ctl_watch__display(enum ctl_output out,
                        const struct cetcd_watch_response *r)
{
    struct pb_watch p = {0};
    Etcdserverpb__WatchResponse zero = ETCDSERVERPB__WATCH_RESPONSE__INIT;
    const Etcdserverpb__WatchResponse *m = &zero;
    zero.canceled = true;
    if (r) {
        pb_build(&p, r);
        m = &p.r;
    }
    switch (out) {
    case CTL_OUT_SIMPLE:
        show_simple(m);
        break;
    case CTL_OUT_JSON:
        ctl_json_watch_response(stdout, m, r == NULL);
        break;
    case CTL_OUT_PROTOBUF:
        ctl_pb_watch_response(stdout, m);
        break;
    case CTL_OUT_FIELDS:
        ctl_fields_watch(stdout, m);
        break;
    case CTL_OUT_TABLE:
        ctl_exit(CTL_EXIT_BAD_FEATURE, "table not supported as output format");
    }
    if (r)
        pb_free(&p);
    ctl_watch__flush_out();
}
