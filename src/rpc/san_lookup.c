/*
 * san_lookup.c - the DNS lookups of the peer listener's SAN check
 * (tls_san.c), made on threads so that no event loop waits for a
 * resolver: the jobs, their threads and the system's resolver
 * (getnameinfo, getaddrinfo).  The life of a job is told in rpc_int.h
 * ("san_lookup.c").
 *
 * Bounds.  A server runs at most RPC__SAN_THREADS_MAX lookup threads; a
 * handshake that would need one more is refused (logged as a rejected
 * connection).  Only a client whose certificate the peer CA signed gets
 * this far, and a member makes a few connections to each peer, so the
 * bound is met by a flood only.  A job whose connection is gone (its
 * handshake timed out, guard.c) skips the forward lookups left; the one
 * under way ends when the resolver gives up.  The connection itself waits
 * no longer than its handshake deadline.
 *
 * References on a job (atomic: the loop and the thread drop them): its
 * SSL's (dropped when the SSL is freed) and its thread's, which goes with
 * the job into the loop's inbox and is dropped there (or by the thread
 * when the server closed meanwhile).
 */
#define _GNU_SOURCE /* EAI_NODATA */
#include <arpa/inet.h>
#include <assert.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/x509v3.h>

#include "rpc/rpc_int.h"
#include "util/err.h"
#include "util/mem.h"
#include "util/thread.h"

#define THREAD_STACK_BYTES (512 * 1024) /* the resolver's buffers */

/* Shared by a server and its lookup threads (rpc_int.h); any thread, under
 * mu. */
struct rpc__san_hub {
    pthread_mutex_t mu;                /* guards the fields below */
    int refs;                          /* the server's + one per thread */
    int running;                       /* lookup threads */
    bool closed;                       /* the server is closing */
};

enum job_state { JOB_NEW, JOB_RUNNING, JOB_DONE };

/* One certificate's lookups.  Immutable fields are set before the job is
 * shared; the loop's are its connection's loop's. */
struct rpc__san_job {
    struct rpc__item item;             /* SAN_JOB: handed back to the loop */
    atomic_int refs;                   /* see the file comment */
    atomic_bool cancelled;             /* its SSL was freed: skip the rest */
    enum job_state state;              /* loop */
    struct rpc__conn *conn;            /* loop: waiting for it, or NULL */
    struct rpc__loop *loop;            /* set at start: the conn's loop */
    struct rpc__san_hub *hub;          /* set at start: a reference */
    char ip[INET6_ADDRSTRLEN];         /* immutable: the remote IP */
    char **sans;                       /* immutable: the DNS SANs, owned */
    size_t sans_n;                     /* immutable: their count */
    bool match;                        /* thread, then (after the push)
                                          the loop: the verdict */
    char why[1024];                    /* thread, then loop: its text */
};

static int ex_index = -1;
static pthread_once_t ex_once = PTHREAD_ONCE_INIT;

/* --- hub --- */

struct rpc__san_hub *rpc__san_hub_new(void)
{
    struct rpc__san_hub *h = mem_calloc(1, sizeof *h);
    if (h == NULL)
        return NULL;
    if (pthread_mutex_init(&h->mu, NULL) != 0) {
        mem_free(h);
        return NULL;
    }
    h->refs = 1;
    return h;
}

static void hub_unref(struct rpc__san_hub *h)
{
    pthread_mutex_lock(&h->mu);
    assert(h->refs > 0);
    bool last = --h->refs == 0;
    pthread_mutex_unlock(&h->mu);
    if (!last)
        return;
    assert(h->running == 0);
    pthread_mutex_destroy(&h->mu);
    mem_free(h);
}

void rpc__san_hub_close(struct rpc__san_hub *h)
{
    if (h == NULL)
        return;
    pthread_mutex_lock(&h->mu);
    h->closed = true;
    pthread_mutex_unlock(&h->mu);
}

void rpc__san_hub_free(struct rpc__san_hub *h)
{
    if (h == NULL)
        return;
    rpc__san_hub_close(h);
    hub_unref(h);
}

/* --- jobs --- */

