/*
 * ctl_compaction.c - "compaction": compacts the key-value history up to a
 * revision, as etcdctl 3.4.23's compaction command (--physical waits for
 * the backend).  Its revision goes through Go's strconv.ParseInt, which
 * put's --lease and txn's compares use as well, so this file also holds
 * the small Go-compatible helpers the KV commands share (ctl_kv.h).
 */
#include <inttypes.h>
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/commands.h"
#include "ctl/ctl_kv.h"
#include "ctl/print.h"

/* ------------------------------------------------------------------------
 * Shared helpers
 * ---------------------------------------------------------------------- */

const char *ctl_kv_quote(const char *s, size_t n, char *buf, size_t cap)
{
    FILE *f = fmemopen(buf, cap, "w");
    if (!f) {
        snprintf(buf, cap, "\"\"");
        return buf;
    }
    setbuf(f, NULL);
    ctl_quote(f, s, n);
    fclose(f);
    buf[cap - 1] = '\0';
    return buf;
}

/* What ctl_kv_keep took: a growing array of pointers. */
static struct {
    void **v;   /* the pointers */
    size_t n;   /* how many */
    size_t cap; /* room */
} kept;

void *ctl_kv_keep(void *p)
{
    if (!p)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    if (kept.n == kept.cap) {
        size_t cap = kept.cap ? kept.cap * 2 : 64;
        void **v = realloc(kept.v, cap * sizeof *v);
        if (!v)
            ctl_exit(CTL_EXIT_ERROR, "out of memory");
        kept.v = v;
        kept.cap = cap;
    }
    kept.v[kept.n++] = p;
    return p;
}

void ctl_kv_release(void)
{
    for (size_t i = 0; i < kept.n; i++)
        free(kept.v[i]);
    free(kept.v);
    kept.v = NULL;
    kept.n = kept.cap = 0;
}

struct ctl_kv_arg *ctl_kv_args_from(int argc, char **argv)
{
    struct ctl_kv_arg *a = ctl_kv_keep(calloc((size_t)argc + 1, sizeof *a));
    for (int i = 0; i < argc; i++)
        a[i] = (struct ctl_kv_arg){argv[i], strlen(argv[i])};
    return a;
}

/* digit is c's value in bases up to 36 (Go's ParseUint), or 99. */
static unsigned digit(char c)
{
    if (c >= '0' && c <= '9')
        return (unsigned)(c - '0');
    char l = (char)(c | 0x20);
    if (l >= 'a' && l <= 'z')
        return (unsigned)(l - 'a' + 10);
    return 99;
}

/* num_error writes Go's *NumError text for ParseInt. */
static int num_error(const char *s, size_t n, const char *why, char *err,
                     size_t cap)
{
    char q[512];
    snprintf(err, cap, "strconv.ParseInt: parsing %s: %s",
             ctl_kv_quote(s, n, q, sizeof q), why);
    return -1;
}

int ctl_kv_parse_int(const char *s, size_t n, int base, int64_t *out,
                     char *err, size_t cap)
{
    assert(base == 10 || base == 16);
    assert(s != NULL && out != NULL);
    size_t i = 0;
    bool neg = n > 0 && s[0] == '-';
    if (n > 0 && (s[0] == '+' || s[0] == '-'))
        i = 1;
    if (i == n)
        return num_error(s, n, "invalid syntax", err, cap);
    uint64_t v = 0, cutoff = UINT64_MAX / (uint64_t)base + 1;
    bool range = false;
    /* Go stops at the first bad digit or the first overflow, whichever
     * comes first from the left, and reports that one */
    for (; i < n && !range; i++) {
        unsigned d = digit(s[i]);
        if (d >= (unsigned)base)
            return num_error(s, n, "invalid syntax", err, cap);
        if (v >= cutoff || v * (uint64_t)base + d < v * (uint64_t)base)
            range = true;
        v = v * (uint64_t)base + d;
    }
    if (range || (!neg && v > (uint64_t)INT64_MAX) ||
        (neg && v > (uint64_t)INT64_MAX + 1))
        return num_error(s, n, "value out of range", err, cap);
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

/* ------------------------------------------------------------------------
 * The command
 * ---------------------------------------------------------------------- */

static bool physical;

static struct ctl_flag flags[] = {
    {"physical", 0, CTL_FLAG_BOOL, &physical, "false",
     "'true' to wait for compaction to physically remove all old revisions",
     false},
    CTL_FLAG_END,
};

static int run(int argc, char **argv)
{
    if (argc != 1)
        ctl_exit(CTL_EXIT_BAD_ARGS, "compaction command needs 1 argument");
    Etcdserverpb__CompactionRequest req =
        ETCDSERVERPB__COMPACTION_REQUEST__INIT;
    char err[512];
    if (ctl_kv_parse_int(argv[0], strlen(argv[0]), 10, &req.revision, err,
                         sizeof err))
        ctl_exit(CTL_EXIT_ERROR, "%s", err);
    req.physical = physical;
    (void)ctl_output_format(); /* etcdctl checks -w when it makes the
                                  client, though it prints one line */
    ProtobufCMessage *resp =
        ctl_call("/etcdserverpb.KV/Compact", &req.base,
                 &etcdserverpb__compaction_response__descriptor);
    protobuf_c_message_free_unpacked(resp, NULL);
    printf("compacted revision %" PRId64 "\n", req.revision);
    return CTL_EXIT_SUCCESS;
}

const struct ctl_cmd ctl_cmd_compaction = {
    .use = "compaction [options] <revision>",
    .short_desc = "Compacts the event history in etcd",
    .flags = flags,
    .run = run,
};
