/*
 * ctl_watch.c - "watch" as etcdctl 3.4.23 runs it: the key or range from
 * the arguments or ETCDCTL_WATCH_KEY / ETCDCTL_WATCH_RANGE_END, --prefix,
 * --rev, --prev-kv, a command run for every event after "--" (with the
 * ETCD_WATCH_* variables) and the lines and exit codes of a watch that
 * ends.  The output formats are in ctl_watch_print.c, interactive mode
 * (-i) in ctl_watch_interactive.c and the watch engine that make-mirror
 * shares in ctl_wengine.c (ctl_watch.h has all three).
 *
 * etcdctl's --keepalive-time and --keepalive-timeout apply to the watch
 * connection through the shared client (global.c: libcetcd's keepalive,
 * with grpc-go's 10 s floor), and the client asks for "hasleader", so a
 * member that loses its leader ends the watch as etcdctl's does.
 */
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
#include "ctl/ctl_int.h" /* the flag parser, for interactive lines */
#include "ctl/ctl_watch.h"
#include "ctl/print.h"

extern char **environ;

/* ========================================================================
 * The command after "--", run for every event
 * ====================================================================== */

/* A watcher's command (etcdctl's execArgs); argc 0: none. */
struct exec_args {
    char **argv; /* NULL-terminated; the array and strings owned */
    int argc;    /* how many */
};

/* exec_args_new copies n words into a new command. */
static struct exec_args *exec_args_new(char *const *v, int n)
{
    struct exec_args *x = calloc(1, sizeof *x);
    if (!x || !(x->argv = calloc((size_t)n + 1, sizeof *x->argv)))
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    for (int i = 0; i < n; i++)
        if (!(x->argv[i] = strdup(v[i])))
            ctl_exit(CTL_EXIT_ERROR, "out of memory");
    x->argc = n;
    return x;
}

static void exec_args_free(struct exec_args *x)
{
    for (int i = 0; x && i < x->argc; i++)
        free(x->argv[i]);
    if (x)
        free(x->argv);
    free(x);
}

/* go_signal_name is Go's syscall.Signal String() on Linux. */
static const char *go_signal_name(int sig)
{
    static const char *const names[] = {
        [SIGHUP] = "hangup", [SIGINT] = "interrupt", [SIGQUIT] = "quit",
        [SIGILL] = "illegal instruction", [SIGTRAP] = "trace/breakpoint trap",
        [SIGABRT] = "aborted", [SIGBUS] = "bus error",
        [SIGFPE] = "floating point exception", [SIGKILL] = "killed",
        [SIGUSR1] = "user defined signal 1", [SIGSEGV] = "segmentation fault",
        [SIGUSR2] = "user defined signal 2", [SIGPIPE] = "broken pipe",
        [SIGALRM] = "alarm clock", [SIGTERM] = "terminated",
        [SIGSTKFLT] = "stack fault", [SIGCHLD] = "child exited",
        [SIGCONT] = "continued", [SIGSTOP] = "stopped (signal)",
        [SIGTSTP] = "stopped", [SIGTTIN] = "stopped (tty input)",
        [SIGTTOU] = "stopped (tty output)", [SIGURG] = "urgent I/O condition",
        [SIGXCPU] = "CPU time limit exceeded",
        [SIGXFSZ] = "file size limit exceeded",
        [SIGVTALRM] = "virtual timer expired",
        [SIGPROF] = "profiling timer expired", [SIGWINCH] = "window changed",
        [SIGIO] = "I/O possible", [SIGPWR] = "power failure",
        [SIGSYS] = "bad system call",
    };
    if (sig > 0 && sig < (int)(sizeof names / sizeof names[0]) && names[sig])
        return names[sig];
    return NULL;
}

void ctl_watch__go_errno(char *buf, size_t cap, int err)
{
    snprintf(buf, cap, "%s", strerror(err));
    if (buf[0] >= 'A' && buf[0] <= 'Z' && buf[1] >= 'a' && buf[1] <= 'z')
        buf[0] = (char)(buf[0] - 'A' + 'a');
}

/* is_executable is Go's findExecutable: not a directory, some x bit. */
static bool is_executable(const char *path)
{
    struct stat s;
    return stat(path, &s) == 0 && !S_ISDIR(s.st_mode) && (s.st_mode & 0111);
}

