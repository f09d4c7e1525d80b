/*
 * ctl_kv.h - what the KV commands of cetcdctl (get, put, del, txn,
 * compaction) share.
 *
 * etcdctl's txn builds each of its operations by running a private copy of
 * the get, put and del commands on the line's words: the same flags, the
 * same argument checks and error lines.  So ctl_get.c, ctl_put.c and
 * ctl_del.c export here their flag tables, request builders and simple
 * printers, and a description of themselves as txn sees them (struct
 * ctl_kv_kind); ctl_txn.c only parses lines and prints.
 *
 * Memory: builders make requests that point into their arguments and into
 * memory they allocate and never free (cetcdctl makes one call and exits).
 * Threads: none; the flag variables are the commands' statics.
 */
#ifndef CETCD_CTL_KV_H
#define CETCD_CTL_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctl/ctl.h"
#include "etcdserverpb/rpc.pb-c.h"

/* One argument as bytes: a txn line can spell a NUL ("\x00"). */
struct ctl_kv_arg {
    const char *p; /* the bytes (NUL-terminated as well) */
    size_t n;      /* how many, without the terminator */
};

/* A command as txn's private copy of it sees it. */
struct ctl_kv_kind {
    const char *name;       /* "get", "put", "del" */
    struct ctl_flag *flags; /* the command's flags (shared with it) */
    /* cobra's default help and usage texts of the private copy (not
     * etcdctl's template): help_head precedes "\n\n" and the usage */
    const char *help_head;
    const char *usage;
    /* build the operation from the positional arguments after the flags
     * were parsed; exits as etcdctl does on bad arguments */
    void (*build)(const struct ctl_kv_arg *args, int n,
                  Etcdserverpb__RequestOp *op_out);
};

extern const struct ctl_kv_kind ctl_kv_get_kind; /* ctl_get.c */
extern const struct ctl_kv_kind ctl_kv_put_kind; /* ctl_put.c */
extern const struct ctl_kv_kind ctl_kv_del_kind; /* ctl_del.c */

/* The simple printer's output for each answer (etcdctl's simplePrinter):
 * get prints key and value lines (value_only: values alone), put "OK"
 * and the previous pair, del the count and the deleted pairs.  --hex
 * applies. */
void ctl_kv_range_simple(const Etcdserverpb__RangeResponse *r,
                         bool value_only);
void ctl_kv_put_simple(const Etcdserverpb__PutResponse *r);
void ctl_kv_del_simple(const Etcdserverpb__DeleteRangeResponse *r);

/* ctl_kv_prefix_end is the range end of every key starting with key
 * (clientv3's getPrefix; allocated, or "\0" when key is all 0xff). */
ProtobufCBinaryData ctl_kv_prefix_end(const struct ctl_kv_arg *key);

/* ctl_kv_keep takes p (from malloc; NULL: out of memory, exits) into the
 * memory the request being built points into, and returns it;
 * ctl_kv_release frees all of it once the call is done.  What is kept
 * stays reachable, so the leak checker stays quiet on the exits. */
void *ctl_kv_keep(void *p);
void ctl_kv_release(void);

/* ctl_kv_args_from wraps argv strings as arguments (kept). */
struct ctl_kv_arg *ctl_kv_args_from(int argc, char **argv);

/* ctl_kv_parse_int is Go's strconv.ParseInt(s, base, 64) for base 10 or
 * 16 (no prefixes, no underscores, an optional sign): 0, or -1 with Go's
 * error text in err ("strconv.ParseInt: parsing \"x\": invalid syntax",
 * "... value out of range"). */
int ctl_kv_parse_int(const char *s, size_t n, int base, int64_t *out,
                     char *err, size_t cap);

/* ctl_kv_quote writes Go's %q of n bytes into buf (cut to cap). */
const char *ctl_kv_quote(const char *s, size_t n, char *buf, size_t cap);

#endif /* CETCD_CTL_KV_H */
