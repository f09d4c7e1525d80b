/*
 * tls_alert.c - Go's names of TLS alerts (see tls_alert.h): the alert
 * numbers of RFC 8446 section 6 with the words crypto/tls prints, and
 * OpenSSL's words for the same alerts (ssl/ssl_stat.c's long strings,
 * lower-cased as they appear in its error reasons).
 */
#include "util/tls_alert.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

static const struct {
    int desc;            /* the alert number */
    const char *go;      /* crypto/tls's text */
    const char *openssl; /* OpenSSL's reason text after "alert " */
} alerts[] = {
    {0, "close notify", "close notify"},
    {10, "unexpected message", "unexpected message"},
    {20, "bad record MAC", "bad record mac"},
    {21, "decryption failed", "decryption failed"},
    {22, "record overflow", "record overflow"},
    {30, "decompression failure", "decompression failure"},
    {40, "handshake failure", "handshake failure"},
    {42, "bad certificate", "bad certificate"},
    {43, "unsupported certificate", "unsupported certificate"},
    {44, "revoked certificate", "certificate revoked"},
    {45, "expired certificate", "certificate expired"},
    {46, "unknown certificate", "certificate unknown"},
    {47, "illegal parameter", "illegal parameter"},
    {48, "unknown certificate authority", "unknown ca"},
    {49, "access denied", "access denied"},
    {50, "error decoding message", "decode error"},
    {51, "error decrypting message", "decrypt error"},
    {60, "export restriction", "export restriction"},
    {70, "protocol version not supported", "protocol version"},
    {71, "insufficient security level", "insufficient security"},
    {80, "internal error", "internal error"},
    {86, "inappropriate fallback", "inappropriate fallback"},
    {90, "user canceled", "user cancelled"},
    {100, "no renegotiation", "no renegotiation"},
    {109, "missing extension", "missing extension"},
    {110, "unsupported extension", "unsupported extension"},
    {111, "certificate unobtainable", "certificate unobtainable"},
    {112, "unrecognized name", "unrecognized name"},
    {113, "bad certificate status response",
     "bad certificate status response"},
    {114, "bad certificate hash value", "bad certificate hash value"},
    {115, "unknown PSK identity", "unknown psk identity"},
    {116, "certificate required", "certificate required"},
    {120, "no application protocol", "no application protocol"},
};

#define ALERTS_N (sizeof alerts / sizeof alerts[0])

const char *tls_alert_text(int desc, char *buf, size_t cap)
{
    assert(buf != NULL && cap > 0);
    for (size_t i = 0; i < ALERTS_N; i++)
        if (alerts[i].desc == desc) {
            snprintf(buf, cap, "%s", alerts[i].go);
            return buf;
        }
    snprintf(buf, cap, "alert(%d)", desc);
    return buf;
}

int tls_alert_from_openssl(const char *text)
{
    if (text == NULL)
        return -1;
    /* "sslv3 alert X" (TLS <= 1.2 names) or "tlsv1 alert X" / "tlsv13
     * alert X" (the later ones). */
    const char *a = strstr(text, " alert ");
    if (a == NULL)
        return -1;
    a += 7;
    for (size_t i = 0; i < ALERTS_N; i++) {
        size_t n = strlen(alerts[i].openssl);
        if (strncmp(a, alerts[i].openssl, n) == 0 &&
            (a[n] == '\0' || a[n] == ':' || a[n] == ' ' || a[n] == '\n'))
            return alerts[i].desc;
    }
    return -1;
}
