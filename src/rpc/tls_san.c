/*
 * tls_san.c - the peer listener's check of a client certificate's SANs
 * against the address the client connects from, as etcd 3.4's checkSAN /
 * checkCertSAN / isHostInDNS (pkg/transport/listener_tls.go) make it
 * after the handshake of every connection that presented a certificate,
 * unless --experimental-peer-skip-client-san-verification:
 * - a certificate without IP and DNS SANs passes;
 * - an IP SAN equal to the remote IP passes;
 * - IP SANs only, none equal: refused with Go's x509.HostnameError text,
 *   "x509: certificate is valid for 10.0.0.1, 10.0.0.2, not 127.0.0.1";
 * - DNS SANs (and no IP SAN equal): the remote IP is looked up (reverse,
 *   PTR or /etc/hosts): a name it has (a trailing '.' cut) equal to a DNS
 *   SAN, or ending with a wildcard SAN's suffix ("*.example.com" ->
 *   ".example.com"), passes.  Else every DNS SAN but the wildcards is
 *   looked up (A and AAAA): one with the remote IP among its addresses
 *   passes.  Else refused with etcd's text, `tls: "127.0.0.1" does not
 *   match any of DNSNames ["a" "b"]`, followed by " (<error>)" when a
 *   lookup failed (the last failure: a forward one, else the reverse).
 * A unix socket has no host: Go's net.SplitHostPort fails on its address
 * and etcd refuses a certificate with SANs ("address @: missing port in
 * address"); so does cetcd.
 *
 * The lookups can take seconds, and an event loop must not wait for
 * them: rpc__tls_san_check answers RPC_TLS_LOOKUP instead, the runtime
 * makes the lookups on a thread (san_lookup.c, which also has the
 * system's resolver) with rpc__san_dns_match, and asks again with their
 * verdict.  Everything in this file is pure (no lookup of its own), so
 * the unit tests drive it with a resolver of their own.
 *
 * Lookup errors are worded as Go's own resolver (the one etcd 3.4 uses on
 * most systems) words a name that does not exist: "lookup nothere.invalid
 * on 10.0.0.53:53: no such host", "lookup 3.2.1.10.in-addr.arpa. on
 * 10.0.0.53:53: no such host" (san_lookup.c names the first nameserver of
 * /etc/resolv.conf, as Go's resolver asks it first); other failures get
 * the system's words.  The reverse lookup gives one name (getnameinfo),
 * where Go gives every PTR record and every /etc/hosts line of the
 * address; a name among the others is still found by its forward lookup,
 * a wildcard SAN is matched against the one name only.
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

void rpc__go_quote(const char *s, char *buf, size_t cap, size_t *at)
{
    assert(s != NULL && buf != NULL && cap > 0 && at != NULL);
    static const char esc_from[] = "\a\b\f\n\r\t\v", esc_to[] = "abfnrtv";
    size_t o = *at;
    if (o + 1 < cap)
        buf[o++] = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0';
         p++) {
        const char *e = *p != '\0' ? strchr(esc_from, *p) : NULL;
        if (o + 5 >= cap)
            break; /* room for the longest escape and the quote */
        if (*p == '"' || *p == '\\') {
            buf[o++] = '\\';
            buf[o++] = (char)*p;
        } else if (e != NULL) {
            buf[o++] = '\\';
            buf[o++] = esc_to[e - esc_from];
        } else if (*p < 0x20 || *p >= 0x7f) {
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", *p);
        } else {
            buf[o++] = (char)*p;
        }
    }
    if (o + 1 < cap)
        buf[o++] = '"';
    buf[o] = '\0';
    *at = o;
    assert(*at < cap);
}

/* names_text writes a []string as Go's %q prints it, ["a" "b"], into buf
 * at *at. */
static void names_text(const char *const *names, size_t n, char *buf,
                       size_t cap, size_t *at)
{
    size_t o = *at;
    o += (size_t)snprintf(buf + o, cap - o, "[");
    for (size_t i = 0; i < n && o + 1 < cap; i++) {
        if (i > 0)
            o += (size_t)snprintf(buf + o, cap - o, " ");
        if (o + 1 < cap)
            rpc__go_quote(names[i], buf, cap, &o);
    }
    if (o + 1 < cap)
        o += (size_t)snprintf(buf + o, cap - o, "]");
    *at = o < cap ? o : cap - 1;
}

/* ptr_fits: a name of the remote IP (a trailing '.' cut) fits one of the
 * DNS SANs: equal to a plain one, or ending with a wildcard's suffix. */
static bool ptr_fits(const char *name, const char *const *sans, size_t n)
{
    size_t len = strlen(name);
    if (len > 0 && name[len - 1] == '.')
        len--;
    for (size_t i = 0; i < n; i++) {
        const char *s = sans[i];
        bool wild = s[0] == '*' && s[1] == '.';
        size_t sl = strlen(s) - (wild ? 1 : 0);
        if (wild && len >= sl && memcmp(name + len - sl, s + 1, sl) == 0)
            return true;
        if (!wild && len == sl && memcmp(name, s, len) == 0)
            return true;
    }
    return false;
}

