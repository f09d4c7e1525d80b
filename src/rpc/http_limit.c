/*
 * http_limit.c - a bound on the HTTP requests served at once under some
 * path prefixes (rpc.h rpc_server_set_http_limit): etcd's /v3 gateway is
 * a gRPC client of its own server over one connection, so
 * --max-concurrent-streams bounds the gateway's calls and streams
 * together; a request past the bound waits until one of them ends (or
 * its client goes away), as grpc-go's client waits for stream quota.
 *
 * A request that must wait is PARKED on the server's list (one mutex:
 * requests come from every loop, slots are given back from any thread).
 * A slot given back goes straight to the first parked request, which is
 * pushed onto its loop's inbox and dispatched there again
 * (rpc__call_redispatch): a new request cannot take it in between.  A
 * parked request whose connection ends is unlinked and freed by its loop.
 */
#include <assert.h>
#include <string.h>

#include "rpc/rpc_int.h"

void rpc_server_set_http_limit(struct rpc_server *srv, uint32_t limit,
                               const char *const *prefixes)
{
    assert(srv != NULL && !srv->started && prefixes != NULL);
    srv->http_limit = limit;
    srv->http_limit_prefixes = prefixes;
}

/* limited: call's path is under one of the prefixes. */
static bool limited(const struct rpc_server *srv, const struct rpc_call *call)
{
    size_t n = 0;
    const char *p = rpc__hdrs_find(&call->hdrs, ":path", &n);
    if (p == NULL)
        return false;
    for (const char *const *x = srv->http_limit_prefixes; *x != NULL; x++) {
        size_t k = strlen(*x);
        if (n >= k && memcmp(p, *x, k) == 0)
            return true;
    }
    return false;
}

bool rpc__http_slot_take(struct rpc_call *call)
{
    struct rpc_server *srv = call->conn->loop->srv;
    assert(call->http && call->state == RPC__CALL_HANDLER);
    if (srv->http_limit == 0 || call->http_slot || !limited(srv, call))
        return true;
    pthread_mutex_lock(&srv->park_mu);
    bool free_slot = srv->http_slots_used < srv->http_limit;
    if (free_slot) {
        srv->http_slots_used++;
        call->http_slot = true;
    } else {
        call->state = RPC__CALL_PARKED;
        call->parked = true;
        call->park_next = NULL;
        if (srv->park_tail != NULL)
            srv->park_tail->park_next = call;
        else
            srv->park_head = call;
        srv->park_tail = call;
    }
    pthread_mutex_unlock(&srv->park_mu);
    return free_slot;
}

void rpc__http_slot_give(struct rpc_server *srv)
{
    pthread_mutex_lock(&srv->park_mu);
    struct rpc_call *w = srv->park_head;
    if (w != NULL) {
        srv->park_head = w->park_next;
        if (srv->park_head == NULL)
            srv->park_tail = NULL;
        w->parked = false;
        w->http_slot = true; /* the slot passes to it */
    } else {
        assert(srv->http_slots_used > 0);
        srv->http_slots_used--;
    }
    pthread_mutex_unlock(&srv->park_mu);
    /* w is its loop's now (off the list): its connection may end, which
     * only marks it gone until the loop takes it from the inbox. */
    if (w != NULL)
        rpc__loop_push(w->conn->loop, &w->item);
}

bool rpc__call_parked_closed(struct rpc_call *call)
{
    struct rpc_server *srv = call->conn->loop->srv;
    assert(call->state == RPC__CALL_PARKED);
    pthread_mutex_lock(&srv->park_mu);
    bool on_list = call->parked;
    if (on_list) {
        struct rpc_call **pp = &srv->park_head, *prev = NULL;
        while (*pp != call) {
            prev = *pp;
            pp = &(*pp)->park_next;
        }
        *pp = call->park_next;
        if (srv->park_tail == call)
            srv->park_tail = prev;
        call->parked = false;
    }
    pthread_mutex_unlock(&srv->park_mu);
    if (!on_list)
        return false; /* on its way through the inbox: freed there */
    atomic_fetch_sub(&srv->active_n, 1);
    call->state = RPC__CALL_SUBMITTED;
    rpc__call_free(call);
    return true;
}
