/*
 * ctl_lock.c - "lock <lockname> [exec-command arg1 arg2 ...]": etcdctl's
 * lock, clientv3/concurrency's Mutex on a session lease (--ttl): the key
 * <lockname>/<lease hex> is created in a txn, the oldest key under the
 * prefix holds the lock, and a waiter watches for the deletion of the
 * keys created before its own.  Held until SIGINT/SIGTERM (then unlocked)
 * or while the command runs with ETCD_LOCK_KEY and ETCD_LOCK_REV set.
 */
#define _GNU_SOURCE /* asprintf */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ctl/commands.h"
#include "ctl/ctl_session.h"
#include "ctl/print.h"

extern char **environ;

#define RESPONSE_RANGE ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE

/* etcdctl's --ttl is a Go int: 64 bits wide */
static int64_t lock_ttl;

static struct ctl_flag lock_flags[] = {
    {"ttl", 0, CTL_FLAG_INT64, &lock_ttl, "10", "timeout for session", false},
    CTL_FLAG_END,
};

/* The Mutex (concurrency.Mutex), owned by the main thread. */
struct mutex {
    struct ctl_session *s; /* the session whose lease the key carries */
    char *pfx;             /* "<lockname>/" (owned) */
    char *key;             /* "<lockname>/<lease hex>" (owned) */
    int64_t rev;           /* the key's create revision */
    int64_t hdr_rev;       /* Header().Revision: when the lock was taken */
};

/* ------------------------------------------------------------------------
 * The recipe
 * ---------------------------------------------------------------------- */

static ProtobufCBinaryData bin(const char *s)
{
    ProtobufCBinaryData b = {strlen(s), (uint8_t *)s};
    return b;
}

/* first_create fills a Range of the oldest key under pfx. */
static void first_create(Etcdserverpb__RangeRequest *r, const char *pfx,
                         uint8_t *end, size_t end_len)
{
    r->key = bin(pfx);
    r->range_end.data = end;
    r->range_end.len = end_len;
    r->limit = 1;
    r->sort_target = ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__CREATE;
    r->sort_order = ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__ASCEND;
}

/* lock_txn: if the key is new put it, else get it; and get the owner. */
static int lock_txn(struct mutex *m, Etcdserverpb__TxnResponse **out,
                    struct ctl_sess_err *e)
{
    Etcdserverpb__Compare cmp = ETCDSERVERPB__COMPARE__INIT;
    cmp.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE;
    cmp.key = bin(m->key);
    cmp.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
    Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
    put.key = bin(m->key);
    put.lease = ctl_session_lease(m->s);
    Etcdserverpb__RangeRequest get = ETCDSERVERPB__RANGE_REQUEST__INIT;
    get.key = bin(m->key);
    Etcdserverpb__RangeRequest owner = ETCDSERVERPB__RANGE_REQUEST__INIT;
    size_t end_len = 0;
    uint8_t *end = ctl_sess_prefix_end(m->pfx, strlen(m->pfx), &end_len);
    first_create(&owner, m->pfx, end, end_len);
    Etcdserverpb__RequestOp ops[3] = {ETCDSERVERPB__REQUEST_OP__INIT,
                                      ETCDSERVERPB__REQUEST_OP__INIT,
                                      ETCDSERVERPB__REQUEST_OP__INIT};
    ops[0].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
    ops[0].request_put = &put;
    ops[1].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    ops[1].request_range = &get;
    ops[2].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    ops[2].request_range = &owner;
    Etcdserverpb__Compare *cmps[] = {&cmp};
    Etcdserverpb__RequestOp *then[] = {&ops[0], &ops[2]};
    Etcdserverpb__RequestOp *els[] = {&ops[1], &ops[2]};
    Etcdserverpb__TxnRequest txn = ETCDSERVERPB__TXN_REQUEST__INIT;
    txn.n_compare = 1, txn.compare = cmps;
    txn.n_success = 2, txn.success = then;
    txn.n_failure = 2, txn.failure = els;
    ProtobufCMessage *resp = NULL;
    int rc = ctl_sess_call("/etcdserverpb.KV/Txn", &txn.base,
                           &etcdserverpb__txn_response__descriptor, true,
                           &resp, e);
    free(end);
    *out = (Etcdserverpb__TxnResponse *)resp;
    return rc;
}

