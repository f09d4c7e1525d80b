/*
 * client_smoke.c - libcetcd against a live etcd or cetcd.
 *
 * Goal: every typed call works end to end and reports server errors as
 * values.  Method: put/get/range/delete/txn/compact/status on keys under a
 * fresh prefix, checking each reply; an extra unreachable endpoint placed
 * first exercises failover; the async interface runs a batch of puts.
 * With etcdctl's TLS flags (--cacert/--cert/--key/--insecure-skip-tls-
 * verify, files read and handed over as PEM text, freed right after the
 * open) the same checks run over TLS.
 * Usage: client_smoke [TLS flags] <endpoint>; exit 0 = all checks passed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cetcd/cetcd.h"
#include "etcdserverpb/rpc.pb-c.h"

static int failures;

#define CHECK(cond)                                                       \
    do {                                                                  \
        if (!(cond)) {                                                    \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                   \
        }                                                                 \
    } while (0)

#define CHECK_OK(rc, st)                                                  \
    do {                                                                  \
        if ((rc) != 0) {                                                  \
            fprintf(stderr, "FAIL %s:%d: rc=%d %s\n", __FILE__, __LINE__, \
                    (rc), (st).message);                                  \
            failures++;                                                   \
        }                                                                 \
    } while (0)

static bool kv_is(const struct cetcd_kv *kv, const char *k, const char *v)
{
    return kv->key_len == strlen(k) && memcmp(kv->key, k, kv->key_len) == 0 &&
           kv->value_len == strlen(v) &&
           (kv->value_len == 0 || memcmp(kv->value, v, kv->value_len) == 0);
}

static void test_put_get(struct cetcd_client *c)
{
    struct cetcd_status st;
    struct cetcd_put_result *pr = NULL;
    struct cetcd_range_result *rr = NULL;
    struct cetcd_put_opts po = {.prev_kv = true};
    int rc;

    rc = cetcd_put(c, "smoke/a", 7, "1", 1, NULL, NULL, &st);
    CHECK_OK(rc, st);
    rc = cetcd_put(c, "smoke/a", 7, "2", 1, &po, &pr, &st);
    CHECK_OK(rc, st);
    CHECK(pr && pr->prev_kv && kv_is(pr->prev_kv, "smoke/a", "1"));
    CHECK(pr && pr->header.revision > 1);
    rc = cetcd_get(c, "smoke/a", &rr, &st);
    CHECK_OK(rc, st);
    CHECK(rr && rr->kvs_len == 1 && kv_is(&rr->kvs[0], "smoke/a", "2"));
    CHECK(rr && rr->kvs[0].version == 2 && rr->count == 1);
    CHECK(rr && pr && rr->kvs[0].mod_revision == pr->header.revision);
    cetcd_put_result_free(pr);
    cetcd_range_result_free(rr);
    rc = cetcd_get(c, "smoke/none", &rr, &st);
    CHECK_OK(rc, st);
    CHECK(rr && rr->kvs_len == 0 && rr->count == 0);
    cetcd_range_result_free(rr);
    rc = cetcd_put(c, "", 0, "x", 1, NULL, NULL, &st);
    CHECK(rc == CETCD_INVALID_ARGUMENT);
    CHECK(strstr(st.message, "key is not provided") != NULL);
    po = (struct cetcd_put_opts){.lease = 12345};
    rc = cetcd_put(c, "smoke/l", 7, "x", 1, &po, NULL, &st);
    CHECK(rc == CETCD_NOT_FOUND);
    CHECK(strstr(st.message, "requested lease not found") != NULL);
}

static void test_range(struct cetcd_client *c)
{
    struct cetcd_status st;
    struct cetcd_range_result *rr = NULL;
    struct cetcd_range_opts o = {.range_end = "smoke/r0", .range_end_len = 8};
    char k[16];
    int rc;

    for (int i = 0; i < 5; i++) {
        snprintf(k, sizeof(k), "smoke/r/%d", i);
        rc = cetcd_put(c, k, strlen(k), k, strlen(k), NULL, NULL, &st);
        CHECK_OK(rc, st);
    }
    o.limit = 2;
    o.sort_order = CETCD_SORT_DESCEND;
    rc = cetcd_range(c, "smoke/r/", 8, &o, &rr, &st);
    CHECK_OK(rc, st);
    CHECK(rr && rr->kvs_len == 2 && rr->more && rr->count == 5);
    CHECK(rr && kv_is(&rr->kvs[0], "smoke/r/4", "smoke/r/4"));
    cetcd_range_result_free(rr);
    o = (struct cetcd_range_opts){.range_end = "smoke/r0", .range_end_len = 8,
                                  .count_only = true, .serializable = true};
    rc = cetcd_range(c, "smoke/r/", 8, &o, &rr, &st);
    CHECK_OK(rc, st);
    CHECK(rr && rr->kvs_len == 0 && rr->count == 5);
    cetcd_range_result_free(rr);
    o = (struct cetcd_range_opts){.range_end = "smoke/r0", .range_end_len = 8,
                                  .keys_only = true};
    rc = cetcd_range(c, "smoke/r/", 8, &o, &rr, &st);
    CHECK_OK(rc, st);
    CHECK(rr && rr->kvs_len == 5 && rr->kvs[0].value_len == 0);
    cetcd_range_result_free(rr);
}

static void test_delete(struct cetcd_client *c)
{
    struct cetcd_status st;
    struct cetcd_delete_result *dr = NULL;
    struct cetcd_delete_opts o = {.range_end = "smoke/r0",
                                  .range_end_len = 8, .prev_kv = true};
    int rc;

    rc = cetcd_delete(c, "smoke/r/", 8, &o, &dr, &st);
    CHECK_OK(rc, st);
    CHECK(dr && dr->deleted == 5 && dr->prev_kvs_len == 5);
    CHECK(dr && kv_is(&dr->prev_kvs[0], "smoke/r/0", "smoke/r/0"));
    cetcd_delete_result_free(dr);
    rc = cetcd_delete(c, "smoke/r/", 8, &o, &dr, &st);
    CHECK_OK(rc, st);
    CHECK(dr && dr->deleted == 0);
    cetcd_delete_result_free(dr);
}

static void test_txn(struct cetcd_client *c)
{
    struct cetcd_status st;
    struct cetcd_txn_result *tr = NULL;
    struct cetcd_compare cmp = {.result = CETCD_CMP_EQUAL,
                                .target = CETCD_CMP_VALUE, .key = "smoke/a",
                                .key_len = 7, .value = "2", .value_len = 1};
    struct cetcd_op then[2] = {
        {.type = CETCD_OP_PUT, .key = "smoke/t", .key_len = 7, .value = "yes",
         .value_len = 3},
        {.type = CETCD_OP_RANGE, .key = "smoke/a", .key_len = 7},
    };
    struct cetcd_op els = {.type = CETCD_OP_DELETE, .key = "smoke/a",
                           .key_len = 7};
    int rc;

    rc = cetcd_txn(c, &cmp, 1, then, 2, &els, 1, &tr, &st);
    CHECK_OK(rc, st);
    CHECK(tr && tr->succeeded && tr->responses_len == 2);
    CHECK(tr && tr->responses[0].type == CETCD_OP_PUT);
    CHECK(tr && tr->responses[1].type == CETCD_OP_RANGE &&
          tr->responses[1].range.kvs_len == 1 &&
          kv_is(&tr->responses[1].range.kvs[0], "smoke/a", "2"));
    cetcd_txn_result_free(tr);
    cmp.value = "nope";
    cmp.value_len = 4;
    rc = cetcd_txn(c, &cmp, 1, then, 2, &els, 1, &tr, &st);
    CHECK_OK(rc, st);
    CHECK(tr && !tr->succeeded && tr->responses_len == 1);
    CHECK(tr && tr->responses[0].type == CETCD_OP_DELETE &&
          tr->responses[0].delete.deleted == 1);
    cetcd_txn_result_free(tr);
    /* Two puts of one key in a txn: etcd refuses them. */
    then[1] = then[0];
    rc = cetcd_txn(c, NULL, 0, then, 2, NULL, 0, NULL, &st);
    CHECK(rc == CETCD_INVALID_ARGUMENT);
    CHECK(strstr(st.message, "duplicate key") != NULL);
}