static void job_unref(struct rpc__san_job *job)
{
    assert(atomic_load(&job->refs) > 0);
    if (atomic_fetch_sub(&job->refs, 1) != 1)
        return;
    for (size_t i = 0; i < job->sans_n; i++)
        mem_free(job->sans[i]);
    mem_free(job->sans);
    mem_free(job);
}

/* ex_free: the SSL is freed (on its connection's loop, as the connection
 * dies): the connection no longer waits for the job. */
static void ex_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx,
                    long argl, void *argp)
{
    (void)parent;
    (void)ad;
    (void)idx;
    (void)argl;
    (void)argp;
    struct rpc__san_job *job = ptr;
    if (job == NULL)
        return;
    job->conn = NULL;
    atomic_store(&job->cancelled, true);
    job_unref(job);
}

static void ex_index_make(void)
{
    ex_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, ex_free);
}

/* sans_copy copies x's DNS SANs into job.  ERR_NOMEM. */
static int sans_copy(struct rpc__san_job *job, X509 *x)
{
    GENERAL_NAMES *names = X509_get_ext_d2i(x, NID_subject_alt_name, NULL,
                                            NULL);
    int n = sk_GENERAL_NAME_num(names), rv = 0;
    job->sans = n > 0 ? mem_calloc((size_t)n, sizeof *job->sans) : NULL;
    if (n > 0 && job->sans == NULL)
        rv = ERR_NOMEM;
    for (int i = 0; rv == 0 && i < n; i++) {
        const GENERAL_NAME *g = sk_GENERAL_NAME_value(names, i);
        if (g->type != GEN_DNS)
            continue;
        /* As Go's x509 keeps it: the IA5String's bytes, cut at a NUL
         * (Go refuses such a certificate; nothing can match it here). */
        const unsigned char *d = ASN1_STRING_get0_data(g->d.dNSName);
        size_t len = (size_t)ASN1_STRING_length(g->d.dNSName);
        char *s = mem_malloc(len + 1);
        if (s == NULL) {
            rv = ERR_NOMEM;
            break;
        }
        memcpy(s, d, len);
        s[len] = '\0';
        job->sans[job->sans_n++] = s;
    }
    GENERAL_NAMES_free(names);
    return rv;
}

int rpc__san_job_attach(SSL *ssl, X509 *x, const char *ip)
{
    assert(ssl != NULL && x != NULL && ip != NULL);
    pthread_once(&ex_once, ex_index_make);
    struct rpc__san_job *job = mem_calloc(1, sizeof *job);
    if (ex_index < 0 || job == NULL)
        goto err_free;
    job->item.kind = RPC__KIND_SAN_JOB;
    atomic_init(&job->refs, 1); /* the SSL's */
    atomic_init(&job->cancelled, false);
    snprintf(job->ip, sizeof job->ip, "%s", ip);
    if (sans_copy(job, x) != 0 || SSL_get_ex_data(ssl, ex_index) != NULL ||
        SSL_set_ex_data(ssl, ex_index, job) != 1)
        goto err_unref;
    assert(job->state == JOB_NEW && job->sans_n > 0);
    return 0;
err_unref:
    job_unref(job);
    return ERR_NOMEM;
err_free:
    mem_free(job);
    return ERR_NOMEM;
}

struct rpc__san_job *rpc__san_job_of(const SSL *ssl)
{
    return ex_index >= 0 ? SSL_get_ex_data(ssl, ex_index) : NULL;
}

/* --- the system's resolver --- */

/* dns_server writes the server Go's resolver names in its errors: the
 * first nameserver of /etc/resolv.conf, host:53 ("[::1]:53"), or Go's
 * default 127.0.0.1:53 without one. */
static void dns_server(char *buf, size_t cap)
{
    FILE *f = fopen("/etc/resolv.conf", "re");
    char line[256], ns[64] = "";
    uint8_t bin[16];
    while (f != NULL && ns[0] == '\0' && fgets(line, sizeof line, f)) {
        if (sscanf(line, " nameserver %63s", ns) != 1 ||
            (inet_pton(AF_INET, ns, bin) != 1 &&
             inet_pton(AF_INET6, ns, bin) != 1))
            ns[0] = '\0';
    }
    if (f != NULL)
        fclose(f);
    if (ns[0] == '\0')
        snprintf(buf, cap, "127.0.0.1:53");
    else
        snprintf(buf, cap, strchr(ns, ':') ? "[%s]:53" : "%s:53", ns);
}