/* range_of is the Range answer of a txn's i-th op (NULL if not one). */
static const Etcdserverpb__RangeResponse *
range_of(const Etcdserverpb__TxnResponse *t, size_t i)
{
    if (i >= t->n_responses ||
        t->responses[i]->response_case != RESPONSE_RANGE)
        return NULL;
    return t->responses[i]->response_range;
}

/* mutex_unlock deletes the key (one try within --command-timeout: etcdctl
 * would retry forever and ignore a second SIGINT meanwhile). */
static int mutex_unlock(struct mutex *m, struct ctl_sess_err *e)
{
    Etcdserverpb__DeleteRangeRequest del =
        ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
    del.key = bin(m->key);
    ProtobufCMessage *resp = NULL;
    int rc = ctl_sess_call("/etcdserverpb.KV/DeleteRange", &del.base,
                           &etcdserverpb__delete_range_response__descriptor,
                           false, &resp, e);
    if (resp)
        protobuf_c_message_free_unpacked(resp, NULL);
    return rc;
}

/* mutex_lock is Mutex.Lock: returns when the key is the oldest under the
 * prefix, or fails (the key is then removed). */
static int mutex_lock(struct mutex *m, struct ctl_sess_err *e)
{
    Etcdserverpb__TxnResponse *t = NULL;
    int rc = lock_txn(m, &t, e);
    if (rc != CTL_SESS_OK)
        return rc;
    m->rev = t->header ? t->header->revision : 0;
    const Etcdserverpb__RangeResponse *mine = range_of(t, 0);
    if (!t->succeeded && mine && mine->n_kvs > 0)
        m->rev = mine->kvs[0]->create_revision;
    const Etcdserverpb__RangeResponse *owner = range_of(t, 1);
    bool held = !owner || owner->n_kvs == 0 ||
                owner->kvs[0]->create_revision == m->rev;
    m->hdr_rev = t->header ? t->header->revision : 0;
    protobuf_c_message_free_unpacked(&t->base, NULL);
    if (held)
        return CTL_SESS_OK;
    Etcdserverpb__RangeResponse *last = NULL;
    rc = ctl_sess_wait_deletes(m->pfx, m->rev - 1, &last, e);
    if (rc != CTL_SESS_OK) {
        struct ctl_sess_err ignored;
        (void)mutex_unlock(m, &ignored);
        return rc;
    }
    m->hdr_rev = last->header ? last->header->revision : 0;
    protobuf_c_message_free_unpacked(&last->base, NULL);
    return CTL_SESS_OK;
}

/* ------------------------------------------------------------------------
 * Running the command (Go's os/exec as etcdctl uses it)
 * ---------------------------------------------------------------------- */

/* go_errno is Go's text of a syscall error (lower-case strerror). */
static void go_errno(char *buf, size_t cap, int err)
{
    snprintf(buf, cap, "%s", strerror(err));
    if (buf[0] >= 'A' && buf[0] <= 'Z' && !(buf[1] >= 'A' && buf[1] <= 'Z'))
        buf[0] = (char)(buf[0] - 'A' + 'a');
}

/* exec_error writes Go's exec.Error: exec: "<name>": <why>. */
static void exec_error(char *why, size_t cap, const char *name,
                       const char *err)
{
    char *q = NULL;
    size_t qn = 0;
    FILE *f = open_memstream(&q, &qn);
    if (f) {
        ctl_quote(f, name, strlen(name));
        fclose(f);
    }
    snprintf(why, cap, "exec: %s: %s", q ? q : "", err);
    free(q);
}

static bool executable(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && !S_ISDIR(st.st_mode) &&
           (st.st_mode & 0111) != 0;
}

/* path_try checks dir/name for look_path: 1 found (absolute, in
 * *found), -1 found but relative, 0 not there. */
static int path_try(const char *dir, size_t n, const char *name,
                    char **found)
{
    char *full = NULL;
    if (n == 0)
        dir = ".", n = 1; /* an empty entry is the current directory */
    bool slash = dir[n - 1] == '/';
    if (asprintf(&full, "%.*s%s%s", (int)n, dir, slash ? "" : "/", name) < 0)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    int rc = executable(full) ? (full[0] == '/' ? 1 : -1) : 0;
    if (rc == 1)
        *found = full;
    else
        free(full);
    return rc;
}