static void test_compact_status(struct cetcd_client *c)
{
    struct cetcd_status st;
    struct cetcd_endpoint_status es;
    struct cetcd_header h;
    struct cetcd_range_result *rr = NULL;
    struct cetcd_range_opts o = {.revision = 1};
    int rc;

    rc = cetcd_endpoint_status(c, &es, &st);
    CHECK_OK(rc, st);
    CHECK(es.version[0] != '\0' && es.header.revision > 1 && es.leader != 0);
    rc = cetcd_compact(c, es.header.revision, true, &h, &st);
    CHECK_OK(rc, st);
    CHECK(h.revision >= es.header.revision);
    rc = cetcd_range(c, "smoke/a", 7, &o, &rr, &st);
    CHECK(rc == CETCD_OUT_OF_RANGE && rr == NULL);
    CHECK(strstr(st.message, "required revision has been compacted"));
    rc = cetcd_compact(c, es.header.revision, false, NULL, &st);
    CHECK(rc == CETCD_OUT_OF_RANGE);
    printf("status: version %s revision %lld db %lld\n", es.version,
           (long long)es.header.revision, (long long)es.db_size);
}

static int async_done;

static void on_put(void *arg, const struct cetcd_status *st,
                   ProtobufCMessage *resp)
{
    int *ok = arg;
    if (st->code == 0 && resp != NULL)
        (*ok)++;
    if (resp != NULL)
        protobuf_c_message_free_unpacked(resp, NULL);
    async_done++;
}