/* look_path resolves a name without a slash as Go 1.19's exec.LookPath
 * (PATH split at every ':', an empty entry is "."; a hit in a relative
 * directory is refused); writes the path, or the error text. */
static bool look_path(const char *file, char *path, size_t cap, char *err,
                      size_t ecap)
{
    const char *p = getenv("PATH");
    for (bool more = p && *p; more;) {
        size_t dl = strcspn(p, ":");
        snprintf(path, cap, "%.*s/%s", (int)(dl ? dl : 1), dl ? p : ".",
                 file);
        if (is_executable(path)) {
            if (path[0] == '/')
                return true;
            snprintf(err, ecap, "exec: \"%s\": cannot run executable found "
                                "relative to current directory", file);
            return false;
        }
        more = p[dl] == ':';
        p += dl + 1;
    }
    snprintf(err, ecap, "exec: \"%s\": executable file not found in $PATH",
             file);
    return false;
}

/* env_with builds os.Environ() plus the event's variables; a variable
 * already there takes the new value in its place (Go's dedupEnv). */
static char **env_with(char *const *add, size_t nadd)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + nadd + 1, sizeof *env);
    if (!env)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    memcpy(env, environ, n * sizeof *env);
    for (size_t a = 0; a < nadd; a++) {
        size_t kl = strcspn(add[a], "=") + 1, i = 0;
        while (i < n && strncmp(env[i], add[a], kl) != 0)
            i++;
        env[i] = add[a];
        if (i == n)
            n++;
    }
    return env;
}

/* quoted writes Go's %q of n bytes into a new string. */
static char *quoted(const void *p, size_t n)
{
    char *s = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&s, &len);
    if (!m)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    ctl_quote(m, p, n);
    fclose(m);
    return s;
}

/* spawn starts argv with stdin from /dev/null and stdout, stderr shared,
 * as Go's exec.Cmd with Stdout and Stderr set does. */
static int spawn(const char *path, char **argv, char **env, pid_t *pid)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t none, def;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawnattr_init(&at);
    sigemptyset(&none);
    sigemptyset(&def);
    sigaddset(&def, SIGPIPE);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &def);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF);
    int rc = posix_spawn(pid, path, &fa, &at, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    return rc;
}

/* wait_text waits for pid and writes Go's ExitError text, or "". */
static void wait_text(pid_t pid, char *err, size_t cap)
{
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    err[0] = '\0';
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        snprintf(err, cap, "exit status %d", WEXITSTATUS(status));
    } else if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        const char *name = go_signal_name(sig);
        char num[32];
        snprintf(num, sizeof num, "signal %d", sig);
        snprintf(err, cap, "signal: %s%s", name ? name : num,
                 WCOREDUMP(status) ? " (core dumped)" : "");
    }
}

/* run_command runs argv with env and writes what Go's cmd.Run() returns
 * as an error, or "" on success. */
static void run_command(char **argv, char **env, char *err, size_t cap)
{
    char path[4096];
    pid_t pid;
    if (argv[0][0] == '\0') {
        snprintf(err, cap, "exec: no command");
        return;
    }
    if (strchr(argv[0], '/'))
        snprintf(path, sizeof path, "%s", argv[0]);
    else if (!look_path(argv[0], path, sizeof path, err, cap))
        return;
    fflush(stdout);
    int rc = spawn(path, argv, env, &pid);
    if (rc != 0) {
        char why[256];
        ctl_watch__go_errno(why, sizeof why, rc);
        snprintf(err, cap, "fork/exec %s: %s", path, why);
        return;
    }
    wait_text(pid, err, cap);
}

/* exec_fail prints etcdctl's line for a failed command and exits 1. */
static void exec_fail(const struct exec_args *x, const char *err)
{
    ctl_watch__flush_out();
    fputs("command [", stderr);
    for (int i = 0; i < x->argc; i++) {
        fputs(i ? " " : "", stderr);
        ctl_quote(stderr, x->argv[i], strlen(x->argv[i]));
    }
    fprintf(stderr, "] error (%s)\n", err);
    exit(CTL_EXIT_ERROR);
}

