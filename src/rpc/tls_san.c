/*
 * tls_san.c - the peer listener's check of a client certificate's SANs
 * against the address the client connects from, as etcd 3.4's checkSAN /
 * checkCertSAN (pkg/transport/listener_tls.go) make it after the
 * handshake of every connection that presented a certificate, unless
 * --experimental-peer-skip-client-san-verification:
 * - a certificate without IP and DNS SANs passes;
 * - an IP SAN equal to the remote IP passes;
 * - IP SANs only, none equal: refused with Go's x509.HostnameError text,
 *   "x509: certificate is valid for 10.0.0.1, 10.0.0.2, not 127.0.0.1";
 * - DNS SANs: etcd looks the remote IP up (PTR) and each name up (A/AAAA)
 *   and passes the certificate when one matches.  Those lookups would
 *   block an event loop, so cetcd makes none and lets the certificate
 *   pass: only certificates with IP SANs and no DNS SAN are refused here.
 *   A documented difference (docs/ARCHITECTURE.md, TLS row).
 * A unix socket has no host: Go's net.SplitHostPort fails on its address
 * and etcd refuses a certificate with SANs ("address @: missing port in
 * address"); so does cetcd.
 */
#include <arpa/inet.h>
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "rpc/rpc_int.h"

/* ip_text appends the text of one IP SAN (4 or 16 bytes, as Go's
 * net.IP.String prints it) to buf at *at. */
static void ip_text(const ASN1_OCTET_STRING *ip, char *buf, size_t cap,
                    size_t *at)
{
    char text[INET6_ADDRSTRLEN] = "?";
    int len = ASN1_STRING_length(ip);
    const unsigned char *d = ASN1_STRING_get0_data(ip);
    if (len == 4)
        inet_ntop(AF_INET, d, text, sizeof text);
    else if (len == 16)
        inet_ntop(AF_INET6, d, text, sizeof text);
    int n = snprintf(buf + *at, cap - *at, "%s%s", *at > 0 ? ", " : "", text);
    if (n > 0 && (size_t)n < cap - *at)
        *at += (size_t)n;
}

bool rpc__tls_san_check(X509 *x, const char *remote_ip, char *why,
                        size_t cap)
{
    assert(x != NULL && why != NULL && cap > 0);
    GENERAL_NAMES *names = X509_get_ext_d2i(x, NID_subject_alt_name, NULL,
                                            NULL);
    int ips = 0, dns = 0;
    char valid[512] = "";
    size_t at = 0;
    for (int i = 0; i < sk_GENERAL_NAME_num(names); i++) {
        const GENERAL_NAME *g = sk_GENERAL_NAME_value(names, i);
        if (g->type == GEN_DNS)
            dns++;
        if (g->type == GEN_IPADD) {
            ips++;
            ip_text(g->d.iPAddress, valid, sizeof valid, &at);
        }
    }
    GENERAL_NAMES_free(names);
    bool ok = ips + dns == 0 ||
              (remote_ip != NULL && ips > 0 &&
               X509_check_ip_asc(x, remote_ip, 0) == 1) ||
              (remote_ip != NULL && dns > 0); /* no lookups: see above */
    ERR_clear_error();
    if (!ok && remote_ip == NULL)
        snprintf(why, cap, "address @: missing port in address");
    else if (!ok)
        snprintf(why, cap, "x509: certificate is valid for %s, not %s",
                 valid, remote_ip);
    assert(ok || why[0] != '\0');
    return ok;
}
