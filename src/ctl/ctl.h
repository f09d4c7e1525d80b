/*
 * ctl.h - cetcdctl, etcdctl 3.4's command line on libcetcd: the command
 * tree, flags, global options and the client the commands share.
 *
 * PURPOSE
 *   cetcdctl takes the arguments etcdctl 3.4.23 takes and answers with the
 *   same output, error lines and exit codes, so scripts and etcd's e2e
 *   tests can run it in etcdctl's place.  This header is the manual of the
 *   frame; the commands live one group per file (ctl_get.c, ...) and the
 *   output formats in print.h.
 *
 * COMMANDS
 *   A command is a static struct ctl_cmd: cobra's Use line (its first word
 *   is the name), Short and Long texts, its local flags and either a run
 *   function (a runnable command) or sub-commands (a group such as
 *   "member").  ctl_main() finds the command as cobra does (the first
 *   words that are not flags, a unique prefix of a name matches it),
 *   parses the flags anywhere on the line (pflag: "--x=v", "--x v",
 *   "-x v", "-xv", bool flags without a value, "--" ends the flags),
 *   applies ETCDCTL_* variables to the global flags that were not given,
 *   and calls run with the positional arguments.  Errors print as cobra
 *   and etcdctl print them (see ctl_main).
 *
 * FLAGS
 *   A command declares its flags as a static array of struct ctl_flag
 *   ending in CTL_FLAG_END.  Each points at the variable it sets; before
 *   parsing, every variable is set from the flag's default text (the
 *   text help prints, pflag's DefValue), so the two cannot disagree.
 *   ctl_flag_changed() says whether the user gave it.
 *
 * THE CLIENT
 *   ctl_client() opens the client on first use, from the global flags as
 *   etcdctl's mustClientFromCmd does (endpoints or --discovery-srv, TLS
 *   files, --user/--password then Authenticate), and exits as etcdctl
 *   does when it cannot.  Calls take ctl_timeout_ms() (--command-timeout)
 *   as their deadline where etcdctl uses commandCtx.
 *
 * ERRORS AND EXIT CODES
 *   ctl_exit() prints "Error: <text>" on stderr and exits with one of
 *   etcdctl's codes (enum ctl_exit).  ctl_exit_status() does so for a
 *   failed call, with the text etcdctl prints for it: etcd's own error
 *   text for the server's errors ("etcdserver: ..."), "context deadline
 *   exceeded" when the deadline passed or no endpoint answered within it,
 *   grpc-go's "rpc error: code = X desc = Y" for other statuses.
 *
 * THREADS
 *   The frame is single-threaded: commands that need more (watch, lease
 *   keep-alive, lock) start their own threads and own them.
 */
#ifndef CETCD_CTL_H
#define CETCD_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cetcd/cetcd.h"

/* The etcdctl version cetcdctl answers as (help, "version") and the API
 * version it speaks. */
#define CTL_VERSION "3.4.23"
#define CTL_API_VERSION "3.4"

/* etcdctl's exit codes (command/error.go). */
enum ctl_exit {
    CTL_EXIT_SUCCESS = 0,
    CTL_EXIT_ERROR = 1,
    CTL_EXIT_BAD_CONNECTION = 2,
    CTL_EXIT_INVALID_INPUT = 3, /* txn, watch */
    CTL_EXIT_BAD_FEATURE = 4,   /* a valid flag with an unsupported value */
    CTL_EXIT_INTERRUPTED = 5,
    CTL_EXIT_IO = 6,
    CTL_EXIT_BAD_ARGS = 128,
};

/* Output formats (--write-out). */
enum ctl_output {
    CTL_OUT_SIMPLE,
    CTL_OUT_JSON,
    CTL_OUT_PROTOBUF,
    CTL_OUT_FIELDS,
    CTL_OUT_TABLE,
};

/* ------------------------------------------------------------------------
 * Flags
 * ---------------------------------------------------------------------- */

/* A list of strings (pflag StringSlice / StringArray). */
struct ctl_strings {
    char **v;  /* the strings, owned by the list */
    size_t n;  /* how many */
};

enum ctl_flag_type {
    CTL_FLAG_BOOL,     /* bool *;  "--x" alone is true */
    CTL_FLAG_STRING,   /* const char **; help quotes the default */
    CTL_FLAG_INT64,    /* int64_t *; also for Go's int (64 bits) */
    CTL_FLAG_UINT64,   /* uint64_t * */
    CTL_FLAG_DURATION, /* int64_t * nanoseconds; Go's duration syntax */
    CTL_FLAG_STRINGS,  /* struct ctl_strings *; StringSlice: each value is
                          comma-separated (CSV), the first given replaces
                          the default, later ones append */
    CTL_FLAG_STRING_ARRAY, /* struct ctl_strings *; StringArray: each value
                              one string, no splitting */
};