/* exec_event runs the command for one event with ETCD_WATCH_* set. */
static void exec_event(const struct exec_args *x,
                       const struct cetcd_watch_response *r,
                       const struct cetcd_watch_event *ev)
{
    char rev[64], type[64], err[8192];
    char *key = quoted(ev->kv.key, ev->kv.key_len);
    char *val = quoted(ev->kv.value, ev->kv.value_len);
    size_t kl = strlen(key) + 16, vl = strlen(val) + 18;
    char *kv = malloc(kl), *vv = malloc(vl);
    if (!kv || !vv)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    snprintf(rev, sizeof rev, "ETCD_WATCH_REVISION=%" PRId64,
             r->header.revision);
    if (ev->type == CETCD_EVENT_PUT || ev->type == CETCD_EVENT_DELETE)
        snprintf(type, sizeof type, "ETCD_WATCH_EVENT_TYPE=\"%s\"",
                 ev->type == CETCD_EVENT_PUT ? "PUT" : "DELETE");
    else
        snprintf(type, sizeof type, "ETCD_WATCH_EVENT_TYPE=\"%d\"", ev->type);
    snprintf(kv, kl, "ETCD_WATCH_KEY=%s", key);
    snprintf(vv, vl, "ETCD_WATCH_VALUE=%s", val);
    char *add[] = {rev, type, kv, vv};
    char **env = env_with(add, 4);
    run_command(x->argv, env, err, sizeof err);
    free(env);
    free(key), free(val), free(kv), free(vv);
    if (err[0])
        exec_fail(x, err);
}

/* ========================================================================
 * Printing a watcher's channel (etcdctl's printWatchCh)
 * ====================================================================== */

void ctl_watch__on_watch(void *ctx, struct ctl_watcher *w,
                         const struct cetcd_watch_response *r,
                         const char *err)
{
    struct ctl_watch_run *run = ctx;
    struct exec_args *x = w->arg;
    if (!r && !err) { /* the channel closed */
        run->closed = true;
        exec_args_free(x);
        return;
    }
    fflush(stdout);
    if (!r || r->canceled)
        fprintf(stderr, "watch was canceled (%s)\n", err ? err : "<nil>");
    if (r && ctl_wengine_is_progress(r))
        printf("progress notify: %" PRId64 "\n", r->header.revision);
    ctl_watch__display(run->out, r);
    for (size_t i = 0; r && x && x->argc > 0 && i < r->events_len; i++)
        exec_event(x, r, &r->events[i]);
    if (!r) { /* clientv3 closes the channel after that response */
        run->closed = true;
        exec_args_free(x);
    }
}

/* ========================================================================
 * Arguments (etcdctl's parseWatchArgs and getWatchChan)
 * ====================================================================== */

static bool watch_interactive, watch_prefix, watch_prev_kv;
static int64_t watch_rev;

static struct ctl_flag watch_flags[] = {
    {"interactive", 'i', CTL_FLAG_BOOL, &watch_interactive, "false",
     "Interactive mode", false},
    {"prefix", 0, CTL_FLAG_BOOL, &watch_prefix, "false",
     "Watch on a prefix if prefix is set", false},
    {"rev", 0, CTL_FLAG_INT64, &watch_rev, "0", "Revision to start watching",
     false},
    {"prev-kv", 0, CTL_FLAG_BOOL, &watch_prev_kv, "false",
     "get the previous key-value pair before the event happens", false},
    CTL_FLAG_END,
};

static const char err_num[] = "bad number of arguments";
static const char err_conflict[] =
    "bad number of arguments (found conflicting environment key)";
static const char err_separator[] =
    "bad number of arguments (found separator --, but no commands)";

void ctl_watch__args_push(struct ctl_watch_args *a, char *s)
{
    char **v = realloc(a->v, (size_t)(a->n + 1) * sizeof *v);
    if (!v)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    v[a->n++] = s;
    a->v = v;
}

/* raw_args returns the words after the first "watch" of cetcdctl's own
 * command line, or all of them when there is none (etcdctl reads os.Args
 * so; the frame hands commands their positional arguments only, without
 * the "--" that matters here).  The words live until exit. */
static struct ctl_watch_args raw_args(void)
{
    static char buf[1 << 20]; /* longer command lines are cut */
    struct ctl_watch_args all = {0}, rest = {0};
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    size_t len = 0;
    ssize_t k;
    while (fd >= 0 && len < sizeof buf - 1 &&
           (k = read(fd, buf + len, sizeof buf - 1 - len)) > 0)
        len += (size_t)k;
    if (fd >= 0)
        close(fd);
    buf[len] = '\0';
    for (size_t i = 0; i < len; i += strlen(buf + i) + 1)
        ctl_watch__args_push(&all, buf + i);
    int w = 0;
    while (w < all.n && strcmp(all.v[w], "watch") != 0)
        w++;
    if (w == all.n)
        return all;
    for (int i = w + 1; i < all.n; i++)
        ctl_watch__args_push(&rest, all.v[i]);
    free(all.v);
    return rest;
}

