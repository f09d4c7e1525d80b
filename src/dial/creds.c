/*
 * creds.c - channel credentials from TLS material (see dial.h).
 *
 * They behave as the client end of an etcd 3.4 tls.Config
 * (transport.TLSInfo.ClientConfig, which rafthttp and clientv3 both use):
 * - the own certificate and key are offered as the client certificate,
 *   so a listener with client cert auth (etcd: --[peer-]client-cert-auth,
 *   or a --[peer-]trusted-ca-file, which implies it) accepts the
 *   connection;
 * - the server certificate is verified against the trusted CAs (the
 *   system's when none are given) and must be valid for the host of the
 *   target dialled (an IP SAN for 127.0.0.1);
 * - with skip_verify nothing is verified (etcd sets InsecureSkipVerify
 *   for self-signed peer certificates, etcdctl for
 *   --insecure-skip-tls-verify).  The connection is still encrypted;
 * - with an allowed CN or hostname, the server's certificate must have
 *   it too (verify.c).
 * The experimental grpc_tls_* API is used rather than
 * grpc_ssl_credentials_create_ex because it can switch off both the chain
 * check and the host name check, which skip_verify needs.
 */
#include <assert.h>
#include <stddef.h>
#include <string.h>

#include "dial/dial.h"
#include "dial/dial_int.h"
#include "util/mem.h"

/* provider_create returns the static provider of the identity and root
 * certificates, or NULL when there is neither. */
static grpc_tls_certificate_provider *
provider_create(const struct dial_tls *tls, const char *roots)
{
    grpc_tls_identity_pairs *pairs = NULL;
    if (tls->cert_pem != NULL) {
        pairs = grpc_tls_identity_pairs_create();
        /* Copies both strings. */
        grpc_tls_identity_pairs_add_pair(pairs, tls->key_pem, tls->cert_pem);
    }
    if (pairs == NULL && roots == NULL)
        return NULL;
    /* Copies roots and takes pairs. */
    return grpc_tls_certificate_provider_static_data_create(roots, pairs);
}

/* files_provider watches the files of tls (see dial.h), or NULL when
 * they are not given. */
static grpc_tls_certificate_provider *
files_provider(const struct dial_tls *tls, const char *roots)
{
    if (tls->cert_file == NULL || tls->key_file == NULL ||
        tls->cert_pem == NULL)
        return NULL;
    /* Roots from the file only when they are used and come from a file
     * (NULL: the system's, not watched). */
    const char *ca = roots != NULL ? tls->ca_file : NULL;
    if (roots != NULL && ca == NULL)
        return NULL; /* roots in memory only: the static provider */
    return grpc_tls_certificate_provider_file_watcher_create(
        tls->key_file, tls->cert_file, ca, DIAL_TLS_REFRESH_S);
}

grpc_channel_credentials *dial_creds_create(const struct dial_tls *tls)
{
    if (tls == NULL)
        return grpc_insecure_credentials_create();
    assert((tls->cert_pem == NULL) == (tls->key_pem == NULL));
    grpc_tls_certificate_verifier *ver =
        tls->allowed_cn != NULL || tls->allowed_hostname != NULL
            ? dial__verifier_create(tls)
        : tls->skip_verify ? grpc_tls_certificate_verifier_no_op_create()
                           : grpc_tls_certificate_verifier_host_name_create();
    if (ver == NULL)
        return NULL;
    /* Verification off: the CAs are not needed.  Verification on without
     * CAs of our own: not watching roots makes gRPC use the system's. */
    const char *roots = tls->skip_verify ? NULL : tls->ca_pem;
    grpc_tls_certificate_provider *prov = files_provider(tls, roots);
    if (prov == NULL)
        prov = provider_create(tls, roots);
    grpc_tls_credentials_options *opts = grpc_tls_credentials_options_create();
    if (prov != NULL)
        grpc_tls_credentials_options_set_certificate_provider(opts, prov);
    if (roots != NULL)
        grpc_tls_credentials_options_watch_root_certs(opts);
    if (tls->cert_pem != NULL)
        grpc_tls_credentials_options_watch_identity_key_cert_pairs(opts);
    grpc_tls_credentials_options_set_verify_server_cert(opts,
                                                        !tls->skip_verify);
    grpc_tls_credentials_options_set_certificate_verifier(opts, ver);
    grpc_tls_credentials_options_set_check_call_host(opts, !tls->skip_verify);
    /* The credentials take opts; opts took its own references. */
    grpc_channel_credentials *creds = grpc_tls_credentials_create(opts);
    grpc_tls_certificate_verifier_release(ver);
    if (prov != NULL)
        grpc_tls_certificate_provider_release(prov);
    return creds;
}

/* The string fields of struct dial_tls, for dial_tls_copy. */
#define TLS_STRINGS 9

/* tls_strings points out[] at t's string fields. */
static void tls_strings(struct dial_tls *t, const char **out[])
{
    const char **f[TLS_STRINGS] = {
        &t->cert_pem,  &t->key_pem,    &t->ca_pem,
        &t->cert_file, &t->key_file,   &t->ca_file,
        &t->allowed_cn, &t->allowed_hostname, &t->alert_target};
    memcpy(out, f, sizeof f);
}

struct dial_tls *dial_tls_copy(const struct dial_tls *tls)
{
    assert(tls != NULL);
    struct dial_tls src = *tls;
    const char **f[TLS_STRINGS];
    tls_strings(&src, f);
    size_t n = sizeof src;
    for (int i = 0; i < TLS_STRINGS; i++)
        n += *f[i] != NULL ? strlen(*f[i]) + 1 : 0;
    struct dial_tls *c = mem_malloc(n);
    if (c == NULL)
        return NULL;
    *c = src;
    const char **g[TLS_STRINGS];
    tls_strings(c, g);
    char *at = (char *)(c + 1);
    for (int i = 0; i < TLS_STRINGS; i++) {
        if (*g[i] == NULL)
            continue;
        size_t len = strlen(*g[i]) + 1;
        memcpy(at, *g[i], len);
        *g[i] = at;
        at += len;
    }
    assert((size_t)(at - (char *)c) == n);
    return c;
}
