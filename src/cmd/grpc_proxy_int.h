/*
 * grpc_proxy_int.h - what the files of `cetcd grpc-proxy` (grpc_proxy.h)
 * share:
 *
 *   grpc_proxy.c         the main flow: start-up, serving, signals, the
 *                        plain error lines;
 *   grpc_proxy_flags.c   the flag table, cobra's and pflag's parsing, the
 *                        help texts and etcd's checkArgs;
 *   grpc_proxy_go.c      Go's texts pflag relies on: strconv's %q and
 *                        Parse*, encoding/csv's fields;
 *   grpc_proxy_tls.c     the TLS material of the listener and of the
 *                        upstream client: etcd's file checks and messages;
 *   grpc_proxy_listen.c  the check that the listen address can be bound,
 *                        with Go's net.Listen errors.
 *
 * Everything runs on the main thread, once, before the proxy's threads
 * exist; the static message buffers of these files rely on that.
 */
#ifndef CETCD_CMD_GRPC_PROXY_INT_H
#define CETCD_CMD_GRPC_PROXY_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cetcd/cetcd.h"
#include "rpc/rpc.h"
#include "rpc/tls.h"

/* Values one list flag (--endpoints, --listen-cipher-suites) holds. */
#define GRPC_PROXY_LIST_MAX CETCD_ENDPOINTS_MAX
/* Message buffers: the messages quote flag values (one argv string). */
#define GRPC_PROXY_MSG_MAX 8192

/* The start command's flags, in pflag's (alphabetical) help order: the
 * index of each in the table of grpc_proxy_flags.c and in the values. */
enum grpc_proxy_flag {
    GRPC_PROXY_F_ADVERTISE, GRPC_PROXY_F_AUTO_TLS, GRPC_PROXY_F_CACERT,
    GRPC_PROXY_F_CERT, GRPC_PROXY_F_CERT_FILE, GRPC_PROXY_F_CRL,
    GRPC_PROXY_F_DATA_DIR, GRPC_PROXY_F_DEBUG, GRPC_PROXY_F_SRV,
    GRPC_PROXY_F_SRV_NAME, GRPC_PROXY_F_PPROF, GRPC_PROXY_F_ENDPOINTS,
    GRPC_PROXY_F_LEASING, GRPC_PROXY_F_ORDERING, GRPC_PROXY_F_HELP,
    GRPC_PROXY_F_INSECURE_DISC, GRPC_PROXY_F_SKIP_VERIFY, GRPC_PROXY_F_KEY,
    GRPC_PROXY_F_KEY_FILE, GRPC_PROXY_F_LISTEN, GRPC_PROXY_F_SUITES,
    GRPC_PROXY_F_STREAMS, GRPC_PROXY_F_RECV, GRPC_PROXY_F_SEND,
    GRPC_PROXY_F_METRICS, GRPC_PROXY_F_NS, GRPC_PROXY_F_PREFIX,
    GRPC_PROXY_F_TTL, GRPC_PROXY_F_CA_FILE, GRPC_PROXY_F_N
};

/* One flag's value.  Owned by the main thread. */
struct grpc_proxy_flag_value {
    const char *s; /* a string: the default or an argv string */
    bool b;        /* a bool */
    int64_t i;     /* an int or uint32 */
    char *list[GRPC_PROXY_LIST_MAX]; /* a list: mem_malloc'd strings */
    size_t n;      /* a list: values in list */
    bool changed;  /* given on the command line */
};

/* --- grpc_proxy.c ------------------------------------------------------- */

/* grpc_proxy__plain_error is etcd's fmt.Fprintln(os.Stderr, err): closes
 * the log (its lines come first), prints the message and a newline on
 * stderr; returns 1, the exit code. */
int grpc_proxy__plain_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* grpc_proxy__std_fatal is Go's log.Fatal as etcd routes it through
 * capnslog ("<local time> I | msg" on stderr), after closing the log;
 * returns 1, the exit code. */
int grpc_proxy__std_fatal(const char *msg);

/* --- grpc_proxy_flags.c ------------------------------------------------- */

/* grpc_proxy__flags_parse parses `argv[0] grpc-proxy argv[2..]` (argc >=
 * 2) as cobra and pflag do, into vals (GRPC_PROXY_F_N values, zeroed or
 * freed by grpc_proxy__flags_free).  It prints the help of `grpc-proxy`
 * or of `start`, or an error, and returns the exit code; *start_out is
 * true (with 0) only when `start` has valid flags that passed etcd's
 * checkArgs and the refusal of the features cetcd has not built.  The
 * string values point into argv, which must outlive vals' use. */
int grpc_proxy__flags_parse(int argc, char **argv,
                            struct grpc_proxy_flag_value *vals,
                            bool *start_out);

/* grpc_proxy__flags_free frees what the values hold (lists); vals may be
 * zeroed or parsed. */
void grpc_proxy__flags_free(struct grpc_proxy_flag_value *vals);

/* --- grpc_proxy_go.c ---------------------------------------------------- */

/* What a Go strconv number parse says. */
enum grpc_proxy_go_num {
    GRPC_PROXY_GO_OK,     /* a number */
    GRPC_PROXY_GO_SYNTAX, /* strconv's "invalid syntax" */
    GRPC_PROXY_GO_RANGE,  /* strconv's "value out of range" */
};