static int find_sep(const struct ctl_watch_args *a)
{
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->v[i], "--") == 0)
            return i;
    return -1;
}

/* env_conflict is etcdctl's check that no key was given both in
 * ETCDCTL_WATCH_KEY and before "--": cmd's words are matched from the end
 * against raw's, and one left over when "--" is reached conflicts. */
static bool env_conflict(const struct ctl_watch_args *raw,
                         const struct ctl_watch_args *cmd, int sep)
{
    int r = raw->n - 1;
    for (int w = cmd->n - 1; w >= 0; w--) {
        if (r >= 0 && strcmp(cmd->v[w], raw->v[r]) == 0) {
            r--;
            continue;
        }
        if (r == sep)
            return true;
    }
    return false;
}

/* finish builds watch = [env key [env range]] + positional words minus the
 * command after "--", exec = that command.  etcdctl cuts watchArgs at the
 * last word equal to the command's first, which drops too little when
 * that word comes again in the command ("watch a -- x x" watched the range
 * [a, x)); cutting by the command's length is what it meant. */
static void finish(struct ctl_watch_req *q,
                   const struct ctl_watch_args *with_sep,
                   const struct ctl_watch_args *pos, const char *env_key,
                   const char *env_range)
{
    int sep = find_sep(with_sep);
    if (env_key[0]) {
        ctl_watch__args_push(&q->watch, (char *)env_key);
        if (env_range[0])
            ctl_watch__args_push(&q->watch, (char *)env_range);
    }
    for (int i = 0; i < pos->n; i++)
        ctl_watch__args_push(&q->watch, pos->v[i]);
    if (sep < 0)
        return;
    for (int i = sep + 1; i < with_sep->n; i++)
        ctl_watch__args_push(&q->exec, with_sep->v[i]);
    q->watch.n -= q->exec.n;
    if (q->watch.n < 0)
        q->watch.n = 0;
}

/* parse_plain is parseWatchArgs for the command line; NULL or the error. */
static const char *parse_plain(struct ctl_watch_req *q,
                               const struct ctl_watch_args *cmd,
                               const char *env_key, const char *env_range)
{
    struct ctl_watch_args raw = raw_args();
    int sep = find_sep(&raw);
    const char *err = NULL;
    if (sep >= 0 && sep == raw.n - 1)
        err = err_separator;
    else if (sep < 0 && raw.n < 1 && !env_key[0])
        err = err_num;
    else if (sep >= 0 && env_key[0] && env_conflict(&raw, cmd, sep))
        err = err_conflict;
    else if (sep < 0 && cmd->n > 0 && env_key[0])
        err = err_conflict;
    if (!err)
        finish(q, &raw, cmd, env_key, env_range);
    free(raw.v);
    return err;
}

/* line_flags parses a line's words with a fresh watch flag set, as
 * etcdctl's NewWatchCommand().Flags().Parse does (which also resets the
 * flag variables); NULL or pflag's error. */
static const char *line_flags(const struct ctl_watch_args *in,
                              struct ctl_watch_args *pos)
{
    static char err[512];
    struct ctl_flag *sets[] = {watch_flags};
    ctl__flags_defaults(watch_flags);
    pos->v = calloc((size_t)in->n + 1, sizeof *pos->v);
    if (!pos->v)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    if (ctl__flags_parse(sets, 1, in->v, in->n, pos->v, &pos->n, err,
                         sizeof err) == 0)
        return NULL;
    /* a flag set without a help flag answers -h and --help so */
    if (strcmp(err, "unknown flag: --help") == 0 ||
        strncmp(err, "unknown shorthand flag: 'h'", 27) == 0)
        return "pflag: help requested";
    return err;
}