bool rpc__san_dns_match(const char *ip, const char *const *sans, size_t n,
                        const struct rpc__resolver *r, char *why, size_t cap)
{
    assert(ip != NULL && r != NULL && why != NULL && cap > 0);
    assert(sans != NULL || n == 0);
    char names[RPC__PTR_NAMES_MAX][RPC__DNS_NAME_MAX];
    char err[RPC__DNS_ERR_MAX] = "", ferr[RPC__DNS_ERR_MAX];
    int got = r->reverse(r->ctx, ip, names, RPC__PTR_NAMES_MAX, err,
                         sizeof err);
    for (int i = 0; i < got && i < RPC__PTR_NAMES_MAX; i++) {
        names[i][RPC__DNS_NAME_MAX - 1] = '\0';
        if (ptr_fits(names[i], sans, n))
            return true;
    }
    if (got >= 0)
        err[0] = '\0'; /* the reverse lookup answered */
    for (size_t i = 0; i < n; i++) {
        if (sans[i][0] == '*' && sans[i][1] == '.')
            continue; /* a wildcard has no address */
        ferr[0] = '\0';
        int has = r->forward(r->ctx, sans[i], ip, ferr, sizeof ferr);
        if (has > 0)
            return true;
        if (has < 0)
            memcpy(err, ferr, sizeof err); /* the last failure is told */
    }
    size_t at = (size_t)snprintf(why, cap, "tls: ");
    rpc__go_quote(ip, why, cap, &at);
    at += (size_t)snprintf(why + at, cap - at,
                           " does not match any of DNSNames ");
    if (at < cap)
        names_text(sans, n, why, cap, &at);
    err[sizeof err - 1] = '\0';
    if (err[0] != '\0' && at < cap)
        snprintf(why + at, cap - at, " (%s)", err);
    assert(why[0] != '\0');
    return false;
}

void rpc__san_lists(X509 *x, char *buf, size_t cap)
{
    assert(x != NULL && buf != NULL && cap > 0);
    GENERAL_NAMES *names = X509_get_ext_d2i(x, NID_subject_alt_name, NULL,
                                            NULL);
    size_t at = (size_t)snprintf(buf, cap, "IPAddresses [");
    for (int pass = 0; pass < 2 && at < cap; pass++) {
        bool first = true;
        for (int i = 0; i < sk_GENERAL_NAME_num(names) && at + 1 < cap;
             i++) {
            const GENERAL_NAME *g = sk_GENERAL_NAME_value(names, i);
            char text[256] = "";
            size_t n = 0;
            int len = g->type == GEN_DNS ? ASN1_STRING_length(g->d.dNSName)
                                         : 0;
            if (pass == 0 && g->type == GEN_IPADD)
                ip_text(g->d.iPAddress, text, sizeof text, &n);
            else if (pass == 1 && g->type == GEN_DNS)
                snprintf(text, sizeof text, "%.*s", len < 255 ? len : 255,
                         (const char *)ASN1_STRING_get0_data(g->d.dNSName));
            else
                continue;
            if (!first)
                at += (size_t)snprintf(buf + at, cap - at, " ");
            if (at + 1 < cap)
                rpc__go_quote(text, buf, cap, &at);
            first = false;
        }
        if (at + 1 < cap)
            at += (size_t)snprintf(buf + at, cap - at,
                                   pass == 0 ? "], DNSNames [" : "]");
    }
    GENERAL_NAMES_free(names);
}

/* san_count counts x's IP and DNS SANs and writes the IP SANs' text, as
 * Go's HostnameError lists them, into valid (cap bytes). */
static void san_count(X509 *x, int *ips_out, int *dns_out, char *valid,
                      size_t cap)
{
    GENERAL_NAMES *names = X509_get_ext_d2i(x, NID_subject_alt_name, NULL,
                                            NULL);
    size_t at = 0;
    *ips_out = *dns_out = 0;
    valid[0] = '\0';
    for (int i = 0; i < sk_GENERAL_NAME_num(names); i++) {
        const GENERAL_NAME *g = sk_GENERAL_NAME_value(names, i);
        if (g->type == GEN_DNS)
            (*dns_out)++;
        if (g->type == GEN_IPADD) {
            (*ips_out)++;
            ip_text(g->d.iPAddress, valid, cap, &at);
        }
    }
    GENERAL_NAMES_free(names);
}

enum rpc_tls_verdict rpc__tls_san_check(X509 *x, const char *remote_ip,
                                        const struct rpc_tls_dns *dns,
                                        char *why, size_t cap)
{
    assert(x != NULL && why != NULL && cap > 0);
    int ips, dns_n;
    char valid[512];
    san_count(x, &ips, &dns_n, valid, sizeof valid);
    enum rpc_tls_verdict v = RPC_TLS_REFUSE;
    if (ips + dns_n == 0)
        v = RPC_TLS_PASS;
    else if (remote_ip == NULL)
        snprintf(why, cap, "address @: missing port in address");
    else if (ips > 0 && X509_check_ip_asc(x, remote_ip, 0) == 1)
        v = RPC_TLS_PASS;
    else if (dns_n == 0)
        snprintf(why, cap, "x509: certificate is valid for %s, not %s",
                 valid, remote_ip);
    else if (dns == NULL)
        v = RPC_TLS_LOOKUP; /* rpc_tls_dns: the runtime asks again */
    else if (dns->match)
        v = RPC_TLS_PASS;
    else
        snprintf(why, cap, "%s", dns->why != NULL && dns->why[0] != '\0'
                                     ? dns->why
                                     : "tls: no DNS name matches");
    ERR_clear_error();
    assert(v != RPC_TLS_REFUSE || why[0] != '\0');
    return v;
}
