/*
 * x509_host.h - whether a certificate is valid for a host, as Go decides.
 *
 * etcd's --client-cert-allowed-hostname and --peer-cert-allowed-hostname
 * (and its dialers' checks) use Go's x509 Certificate.VerifyHostname: an
 * IP literal is matched against the IP SANs only, a name against the DNS
 * SANs only, a wildcard only as a whole leftmost label.  Go (1.15 and
 * later, with which etcd 3.4.23 is built) never falls back to the
 * subject's CN, where OpenSSL does by default for a certificate without
 * DNS SANs.  Shared by the server's TLS (rpc/tls.c) and the dialers'
 * (dial/verify.c).  Pure and thread-safe.
 */
#ifndef CETCD_UTIL_X509_HOST_H
#define CETCD_UTIL_X509_HOST_H

#include <stdbool.h>

#include <openssl/x509.h>

/* x509_valid_for_host: x is valid for host (a name or an IP literal, NUL
 * terminated).  Leaves OpenSSL's error queue as it found it. */
bool x509_valid_for_host(X509 *x, const char *host);

#endif