void ctl_watch__parse_line(struct ctl_watch_req *q,
                           const struct ctl_watch_args *words,
                           const char *env_key, const char *env_range)
{
    struct ctl_watch_args pos = {0};
    int sep = find_sep(words);
    if (sep >= 0 && sep == words->n - 1)
        ctl_exit(CTL_EXIT_BAD_ARGS, "%s", err_separator);
    const char *err = line_flags(words, &pos);
    if (err)
        ctl_exit(CTL_EXIT_BAD_ARGS, "%s", err);
    if (sep < 0 && !env_key[0] && pos.n < 1)
        ctl_exit(CTL_EXIT_BAD_ARGS, "%s", err_num);
    if (sep < 0 && pos.n > 0 && env_key[0])
        ctl_exit(CTL_EXIT_BAD_ARGS, "%s", err_conflict);
    finish(q, words, &pos, env_key, env_range);
    free(pos.v);
}

/* key_range is getWatchChan's part: the key and range of a watch (end
 * NULL: the single key; endbuf has room for the key's length + 1), or the
 * error text. */
static const char *key_range(const struct ctl_watch_args *a, uint8_t *endbuf,
                             struct cetcd_kv *key, struct cetcd_kv *end)
{
    static const uint8_t zero[1];
    if (a->n < 1)
        return err_num;
    if (a->n == 2 && watch_prefix)
        return "`range_end` and `--prefix` are mutually exclusive";
    key->key = (const uint8_t *)a->v[0];
    key->key_len = strlen(a->v[0]);
    end->key = NULL;
    end->key_len = 0;
    if (a->n == 2) { /* more words are ignored, as etcdctl does */
        end->key = (const uint8_t *)a->v[1];
        end->key_len = strlen(a->v[1]);
    }
    if (watch_prefix && key->key_len == 0) { /* clientv3: every key */
        key->key = end->key = zero;
        key->key_len = end->key_len = 1;
    } else if (watch_prefix) {
        end->key_len = ctl_wengine_prefix_end(key->key, key->key_len, endbuf);
        end->key = endbuf;
    }
    return NULL;
}

const char *ctl_watch__add_watch(struct ctl_wengine *e,
                                 struct ctl_watch_req *q)
{
    struct cetcd_kv key, end;
    uint8_t *endbuf = malloc(q->watch.n ? strlen(q->watch.v[0]) + 1 : 1);
    if (!endbuf)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    const char *err = key_range(&q->watch, endbuf, &key, &end);
    if (!err) {
        struct exec_args *x = exec_args_new(q->exec.v, q->exec.n);
        if (!ctl_wengine_add(e, key.key, key.key_len, end.key, end.key_len,
                             watch_rev, watch_prev_kv, x)) {
            exec_args_free(x);
            err = "too many watchers";
        }
    }
    free(endbuf);
    return err;
}

/* ========================================================================
 * The command
 * ====================================================================== */

static int run(int argc, char **argv)
{
    static struct ctl_wengine e;
    struct ctl_watch_run wr = {0};
    const char *env_key = getenv("ETCDCTL_WATCH_KEY");
    const char *env_range = getenv("ETCDCTL_WATCH_RANGE_END");
    env_key = env_key ? env_key : "";
    env_range = env_range ? env_range : "";
    if (!env_key[0] && env_range[0]) {
        char *q = quoted(env_range, strlen(env_range));
        ctl_exit(CTL_EXIT_BAD_ARGS, "ETCDCTL_WATCH_KEY is empty but got "
                 "ETCDCTL_WATCH_RANGE_END=%s", q);
    }
    if (watch_interactive)
        ctl_watch__interactive(&wr, env_key, env_range);
    struct ctl_watch_req q = {0};
    struct ctl_watch_args cmd = {argv, argc};
    const char *err = parse_plain(&q, &cmd, env_key, env_range);
    if (err)
        ctl_exit(CTL_EXIT_BAD_ARGS, "%s", err);
    wr.out = ctl_output_format();
    ctl_require_leader(); /* clientv3.WithRequireLeader, as etcdctl */
    e.client = ctl_client();
    e.fn = ctl_watch__on_watch;
    e.ctx = &wr;
    if ((err = ctl_watch__add_watch(&e, &q)) != NULL)
        ctl_exit(CTL_EXIT_BAD_ARGS, "%s", err);
    while (!wr.closed)
        ctl_wengine_step(&e, -1);
    ctl_wengine_close(&e);
    ctl_exit(CTL_EXIT_INTERRUPTED, "watch is canceled by the server");
}

const struct ctl_cmd ctl_cmd_watch = {
    .use = "watch [options] [key or prefix] [range_end] [--] [exec-command "
           "arg1 arg2 ...]",
    .short_desc = "Watches events stream on keys or prefixes",
    .flags = watch_flags,
    .run = run,
};
