/*
 * fuzz_dnssrv_parse.c - goal: the DNS SRV answer decoder (src/dnssrv/)
 * survives any bytes a nameserver sends: it never reads outside them,
 * never loops on compression pointers, gives at most the records it was
 * given room for, each target a NUL-terminated name ending in '.' that
 * fits its buffer; and Go's order of what it decoded keeps every record
 * and sorts them by priority.
 *
 * Method: the whole input is one response message; it is decoded with
 * room for 1 and for DNSSRV_RECORDS_MAX records (the first must be a
 * prefix of the second), then ordered.  Seeds: fuzz/corpus/dnssrv_parse
 * (responses as tests/common/fakedns.py writes them: SRV answers with
 * compressed owner names, NXDOMAIN, an A answer).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dnssrv/dnssrv.h"
#include "util/err.h"

static void check_records(const struct dnssrv_record *r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        size_t len = strnlen(r[i].target, sizeof r[i].target);
        if (len == 0 || len == sizeof r[i].target ||
            r[i].target[len - 1] != '.')
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct dnssrv_record one[1], all[DNSSRV_RECORDS_MAX];
    size_t n1 = 0, n = 0;
    int rc1 = dnssrv_parse(data, size, one, 1, &n1);
    int rc = dnssrv_parse(data, size, all, DNSSRV_RECORDS_MAX, &n);
    if (rc != 0 && rc != ERR_NOTFOUND && rc != ERR_CORRUPT)
        abort();
    if (n1 > 1 || n > DNSSRV_RECORDS_MAX || (rc == 0) != (n > 0))
        abort();
    check_records(one, n1);
    check_records(all, n);
    /* A bigger room decodes the same first record (a malformed record
     * past the first may fail the bigger decode only). */
    if (rc1 == 0 && rc == 0 &&
        (one[0].priority != all[0].priority ||
         one[0].weight != all[0].weight || one[0].port != all[0].port ||
         strcmp(one[0].target, all[0].target) != 0))
        abort();
    if (rc == 0) {
        unsigned long sum = 0;
        for (size_t i = 0; i < n; i++)
            sum += all[i].port + all[i].priority + all[i].weight;
        dnssrv_order(all, n);
        unsigned long after = 0;
        for (size_t i = 0; i < n; i++) {
            after += all[i].port + all[i].priority + all[i].weight;
            if (i > 0 && all[i - 1].priority > all[i].priority)
                abort();
        }
        if (after != sum)
            abort();
        check_records(all, n);
    }
    return 0;
}