static void test_async(struct cetcd_client *c)
{
    struct cetcd_async_queue *q = NULL;
    Etcdserverpb__PutRequest req = ETCDSERVERPB__PUT_REQUEST__INIT;
    int ok = 0, rc;
    struct cetcd_async_done done = {on_put, &ok};

    rc = cetcd_async_queue_open(&q);
    CHECK(rc == 0);
    req.key.data = (uint8_t *)"smoke/async";
    req.key.len = 11;
    for (int i = 0; i < 50; i++) {
        rc = cetcd_async_call(c, q, "/etcdserverpb.KV/Put", &req.base,
                              &etcdserverpb__put_response__descriptor, &done);
        CHECK(rc == 0);
    }
    while (cetcd_async_queue_pending(q) > 0)
        cetcd_async_queue_run(q, 1000);
    CHECK(ok == 50 && async_done == 50);
    cetcd_async_queue_close(q);
}

/* slurp returns the NUL-terminated contents of path (malloc'd), or NULL. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;

    if (f == NULL)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
        fseek(f, 0, SEEK_SET) == 0 && (buf = calloc(1, (size_t)n + 1)) &&
        fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

/* tls_args reads etcdctl's TLS flags (--cacert, --cert, --key,
 * --insecure-skip-tls-verify) from argv[1..argc-1) into *t; returns
 * whether any was given, or exits on a bad one. */
static bool tls_args(int argc, char **argv, struct cetcd_tls *t)
{
    bool any = argc > 2;
    for (int i = 1; i < argc - 1; i++) {
        const char **dst = strcmp(argv[i], "--cacert") == 0 ? &t->ca_pem
                           : strcmp(argv[i], "--cert") == 0 ? &t->cert_pem
                           : strcmp(argv[i], "--key") == 0  ? &t->key_pem
                                                            : NULL;
        if (strcmp(argv[i], "--insecure-skip-tls-verify") == 0) {
            t->insecure_skip_verify = true;
            continue;
        }
        if (dst == NULL || i + 1 >= argc - 1 ||
            (*dst = slurp(argv[++i])) == NULL) {
            fprintf(stderr, "bad or unreadable option %s\n", argv[i]);
            exit(2);
        }
    }
    return any;
}

int main(int argc, char **argv)
{
    struct cetcd_client_opts o = {.dial_timeout_ms = 2000,
                                  .call_timeout_ms = 5000};
    struct cetcd_tls tls = {0};
    struct cetcd_client *c = NULL;
    struct cetcd_status st;
    char eps[512];
    int rc;

    if (argc < 2) {
        fprintf(stderr, "usage: client_smoke [--cacert F] [--cert F] "
                        "[--key F] [--insecure-skip-tls-verify] "
                        "<endpoint>\n");
        return 2;
    }
    if (tls_args(argc, argv, &tls))
        o.tls = &tls;
    /* A dead endpoint first: the first call must fail over past it. */
    snprintf(eps, sizeof(eps), "http://127.0.0.1:1,%s", argv[argc - 1]);
    o.endpoints = eps;
    rc = cetcd_client_open(&o, &c, &st);
    /* The PEM text was only borrowed for the open. */
    free((char *)tls.ca_pem);
    free((char *)tls.cert_pem);
    free((char *)tls.key_pem);
    if (rc != 0) {
        fprintf(stderr, "open: %s: %s\n", cetcd_code_name(rc), st.message);
        return 1;
    }
    /* One call first: an endpoint that cannot be reached (or a TLS
     * handshake that fails) ends the run at once. */
    rc = cetcd_put(c, "smoke/first", 11, "1", 1, NULL, NULL, &st);
    if (rc != 0) {
        fprintf(stderr, "first put: %s: %s\n", cetcd_code_name(rc),
                st.message);
        cetcd_client_close(c);
        return 1;
    }
    test_put_get(c);
    CHECK(strcmp(cetcd_client_endpoint(c), "127.0.0.1:1") != 0);
    test_range(c);
    test_delete(c);
    test_txn(c);
    test_compact_status(c);
    test_async(c);
    cetcd_client_close(c);
    printf("%s\n", failures ? "FAILED" : "OK");
    return failures ? 1 : 0;
}
