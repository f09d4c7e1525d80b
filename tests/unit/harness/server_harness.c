/*
 * server_harness.c - the in-process single member of the unit tests
 * (server_harness.h is the manual).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server_harness.h"

int harness_dir_make(char *dir, size_t cap, const char *tag)
{
    snprintf(dir, cap, "/tmp/cetcd-%s-XXXXXX", tag);
    return mkdtemp(dir) != NULL ? 0 : -1;
}

int harness_dir_remove(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

struct server_config harness_config(const char *dir)
{
    return (struct server_config){
        .name = "default",
        .data_dir = dir,
        .peer_urls = "http://localhost:2380",
        .client_urls = "http://localhost:2379",
        .cluster_token = "etcd-cluster",
        .initial_cluster = "default=http://localhost:2380",
        .heartbeat_ms = 100,
        .election_ms = 1000,
        .snapshot_count = 100000,
        .max_request_bytes = 1572864,
        .max_txn_ops = 128,
    };
}

struct server *harness_start(const struct server_config *c)
{
    struct server *s = NULL;
    assert_int_equal(server_start(c, &s), 0);
    return s;
}

void harness_sleep_ms(long ms)
{
    const struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

uint64_t harness_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

void harness_wait_published(struct server *s)
{
    for (int i = 0; i < 500 && !server_published(s); i++)
        harness_sleep_ms(10);
    assert_true(server_published(s));
}

struct answer {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, err;
};

static void answered(void *arg, const struct server_response *r)
{
    struct answer *a = arg;
    pthread_mutex_lock(&a->mu);
    a->err = r->err;
    a->done = 1;
    pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

int harness_propose(struct server *s, Cetcdpb__InternalRequest *ir)
{
    struct answer a = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                       0, 0};
    server_propose(s, ir, answered, &a); /* answers even a refusal */
    pthread_mutex_lock(&a.mu);
    while (!a.done)
        pthread_cond_wait(&a.cv, &a.mu);
    pthread_mutex_unlock(&a.mu);
    return a.err;
}

int harness_put(struct server *s, const char *key, const char *value)
{
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key = (ProtobufCBinaryData){strlen(key), (uint8_t *)key};
    p.value = (ProtobufCBinaryData){strlen(value), (uint8_t *)value};
    Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
    ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_PUT;
    ir.put = &p;
    return harness_propose(s, &ir);
}

int harness_lease_grant(struct server *s, int64_t id, int64_t ttl)
{
    Etcdserverpb__LeaseGrantRequest g = ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
    g.id = id;
    g.ttl = ttl;
    Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
    ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_LEASE_GRANT;
    ir.lease_grant = &g;
    return harness_propose(s, &ir);
}

struct renewed {
    struct answer a;
    int64_t ttl;
};

static void on_renewed(void *arg, int err, int64_t ttl)
{
    struct renewed *r = arg;
    pthread_mutex_lock(&r->a.mu);
    r->a.err = err;
    r->ttl = ttl;
    r->a.done = 1;
    pthread_cond_signal(&r->a.cv);
    pthread_mutex_unlock(&r->a.mu);
}

int harness_lease_renew(struct server *s, int64_t id, int64_t *ttl_out)
{
    struct renewed r = {{PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                         0, 0},
                        0};
    server_lease_renew(s, id, true, on_renewed, &r);
    pthread_mutex_lock(&r.a.mu);
    while (!r.a.done)
        pthread_cond_wait(&r.a.cv, &r.a.mu);
    pthread_mutex_unlock(&r.a.mu);
    if (ttl_out != NULL)
        *ttl_out = r.ttl;
    return r.a.err;
}

static int saved_fd = -1;

void harness_log_begin(const char *path)
{
    fflush(stderr);
    saved_fd = dup(2);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(saved_fd >= 0 && fd >= 0);
    dup2(fd, 2);
    close(fd);
}

void harness_log_end(void)
{
    assert_true(saved_fd >= 0);
    fflush(stderr);
    dup2(saved_fd, 2);
    close(saved_fd);
    saved_fd = -1;
}

size_t harness_log_count(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    size_t k = 0;
    for (const char *p = buf; (p = strstr(p, needle)) != NULL; p++)
        k++;
    return k;
}
