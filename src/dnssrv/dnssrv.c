/*
 * dnssrv.c - SRV lookups: the query through libresolv, the answer decoded
 * here, Go's order.  See dnssrv.h.
 */
#include "dnssrv/dnssrv.h"

#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <ctype.h>
#include <netdb.h>
#include <netinet/in.h>
#include <resolv.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "util/mem.h"

#define TYPE_SRV 33
#define CLASS_IN 1
#define HEADER_BYTES 12
/* Compression pointers followed in one name at most (a loop guard). */
#define NAME_JUMPS_MAX 64

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

/* The name at msg[*pos]: its end is stored in *pos (after the first
 * pointer, if any); written as "a.b." into out (cap bytes) when out is
 * not NULL.  false: malformed, too long, or a pointer loop. */
static bool read_name(const uint8_t *msg, size_t len, size_t *pos, char *out,
                      size_t cap)
{
    size_t p = *pos, w = 0, end = 0;
    int jumps = 0;
    for (;;) {
        if (p >= len)
            return false;
        uint8_t l = msg[p];
        if ((l & 0xc0) == 0xc0) {
            if (p + 1 >= len || ++jumps > NAME_JUMPS_MAX)
                return false;
            if (end == 0)
                end = p + 2;
            p = (size_t)(l & 0x3f) << 8 | msg[p + 1];
            continue;
        }
        if ((l & 0xc0) != 0)
            return false; /* the 0x40/0x80 label types are obsolete */
        if (l == 0) {
            if (end == 0)
                end = p + 1;
            break;
        }
        if (p + 1 + l > len)
            return false;
        if (out != NULL) {
            if (w + l + 2 > cap || w + l + 1 > 254)
                return false;
            /* Go's isDomainName: letters, digits, '-' and '_' only (it
             * refuses an answer naming anything else). */
            for (size_t i = 0; i < l; i++) {
                uint8_t ch = msg[p + 1 + i];
                if (!isalnum(ch) && ch != '-' && ch != '_')
                    return false;
            }
            memcpy(out + w, msg + p + 1, l);
            w += l;
            out[w++] = '.';
        }
        p += 1 + l;
    }
    if (out != NULL) {
        if (w == 0) {
            if (cap < 2)
                return false;
            out[w++] = '.'; /* the root */
        }
        out[w] = '\0';
    }
    *pos = end;
    return true;
}

static int parse(const uint8_t *msg, size_t len, struct dnssrv_record *out,
                 size_t cap, size_t *n_out)
{
    if (len < HEADER_BYTES || !(msg[2] & 0x80))
        return ERR_CORRUPT; /* short, or a query, not a response */
    unsigned rcode = msg[3] & 0x0f;
    if (rcode == 3)
        return ERR_NOTFOUND;
    if (rcode != 0)
        return ERR_CORRUPT;
    size_t qd = get16(msg + 4), an = get16(msg + 6);
    size_t pos = HEADER_BYTES;
    for (size_t i = 0; i < qd; i++) {
        if (!read_name(msg, len, &pos, NULL, 0) || pos + 4 > len)
            return ERR_CORRUPT;
        pos += 4;
    }
    for (size_t i = 0; i < an; i++) {
        if (!read_name(msg, len, &pos, NULL, 0) || pos + 10 > len)
            return ERR_CORRUPT;
        uint16_t type = get16(msg + pos), class = get16(msg + pos + 2);
        size_t rdlen = get16(msg + pos + 8);
        pos += 10;
        if (pos + rdlen > len)
            return ERR_CORRUPT;
        size_t rd = pos;
        pos += rdlen;
        if (type != TYPE_SRV || class != CLASS_IN || *n_out == cap)
            continue;
        if (rdlen < 7)
            return ERR_CORRUPT;
        struct dnssrv_record *r = &out[*n_out];
        r->priority = get16(msg + rd);
        r->weight = get16(msg + rd + 2);
        r->port = get16(msg + rd + 4);
        size_t t = rd + 6;
        /* The target may point anywhere before; it must end inside the
         * record's data. */
        if (!read_name(msg, len, &t, r->target, sizeof r->target) ||
            t > pos)
            return ERR_CORRUPT;
        (*n_out)++;
    }
    return *n_out > 0 ? 0 : ERR_NOTFOUND;
}

int dnssrv_parse(const uint8_t *msg, size_t len, struct dnssrv_record *out,
                 size_t cap, size_t *n_out)
{
    *n_out = 0;
    int rc = parse(msg, len, out, cap, n_out);
    if (rc != 0)
        *n_out = 0;
    return rc;
}

static int by_priority(const void *a, const void *b)
{
    const struct dnssrv_record *x = a, *y = b;
    return (int)x->priority - (int)y->priority;
}

void dnssrv_order(struct dnssrv_record *r, size_t n)
{
    qsort(r, n, sizeof *r, by_priority);
    for (size_t lo = 0; lo < n;) {
        size_t hi = lo;
        while (hi < n && r[hi].priority == r[lo].priority)
            hi++;
        /* Within [lo, hi): pick each next record with a chance
         * proportional to its weight (all zero: leave the order). */
        for (size_t i = lo; i + 1 < hi; i++) {
            unsigned long sum = 0;
            for (size_t k = i; k < hi; k++)
                sum += r[k].weight;
            if (sum == 0)
                break;
            unsigned long s = (unsigned long)random() % sum;
            size_t k = i;
            for (; k < hi; k++) {
                if (s < r[k].weight)
                    break;
                s -= r[k].weight;
            }
            if (k < hi && k != i) {
                struct dnssrv_record t = r[i];
                r[i] = r[k];
                r[k] = t;
            }
        }
        lo = hi;
    }
}

int dnssrv_lookup(const char *service, const char *domain,
                  struct dnssrv_record *out, size_t cap, size_t *n_out,
                  char *why, size_t why_cap)
{
    char qname[512];
    *n_out = 0;
    snprintf(qname, sizeof qname, "_%s._tcp.%s", service, domain);
    struct __res_state st;
    memset(&st, 0, sizeof st);
    char ns[64] = "127.0.0.1";
    if (res_ninit(&st) != 0) {
        snprintf(why, why_cap, "lookup %s: no resolver configured", qname);
        return ERR_IO;
    }
    if (st.nscount > 0 && st.nsaddr_list[0].sin_family == AF_INET)
        inet_ntop(AF_INET, &st.nsaddr_list[0].sin_addr, ns, sizeof ns);
    uint8_t *answer = mem_malloc(65536);
    int n = answer == NULL ? -1 :
            res_nquery(&st, qname, CLASS_IN, TYPE_SRV, answer, 65536);
    int herr = st.res_h_errno;
    res_nclose(&st);
    int rc;
    if (n < 0) {
        rc = herr == HOST_NOT_FOUND || herr == NO_DATA ? ERR_NOTFOUND :
             herr == TRY_AGAIN ? ERR_IO : ERR_CORRUPT;
    } else {
        /* n > 65536: the reply was cut to the buffer (then malformed). */
        rc = dnssrv_parse(answer, n > 65536 ? 65536 : (size_t)n, out, cap,
                          n_out);
    }
    mem_free(answer);
    if (rc == 0) {
        dnssrv_order(out, *n_out);
        return 0;
    }
    snprintf(why, why_cap, "lookup %s on %s:53: %s", qname, ns,
             rc == ERR_NOTFOUND ? "no such host" :
             rc == ERR_IO ? "i/o timeout" : "server misbehaving");
    return rc;
}
