/*
 * tls.c - the credentials the transport dials https:// and unixs:// peers
 * with.
 *
 * They behave as the client end of etcd 3.4's peer transport (the
 * tls.Config that transport.TLSInfo.ClientConfig builds for rafthttp):
 * - the member's own certificate and key are offered as its client
 *   certificate, so a peer listener with --peer-client-cert-auth (or a
 *   --peer-trusted-ca-file, which implies it) accepts the connection;
 * - the peer's server certificate is verified against the trusted CAs
 *   (--peer-trusted-ca-file; the system's CAs when none is given) and must
 *   be valid for the host of the URL dialled (an IP SAN for 127.0.0.1);
 * - with self-signed certificates (--peer-auto-tls) nothing is verified:
 *   etcd sets InsecureSkipVerify for a self-cert TLSInfo, since no member
 *   can know another's generated certificate.  The connection is still
 *   encrypted.
 * The experimental grpc_tls_* API is used rather than
 * grpc_ssl_credentials_create_ex because it can switch off both the chain
 * check and the host name check, which the auto-TLS case needs.
 */
#include <assert.h>
#include <stddef.h>

#include <grpc/grpc_security.h>

#include "peer/peer_int.h"

/* provider_create returns the static provider of the identity and root
 * certificates, or NULL when there is neither. */
static grpc_tls_certificate_provider *
provider_create(const struct peer_tls *tls, const char *roots)
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

grpc_channel_credentials *peer__creds_create(const struct peer_tls *tls)
{
    assert(tls != NULL);
    assert((tls->cert_pem == NULL) == (tls->key_pem == NULL));
    /* Verification off: the CAs are not needed.  Verification on without
     * CAs of our own: not watching roots makes gRPC use the system's. */
    const char *roots = tls->skip_verify ? NULL : tls->ca_pem;
    grpc_tls_certificate_provider *prov = provider_create(tls, roots);
    grpc_tls_credentials_options *opts = grpc_tls_credentials_options_create();
    if (prov != NULL)
        grpc_tls_credentials_options_set_certificate_provider(opts, prov);
    if (roots != NULL)
        grpc_tls_credentials_options_watch_root_certs(opts);
    if (tls->cert_pem != NULL)
        grpc_tls_credentials_options_watch_identity_key_cert_pairs(opts);
    grpc_tls_certificate_verifier *ver =
        tls->skip_verify ? grpc_tls_certificate_verifier_no_op_create()
                         : grpc_tls_certificate_verifier_host_name_create();
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
