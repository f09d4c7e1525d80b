/*
 * verify.c - the allowed CN / hostname check on the certificate a server
 * shows the dialler (see dial.h, struct dial_tls allowed_cn and
 * allowed_hostname), as etcd 3.4's peer tls.Config makes it on both ends
 * (transport.TLSInfo.baseConfig's VerifyPeerCertificate, used by
 * ServerConfig and ClientConfig alike).
 *
 * gRPC's hook for it, an external certificate verifier, runs after the
 * TLS handshake finished, and a refusal only closes the connection.  Go's
 * crypto/tls runs VerifyPeerCertificate inside the handshake and sends
 * the server a "bad certificate" alert, which the server logs ("rejected
 * connection from ... remote error: tls: bad certificate"; etcd's e2e
 * TestEtcdPeerCNAuth waits for that line on the refused member).  So a
 * refusal also makes one short handshake of its own to the same address
 * that refuses the server's certificate inside it, with that alert
 * (dial__tls_refuse).  Each runs on a detached thread (cetcd-tls-alert),
 * at most ALERTS_MAX at once; refusals meanwhile send none (the server
 * is being told already).  gRPC tells the verifier the host it dialled
 * but not the port, so the address comes with the credentials
 * (dial_tls.alert_target; the peer transport makes credentials per
 * channel when it checks names).
 */
#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <grpc/support/alloc.h>
#include <grpc/support/string_util.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "dial/dial.h"
#include "dial/dial_int.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/thread.h"
#include "util/x509_host.h"

#define ALERTS_MAX 2
#define ALERT_TIMEOUT_MS 2000

/* Go's words, which etcd logs on both ends of a refused peer connection. */
#define REFUSED "client certificate authentication failed"

/* One verifier per credentials.  Owned by gRPC once created (destruct
 * frees it); read-only after creation, so any gRPC thread may verify. */
struct verifier {
    grpc_tls_certificate_verifier_external ext; /* user_data: this */
    grpc_tls_certificate_verifier *host; /* host name check, or NULL */
    char *cn;                            /* allowed CN, or NULL */
    char *hostname;                      /* allowed hostname, or NULL */
    char *alert_target; /* "host:port" told of a refusal, or NULL */
};

static atomic_int alerts_running;

/* last_cn copies the last common name of x's subject into buf (Go's
 * Subject.CommonName keeps the last); false when it has none that fits. */
static bool last_cn(X509 *x, char *buf, size_t cap)
{
    X509_NAME *name = X509_get_subject_name(x);
    int at = -1;
    for (int i; (i = X509_NAME_get_index_by_NID(name, NID_commonName,
                                                at)) >= 0;)
        at = i;
    if (at < 0)
        return false;
    unsigned char *utf8 = NULL;
    int n = ASN1_STRING_to_UTF8(
        &utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, at)));
    bool ok = n >= 0 && (size_t)n < cap && memchr(utf8, '\0', (size_t)n) == NULL;
    if (ok) {
        memcpy(buf, utf8, (size_t)n);
        buf[n] = '\0';
    }
    OPENSSL_free(utf8);
    return ok;
}

bool dial__cert_allowed(X509 *x, const char *cn, const char *hostname)
{
    assert((cn == NULL) != (hostname == NULL));
    char have[256];
    bool ok = x != NULL && (cn != NULL ? last_cn(x, have, sizeof have) &&
                                             strcmp(have, cn) == 0
                                       : x509_valid_for_host(x, hostname));
    ERR_clear_error();
    return ok;
}

/* leaf_allowed: the PEM leaf certificate has the allowed CN or is valid
 * for the allowed hostname. */
static bool leaf_allowed(const struct verifier *v, const char *pem)
{
    if (pem == NULL)
        return false;
    BIO *b = BIO_new_mem_buf(pem, -1);
    X509 *x = b != NULL ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
    bool ok = dial__cert_allowed(x, v->cn, v->hostname);
    X509_free(x);
    BIO_free(b);
    ERR_clear_error();
    return ok;
}