/* gai_words: Go's words for a failed lookup of what (a name, or the
 * reverse name of an address): its resolver's "lookup x on 10.0.0.53:53:
 * no such host" when the name does not exist, the system's words for
 * other failures (Go's differ: "i/o timeout", "server misbehaving"). */
static void gai_words(int rc, const char *what, char *err, size_t cap)
{
    char server[80];
    if (rc != EAI_NONAME && rc != EAI_NODATA) {
        snprintf(err, cap, "lookup %s: %s", what, gai_strerror(rc));
        return;
    }
    dns_server(server, sizeof server);
    snprintf(err, cap, "lookup %s on %s: no such host", what, server);
}

/* arpa_name writes the name a PTR lookup of the address asks for, as Go's
 * reverseaddr: "4.3.2.1.in-addr.arpa.", nibbles then "ip6.arpa.". */
static void arpa_name(int family, const uint8_t *a, char *buf, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    if (family == AF_INET) {
        snprintf(buf, cap, "%u.%u.%u.%u.in-addr.arpa.", a[3], a[2], a[1],
                 a[0]);
        return;
    }
    for (int i = 15; i >= 0 && o + 4 < cap; i--) {
        buf[o++] = hex[a[i] & 15];
        buf[o++] = '.';
        buf[o++] = hex[a[i] >> 4];
        buf[o++] = '.';
    }
    snprintf(buf + o, cap - o, "ip6.arpa.");
}

int rpc__san_sys_reverse(void *ctx, const char *ip,
                         char (*names)[RPC__DNS_NAME_MAX], int max,
                         char *err, size_t cap)
{
    (void)ctx;
    assert(max > 0);
    struct sockaddr_storage ss = {0};
    socklen_t len;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, ip, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        len = sizeof *a4;
    } else if (inet_pton(AF_INET6, ip, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        len = sizeof *a6;
    } else {
        snprintf(err, cap, "lookup %s: unrecognized address", ip);
        return -1;
    }
    int rc = getnameinfo((struct sockaddr *)&ss, len, names[0],
                         RPC__DNS_NAME_MAX, NULL, 0, NI_NAMEREQD);
    if (rc != 0) {
        char arpa[80];
        arpa_name(ss.ss_family,
                  ss.ss_family == AF_INET
                      ? (const uint8_t *)&a4->sin_addr
                      : (const uint8_t *)&a6->sin6_addr,
                  arpa, sizeof arpa);
        gai_words(rc, arpa, err, cap);
        return -1;
    }
    return 1;
}

/* addr_is: a's address (v4-mapped IPv6 as IPv4, as Go prints it) is ip. */
static bool addr_is(const struct addrinfo *a, const char *ip)
{
    char text[INET6_ADDRSTRLEN] = "";
    if (a->ai_family == AF_INET) {
        const struct sockaddr_in *s = (const void *)a->ai_addr;
        inet_ntop(AF_INET, &s->sin_addr, text, sizeof text);
    } else if (a->ai_family == AF_INET6) {
        const struct sockaddr_in6 *s = (const void *)a->ai_addr;
        if (IN6_IS_ADDR_V4MAPPED(&s->sin6_addr))
            inet_ntop(AF_INET, &s->sin6_addr.s6_addr[12], text, sizeof text);
        else
            inet_ntop(AF_INET6, &s->sin6_addr, text, sizeof text);
    }
    return strcmp(text, ip) == 0;
}