/* grpc_proxy__go_quote writes s as Go's strconv.Quote (%q) into buf (cap
 * >= 16 bytes; cut if short) and returns buf. */
const char *grpc_proxy__go_quote(const char *s, char *buf, size_t cap);

/* grpc_proxy__go_quote_char writes Go's %q of the rune c (below 256), as
 * pflag names a shorthand ("'x'"), into buf (cap >= 16). */
void grpc_proxy__go_quote_char(unsigned char c, char *buf, size_t cap);

/* grpc_proxy__go_parse_bool is strconv.ParseBool: false when v is not
 * one of its words (*out then untouched). */
bool grpc_proxy__go_parse_bool(const char *v, bool *out);

/* grpc_proxy__go_parse_uint is strconv.ParseUint(s, 0, bits): Go's base
 * prefixes and underscores; *out is the value (its maximum on
 * GRPC_PROXY_GO_RANGE). */
enum grpc_proxy_go_num grpc_proxy__go_parse_uint(const char *s, int bits,
                                                 uint64_t *out);

/* grpc_proxy__go_parse_int is strconv.ParseInt(s, 0, 64). */
enum grpc_proxy_go_num grpc_proxy__go_parse_int(const char *s, int64_t *out);

/* grpc_proxy__csv_field reads one field of encoding/csv's first record
 * of v, starting at *p (inside v), into field[0..*n_out) (field has room
 * for strlen(v) bytes; not terminated), and leaves *p at the field's end
 * (',', a line end or NUL).  Returns 0, or -1 with csv's error in why. */
int grpc_proxy__csv_field(const char *v, const char **p, char *field,
                          size_t *n_out, char *why, size_t cap);

/* --- grpc_proxy_tls.c --------------------------------------------------- */

/* The listener's TLS material, from the flags or --auto-tls.  Zeroed by
 * the caller, released by grpc_proxy__srv_tls_close. */
struct grpc_proxy_srv_tls {
    bool on;                      /* etcd's tlsInfo != nil */
    const char *cert, *key, *ca;  /* the files */
    char auto_cert[1200], auto_key[1200]; /* --auto-tls's files */
    struct rpc_tls_opts opts;     /* --listen-cipher-suites */
    struct rpc_tls *tls;          /* loaded: rpc_tls_free */
};

/* grpc_proxy__srv_tls_prepare is etcd's newTLS for the listener:
 * --cert-file, --key-file, --trusted-ca-file, --listen-cipher-suites and
 * --auto-tls (a self-signed certificate in <data-dir>/fixtures/proxy),
 * logged as "gRPC proxy server TLS".  Returns 0, or 1 after printing. */
int grpc_proxy__srv_tls_prepare(const struct grpc_proxy_flag_value *v,
                                struct grpc_proxy_srv_tls *t);

/* grpc_proxy__srv_tls_load checks the files in etcd's order with its
 * messages (zap's "failed to create TLS listener" naming bound, the
 * listen address) and loads them into t->tls.  Returns 0 (nothing to do
 * without TLS), or 1 after printing. */
int grpc_proxy__srv_tls_load(const struct grpc_proxy_flag_value *v,
                             struct grpc_proxy_srv_tls *t,
                             const char *bound);

/* grpc_proxy__srv_tls_apply sets the TLS fields of cfg from t's loaded
 * material (none without it); cfg borrows t->tls until the close. */
void grpc_proxy__srv_tls_apply(const struct grpc_proxy_srv_tls *t,
                               struct rpc_server_config *cfg);

/* grpc_proxy__srv_tls_close frees what t loaded. */
void grpc_proxy__srv_tls_close(struct grpc_proxy_srv_tls *t);

/* The upstream client's TLS material.  Zeroed by the caller, released by
 * grpc_proxy__cli_tls_close. */
struct grpc_proxy_cli_tls {
    char *ca_pem, *cert_pem, *key_pem; /* the files' text: mem_free */
    struct cetcd_tls tls;              /* borrows the texts above */
    bool on;                           /* tls is to be used */
};

/* grpc_proxy__cli_tls_load is etcd's newClientCfg TLS: --cacert, --cert,
 * --key and --insecure-skip-tls-verify, checked as etcd's
 * TLSInfo.ClientConfig does (a client certificate must have an empty
 * CN), logged as etcd logs it.  Returns 0 (c->on false without those
 * flags), or 1 after printing. */
int grpc_proxy__cli_tls_load(const struct grpc_proxy_flag_value *v,
                             struct grpc_proxy_cli_tls *c);

/* grpc_proxy__cli_tls_close frees what c holds. */
void grpc_proxy__cli_tls_close(struct grpc_proxy_cli_tls *c);

/* --- grpc_proxy_listen.c ------------------------------------------------ */

/* grpc_proxy__listen_probe is Go's net.Listen("tcp", addr), closed at
 * once: returns 0 with the bound address as Go's l.Addr() names it in
 * bound (bcap bytes), or 1 after printing Go's error. */
int grpc_proxy__listen_probe(const char *addr, char *bound, size_t bcap);

#endif