/* One flag.  Arrays of these are static and writable (changed is set by
 * the parser). */
struct ctl_flag {
    const char *name;        /* long name, without "--"; NULL ends an array */
    char shorthand;          /* one-letter name, or 0 */
    enum ctl_flag_type type; /* the kind of variable var points at */
    void *var;               /* set from def, then from the command line */
    const char *def;         /* default as text (pflag's DefValue: "false",
                                "", "0", "5s", "[127.0.0.1:2379]") */
    const char *usage;       /* help text */
    bool changed;            /* set on the command line (or from an
                                ETCDCTL_* variable, as pflag's Set does) */
};

#define CTL_FLAG_END { NULL, 0, CTL_FLAG_BOOL, NULL, NULL, NULL, false }

/* ctl_flag_changed says whether the flag named name (local or global) of
 * the running command was given. */
bool ctl_flag_changed(const char *name);

/* ------------------------------------------------------------------------
 * Commands
 * ---------------------------------------------------------------------- */

struct ctl_cmd {
    const char *use;        /* cobra Use: "get [options] <key> [range_end]" */
    const char *short_desc; /* one line, shown in lists and NAME */
    const char *long_desc;  /* DESCRIPTION, or NULL */
    struct ctl_flag *flags; /* local flags ending in CTL_FLAG_END, or NULL */
    /* run the command with its positional arguments; return the exit
     * code (CTL_EXIT_SUCCESS...).  NULL for a group. */
    int (*run)(int argc, char **argv);
    const struct ctl_cmd *const *subs; /* sub-commands, NULL-terminated, or
                                          NULL */
};

/* ctl_main runs cetcdctl with main()'s arguments and returns the exit
 * code.  root is the root command (its subs are the top-level commands).
 * Cobra's behaviour: no command or a group without a sub-command prints
 * the group's help (exit 0); -h/--help prints the command's help; an
 * unknown command prints "Error: unknown command "x" for "etcdctl"",
 * suggestions, "Run 'etcdctl --help' for usage." and then etcdctl's
 * "Error: ..." line (exit 1); a flag error prints "Error: <err>", a blank
 * line, the usage on stdout and etcdctl's line (exit 1). */
int ctl_main(const struct ctl_cmd *root, int argc, char **argv);

/* ctl_cmd_running is the command being run (for help and names). */
const struct ctl_cmd *ctl_cmd_running(void);

/* ctl_usage_print prints the help of the running command on stdout, as
 * etcdctl's usage template does. */
void ctl_usage_print(void);

/* ------------------------------------------------------------------------
 * Global options and the shared client
 * ---------------------------------------------------------------------- */

/* The global flags, as parsed (read-only for commands). */
struct ctl_globals {
    struct ctl_strings endpoints; /* --endpoints */
    bool debug;                   /* --debug */
    const char *write_out;        /* --write-out / -w */
    bool hex;                     /* --hex */
    int64_t dial_timeout_ns;      /* --dial-timeout */
    int64_t command_timeout_ns;   /* --command-timeout */
    int64_t keepalive_time_ns;    /* --keepalive-time */
    int64_t keepalive_timeout_ns; /* --keepalive-timeout */
    bool insecure_transport;      /* --insecure-transport */
    bool insecure_discovery;      /* --insecure-discovery */
    bool insecure_skip_verify;    /* --insecure-skip-tls-verify */
    const char *cert;             /* --cert */
    const char *key;              /* --key */
    const char *cacert;           /* --cacert */
    const char *user;             /* --user */
    const char *password;         /* --password */
    const char *discovery_srv;    /* --discovery-srv / -d */
    const char *discovery_srv_name; /* --discovery-srv-name */
};

extern struct ctl_globals ctl_g;

/* ctl_output_format returns the --write-out format; an unknown one exits
 * with etcdctl's "unsupported output format" (CTL_EXIT_BAD_FEATURE).  Call
 * it where etcdctl builds its printer (before the client is made). */
enum ctl_output ctl_output_format(void);

/* ctl_client returns the shared client, opening it on first use (and
 * authenticating with --user).  Exits on failure as etcdctl does: bad TLS
 * files or flags CTL_EXIT_BAD_ARGS, a failed Authenticate or discovery
 * CTL_EXIT_BAD_CONNECTION / CTL_EXIT_ERROR. */
struct cetcd_client *ctl_client(void);

/* ctl_require_leader makes the clients opened after it ask for calls and
 * streams that fail when the member has no leader (clientv3's
 * WithRequireLeader: "hasleader" metadata), as etcdctl's watch does. */
void ctl_require_leader(void);

/* ctl_client_for opens a new client on the given endpoints with the
 * global TLS and auth settings (endpoint health/status take one per
 * endpoint).  The caller closes it.  Exits as ctl_client. */
struct cetcd_client *ctl_client_for(const char *endpoints);

