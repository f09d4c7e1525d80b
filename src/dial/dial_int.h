/*
 * dial_int.h - declarations shared between the files of src/dial (the
 * manual is dial.h).
 */
#ifndef CETCD_DIAL_DIAL_INT_H
#define CETCD_DIAL_DIAL_INT_H

#include <stdbool.h>

#include <grpc/grpc_security.h>
#include <openssl/x509.h>

#include "dial/dial.h"

/*
 * dial__verifier_create returns gRPC's certificate verifier for tls when
 * it has an allowed CN or hostname (verify.c): the host name check
 * (unless skip_verify), then the allowed-name check.  The strings are
 * copied.  The caller releases it with grpc_tls_certificate_verifier_release
 * (the credentials options take their own reference).  NULL on no memory.
 */
grpc_tls_certificate_verifier *
dial__verifier_create(const struct dial_tls *tls);

/*
 * dial__cert_allowed: the certificate x carries the common name cn (the
 * subject's last, as Go's Subject.CommonName), or, when cn is NULL, is
 * valid for hostname as Go's VerifyHostname decides (an IP against the IP
 * SANs, a name against the DNS SANs, never the CN).  Exactly one of cn
 * and hostname is set.  False for a NULL x (verify.c).
 */
bool dial__cert_allowed(X509 *x, const char *cn, const char *hostname);

/*
 * dial__tls_refuse connects to target ("host:port"), starts a TLS
 * handshake and refuses the server's certificate inside it, so that the
 * server receives a "bad certificate" alert, as a Go dialler's refusal
 * sends one (probe.c).  Gives up after timeout_ms per socket operation;
 * failures are ignored (the alert is a courtesy).  Blocks the calling
 * thread.
 */
void dial__tls_refuse(const char *target, int timeout_ms);

#endif
