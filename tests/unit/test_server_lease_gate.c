/*
 * test_server_lease_gate.c - goal: a LeaseTimeToLive with keys that waited
 * for the applier (a barrier) answers even when a snapshot install closes
 * the store gate at that instant.  read.c runs a barrier's callback inside
 * the gate of its probe; the old code entered the gate again there to
 * read the lease's keys, and a gate closed in between (the install waits
 * for the gate's users to leave) made that enter wait for ever: deadlock.
 *
 * Method: a single member; a lease with two keys.  server_barrier_async is
 * wrapped (--wrap): the wrapper plays read.c at its worst moment - it
 * enters the gate, starts a thread that closes it as an install does (that
 * thread waits for the gate's users), waits until the gate is marked
 * closed, then calls the barrier's callback, then leaves the gate.  The
 * barrier path is forced by making the commit index look one ahead of the
 * applied index for the call.  The TimeToLive runs on a thread; the test
 * fails (exit 1, not a hang) when it has not answered within 10 s.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/server.h"
#include "server/server_int.h"
#include "server/snap_int.h"
#include "server_harness.h"
#include "util/err.h"

static char dir[256];
static atomic_bool wrap_on;
static atomic_int wrapped;

void __real_server_barrier_async(struct server *s, server_barrier_fn fn,
                                 void *arg);

static void *closer(void *arg)
{
    struct server *s = arg;
    server__store_gate_close(s); /* waits for the gate's users, as installs */
    server__store_gate_open(s);
    return NULL;
}

static bool gate_closed(struct server *s)
{
    pthread_mutex_lock(&s->snap.gate_mu);
    bool c = s->snap.gate_closed;
    pthread_mutex_unlock(&s->snap.gate_mu);
    return c;
}

void __wrap_server_barrier_async(struct server *s, server_barrier_fn fn,
                                 void *arg)
{
    if (!atomic_load(&wrap_on)) {
        __real_server_barrier_async(s, fn, arg);
        return;
    }
    atomic_fetch_add(&wrapped, 1);
    atomic_store(&s->committed_index, atomic_load(&s->applied_index));
    server__store_enter(s); /* read.c: the probe is served in the gate */
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, closer, s), 0);
    while (!gate_closed(s))
        harness_sleep_ms(1);
    fn(arg, 0); /* read.c: the callback, inside the gate */
    server__store_leave(s);
    pthread_join(t, NULL);
}

static _Atomic int answered;

static void on_done(void *arg, const struct server_response *r)
{
    (void)arg;
    assert_int_equal(r->err, 0);
    atomic_fetch_add(&answered, 1);
}

static void propose(struct server *s, Cetcdpb__InternalRequest *ir)
{
    int before = atomic_load(&answered);
    assert_int_equal(server_propose(s, ir, on_done, NULL), 0);
    for (int i = 0; i < 1000 && atomic_load(&answered) == before; i++)
        harness_sleep_ms(5);
    assert_int_equal(atomic_load(&answered), before + 1);
}

static void grant(struct server *s, int64_t id)
{
    assert_int_equal(harness_lease_grant(s, id, 600), 0);
}

static void put(struct server *s, const char *key, int64_t lease)
{
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key.data = (uint8_t *)key;
    p.key.len = strlen(key);
    p.lease = lease;
    Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
    ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_PUT;
    ir.put = &p;
    propose(s, &ir);
}

struct ttl_out {
    atomic_bool done;
    int err;
    int64_t granted;
    size_t n_keys;
};

static void on_ttl(void *arg, int err, const struct server_lease_ttl *t)
{
    struct ttl_out *o = arg;
    o->err = err;
    o->granted = t != NULL ? t->granted_ttl : 0;
    o->n_keys = t != NULL ? t->n_keys : 0;
    atomic_store(&o->done, true);
}

struct ttl_call {
    struct server *s;
    struct ttl_out *o;
};

static void *ttl_thread(void *arg)
{
    struct ttl_call *c = arg;
    /* The barrier path: the commit index one ahead of the applied one. */
    atomic_store(&c->s->committed_index,
                 atomic_load(&c->s->applied_index) + 1);
    server_lease_time_to_live(c->s, 0x42, true, true, on_ttl, c->o);
    return NULL;
}

static void test_ttl_keys_against_a_closing_gate(void **state)
{
    (void)state;
    struct server_config c = harness_config(dir);
    struct server *s = harness_start(&c);
    harness_wait_published(s);
    for (int i = 0; i < 500 && atomic_load(&s->lead) != s->member_id; i++)
        harness_sleep_ms(10);
    grant(s, 0x42);
    put(s, "a", 0x42);
    put(s, "b", 0x42);
    struct ttl_out o = {0};
    struct ttl_call call = {s, &o};
    atomic_store(&wrap_on, true);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, ttl_thread, &call), 0);
    for (int i = 0; i < 1000 && !atomic_load(&o.done); i++)
        harness_sleep_ms(10);
    if (!atomic_load(&o.done)) {
        fprintf(stderr, "TimeToLive with keys never answered: deadlocked "
                        "against the closing store gate\n");
        _exit(1);
    }
    pthread_join(t, NULL);
    atomic_store(&wrap_on, false);
    assert_int_equal(atomic_load(&wrapped), 1);
    assert_int_equal(o.err, 0);
    assert_int_equal(o.granted, 600);
    assert_int_equal(o.n_keys, 2);
    server_stop(s);
}

static int setup(void **state)
{
    (void)state;
    return harness_dir_make(dir, sizeof dir, "lease-gate");
}

static int teardown(void **state)
{
    (void)state;
    return harness_dir_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ttl_keys_against_a_closing_gate,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
