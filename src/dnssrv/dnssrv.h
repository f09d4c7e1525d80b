/*
 * dnssrv.h - DNS SRV lookups as etcd's discovery makes them (Go's
 * net.LookupSRV(service, "tcp", domain)): the query for
 * _<service>._tcp.<domain> goes to the system's resolver (libresolv,
 * /etc/resolv.conf); the answer is decoded here (dnssrv_parse, which a
 * fuzz target drives), ordered as Go orders it (by priority, then a
 * weighted shuffle within each priority, RFC 2782) and its targets keep
 * Go's trailing dot ("m1.example.com.").
 *
 * Threads: every function may be called from any thread (no shared
 * state; the resolver state is per call).
 */
#ifndef CETCD_DNSSRV_DNSSRV_H
#define CETCD_DNSSRV_DNSSRV_H

#include <stddef.h>
#include <stdint.h>

/* Records a lookup keeps at most (the others are dropped). */
#define DNSSRV_RECORDS_MAX 64

struct dnssrv_record {
    uint16_t priority, weight, port;
    char target[256]; /* "a.b.c." ("." : the service is not offered) */
};

/* dnssrv_parse decodes the SRV answers (class IN) of the DNS response
 * msg[0..len) into out[0..cap), in the message's order; other answers
 * are skipped, names may be compressed.  *n_out: how many (0 on error;
 * records past cap are skipped, not an error).  Returns 0,
 * ERR_NOTFOUND (the response says NXDOMAIN, or holds no SRV answer),
 * ERR_CORRUPT (the bytes are not a well-formed response, or the server
 * failed: SERVFAIL, REFUSED, ...). */
int dnssrv_parse(const uint8_t *msg, size_t len, struct dnssrv_record *out,
                 size_t cap, size_t *n_out);

/* dnssrv_order sorts r[0..n) by priority and shuffles each priority's
 * records by weight (RFC 2782), as Go's LookupSRV returns them. */
void dnssrv_order(struct dnssrv_record *r, size_t n);

/* dnssrv_lookup asks for _<service>._tcp.<domain> and gives the ordered
 * records.  Errors: ERR_NOTFOUND, ERR_CORRUPT, ERR_IO (no answer), each
 * with Go's text in why: "lookup _<service>._tcp.<domain> on
 * <nameserver>:53: no such host" (or "server misbehaving", "i/o
 * timeout"). */
int dnssrv_lookup(const char *service, const char *domain,
                  struct dnssrv_record *out, size_t cap, size_t *n_out,
                  char *why, size_t why_cap);

#endif