/* look_path is Go 1.19's exec.LookPath for a name without a slash: the
 * first executable in $PATH; a relative result is refused (exec.ErrDot).
 * Returns a path to free, or NULL with why. */
static char *look_path(const char *name, char *why, size_t cap)
{
    const char *p = getenv("PATH");
    char *found = NULL;
    while (p && *p) {
        size_t n = strcspn(p, ":");
        int rc = path_try(p, n, name, &found);
        if (rc > 0)
            return found;
        if (rc < 0) {
            exec_error(why, cap, name, "cannot run executable found "
                                       "relative to current directory");
            return NULL;
        }
        if (!p[n])
            break;
        p += n + 1;
        if (!*p) /* a trailing ':' is one more (empty) entry */
            p = ".";
    }
    exec_error(why, cap, name, "executable file not found in $PATH");
    return NULL;
}

/* lock_env is the command's environment: the lock's two variables and
 * ours.  etcdctl puts them before os.Environ() and Go keeps the last of
 * duplicates, so an inherited ETCD_LOCK_KEY (a lock inside a lock) would
 * hide the new one; here the lock's own values win. */
static char **lock_env(const struct mutex *m)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 3, sizeof *env);
    if (!env || asprintf(&env[0], "ETCD_LOCK_KEY=%s", m->key) < 0 ||
        asprintf(&env[1], "ETCD_LOCK_REV=%" PRId64, m->hdr_rev) < 0)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    size_t k = 2;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "ETCD_LOCK_KEY=", 14) != 0 &&
            strncmp(environ[i], "ETCD_LOCK_REV=", 14) != 0)
            env[k++] = environ[i];
    env[k] = NULL;
    return env;
}

/* go_signal_name is Go's syscall.Signal.String() on Linux. */
static const char *go_signal_name(int sig, char *buf, size_t cap)
{
    static const char *const names[] = {
        NULL, "hangup", "interrupt", "quit", "illegal instruction",
        "trace/breakpoint trap", "aborted", "bus error",
        "floating point exception", "killed", "user defined signal 1",
        "segmentation fault", "user defined signal 2", "broken pipe",
        "alarm clock", "terminated", "stack fault", "child exited",
        "continued", "stopped (signal)", "stopped", "stopped (tty input)",
        "stopped (tty output)", "urgent I/O condition",
        "CPU time limit exceeded", "file size limit exceeded",
        "virtual timer expired", "profiling timer expired", "window changed",
        "I/O possible", "power failure", "bad system call",
    };
    if (sig > 0 && sig < (int)(sizeof names / sizeof names[0]))
        return names[sig];
    snprintf(buf, cap, "signal %d", sig);
    return buf;
}

/* wait_child waits for pid; 0 on success, else -1 with Go's
 * ProcessState text ("exit status 3", "signal: killed"). */
static int wait_child(pid_t pid, char *why, size_t cap)
{
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return 0;
    char buf[32];
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    if (WIFEXITED(status))
        snprintf(why, cap, "exit status %d", WEXITSTATUS(status));
    else
        snprintf(why, cap, "signal: %s%s",
                 go_signal_name(WTERMSIG(status), buf, sizeof buf),
                 WCOREDUMP(status) ? " (core dumped)" : "");
    return -1;
}

/* spawn_child starts argv with stdin from /dev/null (Go's nil Stdin) and
 * our stdout and stderr; signals at their defaults. */
static int spawn_child(const char *path, char **argv, char **env,
                       pid_t *pid)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t def, none;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawnattr_init(&at);
    sigemptyset(&none);
    sigemptyset(&def);
    sigaddset(&def, SIGINT);
    sigaddset(&def, SIGTERM);
    sigaddset(&def, SIGPIPE);
    posix_spawnattr_setsigdefault(&at, &def);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF |
                                      POSIX_SPAWN_SETSIGMASK);
    fflush(stdout);
    fflush(stderr);
    int rc = posix_spawn(pid, path, &fa, &at, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    return rc;
}