static void *alert_main(void *arg)
{
    char *target = arg;
    dial__tls_refuse(target, ALERT_TIMEOUT_MS);
    mem_free(target);
    atomic_fetch_sub(&alerts_running, 1);
    return NULL;
}

/* alert_send tells the server at target on a thread of its own (see the
 * top of the file); nothing when ALERTS_MAX are under way. */
static void alert_send(const char *target)
{
    if (target == NULL || atomic_fetch_add(&alerts_running, 1) >= ALERTS_MAX)
        goto done;
    char *copy = mem_dup(target, strlen(target) + 1);
    pthread_attr_t attr;
    pthread_t t;
    if (copy == NULL || pthread_attr_init(&attr) != 0) {
        mem_free(copy);
        goto done;
    }
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, alert_main, copy);
    pthread_attr_destroy(&attr);
    if (rc == 0) {
        thread_name_set(t, "cetcd-tls-alert");
        return;
    }
    mem_free(copy);
done:
    atomic_fetch_sub(&alerts_running, 1);
}

static int verify(void *user_data,
                  grpc_tls_custom_verification_check_request *req,
                  grpc_tls_on_custom_verification_check_done_cb cb,
                  void *cb_arg, grpc_status_code *status, char **details)
{
    const struct verifier *v = user_data;
    assert(v != NULL && req != NULL && status != NULL);
    assert((v->cn == NULL) != (v->hostname == NULL));
    *status = GRPC_STATUS_OK; /* the host check writes failures only */
    if (v->host != NULL) {
        if (!grpc_tls_certificate_verifier_verify(v->host, req, cb, cb_arg,
                                                  status, details))
            return 0; /* went asynchronous (gRPC 1.51's never does): it
                       * decides alone */
        if (*status != GRPC_STATUS_OK)
            return 1; /* its error details stand */
    }
    /* Without chain verification (skip_verify) Go hands etcd's check no
     * verified chain, and the check refuses every server. */
    if (v->host != NULL && leaf_allowed(v, req->peer_info.peer_cert)) {
        *status = GRPC_STATUS_OK;
        return 1;
    }
    log_warn("dial", "TLS handshake with %s failed: " REFUSED
             " (its certificate lacks the allowed %s \"%s\")",
             v->alert_target != NULL ? v->alert_target
             : req->target_name != NULL ? req->target_name : "?",
             v->cn != NULL ? "CN" : "hostname",
             v->cn != NULL ? v->cn : v->hostname);
    alert_send(v->alert_target);
    *status = GRPC_STATUS_UNAUTHENTICATED;
    *details = gpr_strdup(REFUSED);
    return 1;
}

static void cancel(void *user_data,
                   grpc_tls_custom_verification_check_request *req)
{
    (void)user_data; /* every verification is synchronous */
    (void)req;
}

static void destruct(void *user_data)
{
    struct verifier *v = user_data;
    if (v->host != NULL)
        grpc_tls_certificate_verifier_release(v->host);
    mem_free(v->cn);
    mem_free(v->hostname);
    mem_free(v->alert_target);
    mem_free(v);
}

static char *dup_or_null(const char *s)
{
    return s != NULL ? mem_dup(s, strlen(s) + 1) : NULL;
}

grpc_tls_certificate_verifier *
dial__verifier_create(const struct dial_tls *tls)
{
    assert(tls != NULL);
    assert((tls->allowed_cn == NULL) != (tls->allowed_hostname == NULL));
    struct verifier *v = mem_calloc(1, sizeof *v);
    if (v == NULL)
        return NULL;
    v->cn = dup_or_null(tls->allowed_cn);
    v->hostname = dup_or_null(tls->allowed_hostname);
    v->alert_target = dup_or_null(tls->alert_target);
    if (!tls->skip_verify)
        v->host = grpc_tls_certificate_verifier_host_name_create();
    if ((v->cn == NULL && v->hostname == NULL) ||
        (tls->alert_target != NULL && v->alert_target == NULL)) {
        destruct(v);
        return NULL;
    }
    v->ext = (grpc_tls_certificate_verifier_external){
        .user_data = v, .verify = verify, .cancel = cancel,
        .destruct = destruct};
    return grpc_tls_certificate_verifier_external_create(&v->ext);
}
