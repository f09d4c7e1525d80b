/*
 * x509_host.c - Go's VerifyHostname rules on OpenSSL's checks (see
 * x509_host.h).
 */
#include "util/x509_host.h"

#include <arpa/inet.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

bool x509_valid_for_host(X509 *x, const char *host)
{
    unsigned char ip[16];
    bool ok;
    if (x == NULL || host == NULL)
        return false;
    ERR_set_mark();
    if (inet_pton(AF_INET, host, ip) == 1 ||
        inet_pton(AF_INET6, host, ip) == 1)
        ok = X509_check_ip_asc(x, host, 0) == 1;
    else
        ok = X509_check_host(x, host, strlen(host),
                             X509_CHECK_FLAG_NEVER_CHECK_SUBJECT |
                                 X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS,
                             NULL) == 1;
    ERR_pop_to_mark();
    return ok;
}
