/*
 * url.c - endpoint and peer URLs into gRPC targets (see dial.h).
 *
 * Pure string work: unit-tested in tests/unit/test_dial.c without any
 * server.  The schemes are those etcd 3.4 accepts for client endpoints
 * and peer URLs (http, https, unix, unixs); a bare "host:port" is what
 * etcdctl's --endpoints takes most often.
 */
#include <assert.h>
#include <ctype.h>
#include <string.h>

#include "dial/dial.h"
#include "util/err.h"

/* hostport checks "host:port" or "host:port/" in [b, e) and copies it
 * without the slash into out. */
static int hostport(const char *b, const char *e, char *out, size_t cap)
{
    const char *colon = NULL;
    if (e > b && e[-1] == '/')
        e--;
    if (memchr(b, '/', (size_t)(e - b)) != NULL)
        return ERR_INVAL; /* a path (or an unknown scheme) */
    for (const char *p = b; p < e; p++) /* The last ':' ends an IPv6 host. */
        if (*p == ':')
            colon = p;
    if (colon == NULL || colon == b || colon + 1 == e || colon[-1] == ':')
        return ERR_INVAL;
    for (const char *p = colon + 1; p < e; p++)
        if (!isdigit((unsigned char)*p))
            return ERR_INVAL;
    size_t n = (size_t)(e - b);
    if (n + 1 > cap)
        return ERR_INVAL;
    memcpy(out, b, n);
    out[n] = '\0';
    return 0;
}

/* socket_path writes "unix:" and the path [b, e) into out. */
static int socket_path(const char *b, const char *e, char *out, size_t cap)
{
    size_t n = (size_t)(e - b);
    if (n == 0 || n + 6 > cap || memchr(b, '\0', n) != NULL)
        return ERR_INVAL;
    memcpy(out, "unix:", 5);
    memcpy(out + 5, b, n);
    out[5 + n] = '\0';
    return 0;
}

int dial_url_parse(const char *url, size_t len, char *target_out,
                   size_t cap, enum dial_security *sec_out)
{
    static const struct {
        const char *prefix;       /* the scheme and "://" */
        bool unix_path;           /* a socket path follows */
        enum dial_security sec;   /* what the scheme asks for */
    } schemes[] = {
        {"http://", false, DIAL_SECURITY_PLAIN},
        {"https://", false, DIAL_SECURITY_TLS},
        {"unix://", true, DIAL_SECURITY_PLAIN},
        {"unixs://", true, DIAL_SECURITY_TLS},
    };
    assert(target_out != NULL && cap > 0 && sec_out != NULL);
    *sec_out = DIAL_SECURITY_DEFAULT;
    target_out[0] = '\0';
    if (url == NULL || len == 0)
        return ERR_INVAL;
    const char *e = url + len;
    for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
        size_t n = strlen(schemes[i].prefix);
        if (len < n || strncmp(url, schemes[i].prefix, n) != 0)
            continue;
        *sec_out = schemes[i].sec;
        return schemes[i].unix_path
                   ? socket_path(url + n, e, target_out, cap)
                   : hostport(url + n, e, target_out, cap);
    }
    return hostport(url, e, target_out, cap);
}
