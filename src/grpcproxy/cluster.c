/*
 * cluster.c - the proxy's Cluster.MemberList and its registration under
 * --resolver-prefix, as etcd 3.4's proxy (cluster.go, register.go):
 *   - with an advertise address, MemberList lists the proxies registered
 *     under the prefix (each a member with its name and one client URL,
 *     nothing else, no header), or this proxy alone (the host name and
 *     the advertise address) when there is none or no prefix;
 *   - the registration: a lease of --resolver-ttl seconds, the key
 *     "<prefix>/<addr>" holding clientv3/naming/endpoints' JSON
 *     ({"Op":0,"Addr":"<addr>","Metadata":"{\"name\":\"<host>\"}"}),
 *     kept alive; when the lease is lost a new one is made (at most one
 *     attempt a second, as etcd's rate limiter).
 * Better than etcd 3.4.23: etcd keeps the registrations it watched in a
 * map and, on a deleted key, deletes the map entry of the empty address
 * (the delete event has none), so a proxy that went away stays listed
 * until the others restart.  Here MemberList reads the prefix
 * (serializable) at each call: a key that is gone is not listed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "etcdserverpb/rpc.pb-c.h"
#include "grpcproxy/grpcproxy_int.h"
#include "util/log.h"
#include "util/mem.h"

#define MEMBERS_MAX 1024

/* reply_members answers call with members (addr, name) n. */
static void reply_members(struct rpc_call *call, char **addrs, char **names,
                          size_t n)
{
    Etcdserverpb__MemberListResponse resp =
        ETCDSERVERPB__MEMBER_LIST_RESPONSE__INIT;
    Etcdserverpb__Member *ms = mem_calloc(n, sizeof *ms);
    Etcdserverpb__Member **mp = mem_calloc(n, sizeof *mp);

    if (n > 0 && (ms == NULL || mp == NULL)) {
        mem_free(ms);
        mem_free(mp);
        rpc_call_reply_error(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
                             "grpc-proxy: out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        etcdserverpb__member__init(&ms[i]);
        ms[i].name = names[i];
        ms[i].n_clienturls = 1;
        ms[i].clienturls = &addrs[i];
        mp[i] = &ms[i];
    }
    resp.n_members = n;
    resp.members = mp;
    rpc_call_reply(call, &resp.base);
    mem_free(ms);
    mem_free(mp);
}

static void reply_self(struct grpcproxy *p, struct rpc_call *call)
{
    char *addr = p->advertise, *name = p->hostname;

    reply_members(call, &addr, &name, 1);
}

/* One registration's value: its address and its metadata's name, or
 * false when the value is not endpoints' JSON (etcd skips those). */
static bool parse_value(const uint8_t *v, size_t len, char **addr_out,
                        char **name_out)
{
    struct json_tokener *tok = json_tokener_new();
    struct json_object *o, *a, *m, *mo = NULL, *nm;
    bool ok = false;

    *addr_out = *name_out = NULL;
    if (tok == NULL)
        return false;
    o = json_tokener_parse_ex(tok, (const char *)v, (int)len);
    if (o != NULL && json_object_object_get_ex(o, "Addr", &a) &&
        json_object_is_type(a, json_type_string)) {
        const char *name = "";
        /* Metadata is a JSON string holding {"name": ...}; a bad one makes
         * etcd's MemberList fail (decodeMeta), here the name is "". */
        if (json_object_object_get_ex(o, "Metadata", &m) &&
            json_object_is_type(m, json_type_string)) {
            mo = json_tokener_parse(json_object_get_string(m));
            if (mo != NULL && json_object_object_get_ex(mo, "name", &nm) &&
                json_object_is_type(nm, json_type_string))
                name = json_object_get_string(nm);
        }
        *addr_out = strdup(json_object_get_string(a));
        *name_out = strdup(name);
        ok = *addr_out != NULL && *name_out != NULL;
    }
    if (mo != NULL)
        json_object_put(mo);
    if (o != NULL)
        json_object_put(o);
    json_tokener_free(tok);
    if (!ok) {
        free(*addr_out);
        free(*name_out);
        *addr_out = *name_out = NULL;
    }
    return ok;
}

struct list_call {
    struct grpcproxy *p;
    struct rpc_call *call;
};

static void list_done(void *arg, const struct cetcd_status *st,
                      const uint8_t *resp, size_t len)
{
    struct list_call *lc = arg;
    Etcdserverpb__RangeResponse *r = NULL;
    char *addrs[MEMBERS_MAX], *names[MEMBERS_MAX];
    size_t n = 0;

    if (st->code == 0)
        r = etcdserverpb__range_response__unpack(NULL, len, resp);
    for (size_t i = 0; r != NULL && i < r->n_kvs && n < MEMBERS_MAX; i++)
        if (parse_value(r->kvs[i]->value.data, r->kvs[i]->value.len,
                        &addrs[n], &names[n]))
            n++;
    if (n > 0)
        reply_members(lc->call, addrs, names, n);
    else
        reply_self(lc->p, lc->call);
    for (size_t i = 0; i < n; i++) {
        free(addrs[i]);
        free(names[i]);
    }
    if (r != NULL)
        etcdserverpb__range_response__free_unpacked(r, NULL);
    mem_free(lc);
}

/* prefix_end: etcd's GetPrefixRangeEnd of key (n bytes) into out; its
 * length (0: every key from key on, written as "\0"). */
static size_t prefix_end(const char *key, size_t n, uint8_t *out)
{
    memcpy(out, key, n);
    while (n > 0) {
        if ((uint8_t)out[n - 1] < 0xff) {
            out[n - 1]++;
            return n;
        }
        n--;
    }
    out[0] = 0;
    return 1;
}

bool gp_member_list(struct grpcproxy *p, struct rpc_call *call)
{
    Etcdserverpb__RangeRequest rr = ETCDSERVERPB__RANGE_REQUEST__INIT;
    struct cetcd_raw_opts o;
    struct list_call *lc;
    uint8_t *req, *end;
    size_t plen, len;

    if (p->advertise == NULL)
        return false;
    if (p->prefix == NULL) {
        reply_self(p, call);
        return true;
    }
    plen = strlen(p->prefix);
    end = mem_malloc(plen + 1);
    lc = mem_calloc(1, sizeof *lc);
    if (end == NULL || lc == NULL) {
        mem_free(end);
        mem_free(lc);
        reply_self(p, call);
        return true;
    }
    rr.key.data = (uint8_t *)p->prefix;
    rr.key.len = plen;
    rr.range_end.data = end;
    rr.range_end.len = prefix_end(p->prefix, plen, end);
    rr.serializable = 1;
    len = etcdserverpb__range_request__get_packed_size(&rr);
    req = mem_malloc(len + 1);
    if (req == NULL) {
        mem_free(end);
        mem_free(lc);
        reply_self(p, call);
        return true;
    }
    etcdserverpb__range_request__pack(&rr, req);
    mem_free(end);
    *lc = (struct list_call){.p = p, .call = call};
    memset(&o, 0, sizeof o);
    o.deadline_mono_ns = rpc_call_deadline_ns(call);
    if (cetcd_async_call_raw(p->cli, p->q, "/etcdserverpb.KV/Range", req,
                             len, &o, list_done, lc) != 0) {
        mem_free(lc);
        reply_self(p, call);
    }
    mem_free(req);
    return true;
}