/* run_command runs argv as exec.Cmd.Run: 0, or -1 with Go's error. */
static int run_command(const struct mutex *m, char **argv, char *why,
                       size_t cap)
{
    const char *name = argv[0];
    char *found = NULL;
    if (!*name) {
        snprintf(why, cap, "exec: no command");
        return -1;
    }
    if (strcmp(name, "/") == 0) { /* Go: Base("/") is "/": LookPath */
        exec_error(why, cap, name, "permission denied");
        return -1;
    }
    if (!strchr(name, '/') && !(found = look_path(name, why, cap)))
        return -1;
    const char *path = found ? found : name;
    char **env = lock_env(m);
    pid_t pid = 0;
    int err = spawn_child(path, argv, env, &pid);
    int rc = 0;
    if (err != 0) {
        char text[256];
        go_errno(text, sizeof text, err);
        snprintf(why, cap, "fork/exec %s: %s", path, text);
        rc = -1;
    } else {
        rc = wait_child(pid, why, cap);
    }
    free(env[0]);
    free(env[1]);
    free(env);
    free(found);
    return rc;
}

/* ------------------------------------------------------------------------
 * The command
 * ---------------------------------------------------------------------- */

/* done ends the session, then exits with text if there is one. */
static int done(struct mutex *m, const char *text)
{
    ctl_session_close(m->s);
    if (text)
        ctl_exit(CTL_EXIT_ERROR, "%s", text);
    free(m->pfx);
    free(m->key);
    return CTL_EXIT_SUCCESS;
}

/* lock_exec runs the command under the lock, then unlocks. */
static int lock_exec(struct mutex *m, char **argv)
{
    char why[1400];
    struct ctl_sess_err e;
    int rc = run_command(m, argv, why, sizeof why);
    int urc = mutex_unlock(m, &e);
    if (rc != 0)
        return done(m, why);
    return done(m, urc != CTL_SESS_OK ? e.text : NULL);
}

/* lock_hold prints the key and holds the lock until a signal (unlock) or
 * the end of the session. */
static int lock_hold(struct mutex *m)
{
    struct ctl_sess_err e;
    Etcdserverpb__RangeRequest get = ETCDSERVERPB__RANGE_REQUEST__INIT;
    get.key = bin(m->key);
    ProtobufCMessage *resp = NULL;
    if (ctl_sess_call("/etcdserverpb.KV/Range", &get.base,
                      &etcdserverpb__range_response__descriptor, true, &resp,
                      &e) != CTL_SESS_OK)
        return done(m, e.text);
    Etcdserverpb__RangeResponse *r = (Etcdserverpb__RangeResponse *)resp;
    if (r->n_kvs == 0)
        return done(m, "lock lost on init");
    /* etcdctl exits for -w table here and leaves its key to the lease's
     * expiry; cetcdctl releases it first */
    if (ctl_sess_display_get(r) != 0) {
        (void)mutex_unlock(m, &e);
        ctl_session_close(m->s);
        ctl_sess_display_exit();
    }
    protobuf_c_message_free_unpacked(resp, NULL);
    while (!ctl_sess_interrupted() && !ctl_session_done(m->s))
        ctl_sess_sleep_ms(100);
    if (!ctl_sess_interrupted())
        return done(m, "session expired");
    if (mutex_unlock(m, &e) != CTL_SESS_OK)
        return done(m, e.text);
    return done(m, NULL);
}

static int lock_run(int argc, char **argv)
{
    if (argc == 0)
        ctl_exit(CTL_EXIT_BAD_ARGS, "lock takes a lock name argument and an "
                                    "optional command to execute");
    (void)ctl_output_format();
    (void)ctl_client();
    struct mutex m;
    memset(&m, 0, sizeof m);
    /* concurrency.WithTTL ignores a TTL that is not positive */
    m.s = ctl_session_open(lock_ttl > 0 ? lock_ttl : 60);
    ctl_sess_catch_signals();
    if (asprintf(&m.pfx, "%s/", argv[0]) < 0 ||
        asprintf(&m.key, "%s%" PRIx64, m.pfx,
                 (uint64_t)ctl_session_lease(m.s)) < 0)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    struct ctl_sess_err e;
    if (mutex_lock(&m, &e) != CTL_SESS_OK)
        return done(&m, e.text);
    if (argc > 1)
        return lock_exec(&m, argv + 1);
    return lock_hold(&m);
}

const struct ctl_cmd ctl_cmd_lock = {
    .use = "lock <lockname> [exec-command arg1 arg2 ...]",
    .short_desc = "Acquires a named lock",
    .flags = lock_flags,
    .run = lock_run,
};