/* ctl_client_token returns the auth token the last Authenticate of
 * ctl_client / ctl_client_for got (NULL: none yet).  etcdctl's
 * per-endpoint Status and HashKV reuse the shared client's token
 * (clientv3's Dial) rather than authenticate again: each Authenticate is
 * a raft proposal, which "endpoint status" would show. */
const char *ctl_client_token(void);

/* ctl_endpoints_joined returns the endpoints the client uses, joined by
 * commas (after --discovery-srv).  Static storage. */
const char *ctl_endpoints_joined(void);

/* ctl_endpoint_list returns the endpoints as a list (after discovery). */
const struct ctl_strings *ctl_endpoint_list(void);

/* ctl_timeout_ms returns --command-timeout in milliseconds (at least 1). */
int ctl_timeout_ms(void);

/* ctl_unary is cetcd_call_unary plus, when the call fails, the warning
 * line etcdctl's client (clientv3's retry interceptor) writes on stderr
 * for a failed unary call: {"level":"warn",...,"msg":"retrying of unary
 * invoker failed",...,"error":"rpc error: code = ... desc = ..."}.  Every
 * unary call of a command goes through it (or ctl_call). */
int ctl_unary(struct cetcd_client *c, const char *method_path,
              const ProtobufCMessage *req,
              const ProtobufCMessageDescriptor *resp_desc,
              ProtobufCMessage **resp_out, struct cetcd_status *st);

/* ctl_warn_unary_failed writes that line for a failed call on c. */
void ctl_warn_unary_failed(struct cetcd_client *c,
                           const struct cetcd_status *st);

/* ctl_call makes a unary call with the --command-timeout deadline and
 * exits with etcdctl's error line and CTL_EXIT_ERROR when it fails;
 * returns the response (free with protobuf_c_message_free_unpacked). */
ProtobufCMessage *ctl_call(const char *method_path,
                           const ProtobufCMessage *req,
                           const ProtobufCMessageDescriptor *resp_desc);

/* ------------------------------------------------------------------------
 * Errors
 * ---------------------------------------------------------------------- */

/* ctl_exit prints "Error: " and the formatted text on stderr and exits
 * with code. */
__attribute__((noreturn, format(printf, 2, 3))) void
ctl_exit(int code, const char *fmt, ...);

/* ctl_status_text writes into buf the text etcdctl prints for a failed
 * call's status (see ERRORS AND EXIT CODES above) and returns buf. */
const char *ctl_status_text(const struct cetcd_status *st, char *buf,
                            size_t cap);

/* ctl_exit_status exits with code and the text of the failed call. */
__attribute__((noreturn)) void ctl_exit_status(int code,
                                               const struct cetcd_status *st);

/* ------------------------------------------------------------------------
 * Small helpers shared by commands
 * ---------------------------------------------------------------------- */

/* ctl_duration_parse parses Go's time.ParseDuration syntax ("1h2m",
 * "300ms", "-1.5s", "0") into nanoseconds; returns 0 or -1 with Go's
 * error text in err ("time: invalid duration \"x\"").  */
int ctl_duration_parse(const char *s, int64_t *ns_out, char *err,
                       size_t err_cap);

/* ctl_duration_print writes Go's time.Duration String() of ns to f
 * ("0s", "1.5ms", "2s", "1h0m0s"). */
void ctl_duration_print(FILE *f, int64_t ns);

/* ctl_strings_add appends a copy of s (exits on out of memory). */
void ctl_strings_add(struct ctl_strings *l, const char *s);

/* ctl_strings_clear frees the strings and empties the list. */
void ctl_strings_clear(struct ctl_strings *l);

/* ctl_read_stdin reads all of standard input into a NUL-terminated
 * buffer the caller frees; *len_out its length.  NULL on error. */
char *ctl_read_stdin(size_t *len_out);

/* ctl_password_ask asks for a password as etcdctl does (bgentry/
 * speakeasy.Ask): prompt on stdout, /bin/stty -echo on the standard
 * streams (when stdin is no terminal stty complains on stderr, as under
 * etcdctl), one line read from stdin a byte at a time, stty echo, a
 * newline on stdout; the line loses a trailing "\r" and Go's TrimSpace
 * spaces.  A signal during the prompt turns echo on and exits 255.
 * Returns the password (malloc'd, the caller frees it), or NULL with
 * speakeasy's error text in err ("failed during password entry: ..."). */
char *ctl_password_ask(const char *prompt, char *err, size_t cap);

/* ctl_go_space_len is the length of the Unicode space (Go's
 * unicode.IsSpace, fmt's isSpace) that p[0..n) starts with, or 0. */
size_t ctl_go_space_len(const char *p, size_t n);

/* The command names for messages: "etcdctl" unless run under another
 * name (the basename of argv[0]). */
const char *ctl_program_name(void);

#endif /* CETCD_CTL_H */
