/*
 * endpoint.c - the pure parts of libcetcd: endpoint list parsing (each
 * item through dial_url_parse), failover order, which methods are safe to
 * retry, status codes and their names.
 *
 * Nothing here touches gRPC, so tests/unit/test_client.c covers it fully.
 */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "client/client_int.h"
#include "util/str.h"

static const char *const code_names[] = {
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
    "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
};

const char *cetcd_code_name(int code)
{
    if (code < 0 || code >= (int)(sizeof(code_names) / sizeof(code_names[0])))
        return "UNKNOWN_CODE";
    return code_names[code];
}

int client__status_set(struct cetcd_status *st, int code, const char *fmt,
                       ...)
{
    va_list ap;

    assert(code >= 0);
    if (st == NULL)
        return code;
    st->code = code;
    va_start(ap, fmt);
    vsnprintf(st->message, sizeof(st->message), fmt, ap);
    va_end(ap);
    return code;
}

/* item_parse parses one item [b, e), without the whitespace around it. */
static int item_parse(const char *b, const char *e,
                      char out[CLIENT_TARGET_MAX], enum dial_security *sec)
{
    str_trim(&b, &e);
    if (dial_url_parse(b, (size_t)(e - b), out, CLIENT_TARGET_MAX, sec) != 0)
        return CETCD_INVALID_ARGUMENT;
    return 0;
}

int client__endpoints_parse(const char *s, char (*out)[CLIENT_TARGET_MAX],
                            enum dial_security *sec_out, size_t max,
                            size_t *n_out)
{
    size_t n = 0;
    const char *b = s;

    assert(out != NULL && sec_out != NULL && n_out != NULL);
    *n_out = 0;
    if (s == NULL || max == 0)
        return CETCD_INVALID_ARGUMENT;
    for (;;) {
        const char *e = strchr(b, ',');
        if (e == NULL)
            e = b + strlen(b);
        if (n == max)
            return CETCD_INVALID_ARGUMENT;
        if (item_parse(b, e, out[n], &sec_out[n]) != 0)
            return CETCD_INVALID_ARGUMENT;
        n++;
        if (*e == '\0')
            break;
        b = e + 1;
    }
    assert(n >= 1 && n <= max);
    *n_out = n;
    return 0;
}

size_t client__failover_order(size_t cur, size_t n, size_t attempt)
{
    assert(n > 0 && cur < n);
    return (cur + attempt) % n;
}

bool client__method_is_readonly(const char *method_path)
{
    static const char *const ro[] = {
        "/etcdserverpb.KV/Range",
        "/etcdserverpb.Maintenance/Status",
        "/etcdserverpb.Maintenance/Hash",
        "/etcdserverpb.Maintenance/HashKV",
        "/etcdserverpb.Cluster/MemberList",
        "/etcdserverpb.Lease/LeaseTimeToLive",
        "/etcdserverpb.Lease/LeaseLeases",
    };

    assert(method_path != NULL);
    for (size_t i = 0; i < sizeof(ro) / sizeof(ro[0]); i++)
        if (strcmp(method_path, ro[i]) == 0)
            return true;
    return false;
}