int rpc__san_sys_forward(void *ctx, const char *name, const char *ip,
                         char *err, size_t cap)
{
    const struct rpc__san_job *job = ctx;
    if (job != NULL && atomic_load(&job->cancelled)) {
        snprintf(err, cap, "lookup %s: operation was canceled", name);
        return -1; /* nobody waits for the answer any more */
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(name, NULL, &hints, &res);
    if (rc != 0) {
        gai_words(rc, name, err, cap);
        return -1;
    }
    int has = 0;
    for (const struct addrinfo *a = res; a != NULL && !has; a = a->ai_next)
        has = addr_is(a, ip);
    freeaddrinfo(res);
    return has;
}

/* --- the thread --- */

static void *job_main(void *arg)
{
    struct rpc__san_job *job = arg;
    struct rpc__resolver sys = {rpc__san_sys_reverse, rpc__san_sys_forward,
                                job};
    job->match = rpc__san_dns_match(job->ip, (const char *const *)job->sans,
                                    job->sans_n, &sys, job->why,
                                    sizeof job->why);
    struct rpc__san_hub *h = job->hub;
    pthread_mutex_lock(&h->mu);
    assert(h->running > 0);
    h->running--;
    bool closed = h->closed;
    if (!closed)
        rpc__loop_push(job->loop, &job->item); /* our reference goes too */
    pthread_mutex_unlock(&h->mu);
    if (closed)
        job_unref(job);
    hub_unref(h);
    return NULL;
}

/* job_start starts job's thread for c.  ERR_FULL (RPC__SAN_THREADS_MAX
 * running), ERR_CLOSED (the server is closing), ERR_NOMEM (no thread). */
static int job_start(struct rpc__san_job *job, struct rpc__conn *c)
{
    struct rpc__san_hub *h = c->loop->srv->san_hub;
    assert(h != NULL && job->state == JOB_NEW);
    pthread_mutex_lock(&h->mu);
    int rv = h->closed ? ERR_CLOSED
             : h->running >= RPC__SAN_THREADS_MAX ? ERR_FULL
                                                 : 0;
    if (rv == 0) {
        h->running++;
        h->refs++;
    }
    pthread_mutex_unlock(&h->mu);
    if (rv != 0)
        return rv;
    job->hub = h;
    job->loop = c->loop;
    atomic_fetch_add(&job->refs, 1); /* the thread's */
    pthread_attr_t attr;
    pthread_t t;
    int rc = pthread_attr_init(&attr);
    if (rc == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, THREAD_STACK_BYTES);
        rc = pthread_create(&t, &attr, job_main, job);
        pthread_attr_destroy(&attr);
    }
    if (rc == 0) {
        thread_name_set(t, "cetcd-san-dns");
        job->state = JOB_RUNNING;
        job->conn = c;
        return 0;
    }
    atomic_fetch_sub(&job->refs, 1);
    pthread_mutex_lock(&h->mu);
    h->running--;
    pthread_mutex_unlock(&h->mu);
    hub_unref(h);
    return ERR_NOMEM;
}

const char *rpc__san_job_ip(const struct rpc__san_job *job)
{
    return job->ip;
}

int rpc__san_job_poll(struct rpc__san_job *job, struct rpc__conn *c,
                      struct rpc_tls_dns *dns_out, char *why, size_t cap)
{
    assert(job != NULL && c != NULL && dns_out != NULL);
    if (job->state == JOB_DONE) {
        *dns_out = (struct rpc_tls_dns){.match = job->match,
                                        .why = job->why};
        return 1;
    }
    if (job->state == JOB_RUNNING)
        return 0;
    int rv = job_start(job, c);
    if (rv == ERR_FULL)
        snprintf(why, cap, "tls: client certificate's DNS names not "
                 "checked: %d lookups under way already",
                 RPC__SAN_THREADS_MAX);
    else if (rv == ERR_CLOSED)
        snprintf(why, cap, "tls: client certificate's DNS names not "
                 "checked: server closing");
    else if (rv != 0)
        snprintf(why, cap, "tls: client certificate's DNS names not "
                 "checked: cannot start a thread");
    assert(rv != 0 || job->state == JOB_RUNNING);
    return rv == 0 ? 0 : -1;
}

void rpc__san_job_inbox(struct rpc__item *it)
{
    assert(it != NULL && it->kind == RPC__KIND_SAN_JOB);
    struct rpc__san_job *job = rpc__container_of(it, struct rpc__san_job,
                                                 item);
    assert(job->state == JOB_RUNNING);
    job->state = JOB_DONE;
    struct rpc__conn *c = job->conn;
    job->conn = NULL;
    if (c != NULL) {
        assert(!c->dead && c->san_wait);
        rpc__conn_san_resume(c);
    }
    job_unref(job); /* the thread's, which came with it */
}
