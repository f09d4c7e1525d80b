/*
 * ctl_watch.c - "watch" as etcdctl 3.4.23 runs it: the key or range from
 * the arguments or ETCDCTL_WATCH_KEY / ETCDCTL_WATCH_RANGE_END, --prefix,
 * --rev, --prev-kv, a command run for every event after "--" (with the
 * ETCD_WATCH_* variables), interactive mode (-i: "watch ..." and
 * "progress" lines on stdin), the outputs (simple with --hex, json,
 * protobuf, fields) and the lines and exit codes of a watch that ends.
 * Also the watch engine that make-mirror shares (ctl_watch.h), which
 * follows clientv3's watcher on a libcetcd Watch stream in poll mode.
 *
 * etcdctl's --keepalive-time and --keepalive-timeout apply to its watch
 * connection; libcetcd has no keepalive option, so they are accepted and
 * have no effect here.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ctl/commands.h"
#include "ctl/ctl_int.h" /* the flag parser, for interactive lines */
#include "ctl/ctl_watch.h"
#include "ctl/print.h"
#include "etcdserverpb/rpc.pb-c.h"

extern char **environ;

/* ========================================================================
 * The engine (ctl_watch.h)
 * ====================================================================== */

#define BACKOFF_MAX_US 100000

static const char compacted_text[] =
    "etcdserver: mvcc: required revision has been compacted";

size_t ctl_wengine_prefix_end(const uint8_t *key, size_t key_len, uint8_t *out)
{
    for (size_t i = key_len; i > 0; i--) {
        if (key[i - 1] < 0xff) {
            memcpy(out, key, i);
            out[i - 1]++;
            return i;
        }
    }
    out[0] = 0; /* no key after the prefix: every key >= it */
    return 1;
}

bool ctl_wengine_is_progress(const struct cetcd_watch_response *r)
{
    return r->events_len == 0 && !r->canceled && !r->created &&
           r->compact_revision == 0 && r->header.revision != 0;
}

/* send_create asks the server for w on the current stream, from the
 * revision after the last one w delivered. */
static void send_create(struct ctl_wengine *e, struct ctl_watcher *w)
{
    struct cetcd_watch_opts o = {0};
    struct cetcd_status st;
    assert(e->stream != NULL);
    assert(w->key != NULL && w->next_rev >= 0);
    o.range_end = w->end;
    o.range_end_len = w->end ? w->end_len : 0;
    o.start_revision = w->next_rev;
    o.prev_kv = w->prev_kv;
    w->id = -1;
    int rc = cetcd_watch_create(e->stream, w->key, w->key_len, &o, &st);
    /* an ended stream shows at the next poll; anything else is local */
    if (rc != 0 && rc != CETCD_FAILED_PRECONDITION)
        ctl_exit(CTL_EXIT_ERROR, "%s", st.message);
}

/* stream_open opens a stream and creates every watcher on it. */
static int stream_open(struct ctl_wengine *e, struct cetcd_status *st)
{
    struct cetcd_watch_stream_opts o = {0};
    o.send_max = 2 * CTL_WATCHERS_MAX; /* every create, a few more */
    int rc = cetcd_watch_stream_open(e->client, &o, &e->stream, st);
    if (rc != 0) {
        e->stream = NULL;
        return rc;
    }
    e->ncanceled = 0;
    for (size_t i = 0; i < e->n; i++)
        send_create(e, e->w[i]);
    return 0;
}

static void stream_close(struct ctl_wengine *e)
{
    cetcd_watch_stream_close(e->stream);
    e->stream = NULL;
}

static void watcher_free(struct ctl_watcher *w)
{
    free(w->key);
    free(w->end);
    free(w);
}

/* watcher_close delivers w's close, frees it and, when it was the last,
 * ends the stream as clientv3 does. */
static void watcher_close(struct ctl_wengine *e, struct ctl_watcher *w,
                          const char *err)
{
    size_t i = 0;
    assert(e->n <= CTL_WATCHERS_MAX);
    while (i < e->n && e->w[i] != w)
        i++;
    assert(i < e->n); /* only live watchers are closed */
    memmove(e->w + i, e->w + i + 1, (e->n - i - 1) * sizeof e->w[0]);
    e->n--;
    e->fn(e->ctx, w, NULL, err);
    watcher_free(w);
    if (e->n == 0 && e->stream)
        stream_close(e);
}

struct ctl_watcher *ctl_wengine_add(struct ctl_wengine *e,
                                  const void *key, size_t key_len,
                                  const void *end, size_t end_len,
                                  int64_t rev, bool prev_kv, void *arg)
{
    assert(e->client != NULL && e->fn != NULL);
    assert(key != NULL || key_len == 0);
    if (e->n == CTL_WATCHERS_MAX)
        return NULL;
    struct ctl_watcher *w = calloc(1, sizeof *w);
    if (!w || !(w->key = malloc(key_len + 1)) ||
        (end && !(w->end = malloc(end_len + 1))))
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    memcpy(w->key, key, key_len);
    w->key_len = key_len;
    if (end) {
        memcpy(w->end, end, end_len);
        w->end_len = end_len;
    }
    w->next_rev = rev;
    w->prev_kv = prev_kv;
    w->id = -1;
    w->arg = arg;
    e->w[e->n++] = w;
    if (e->stream)
        send_create(e, w); /* else the next step opens a stream */
    return w;
}

void ctl_wengine_progress(struct ctl_wengine *e)
{
    struct cetcd_status st;
    if (e->stream)
        (void)cetcd_watch_progress(e->stream, &st);
}

/* halt closes every watcher with err, as clientv3 does when its stream
 * stops for good. */
static void halt(struct ctl_wengine *e, const char *err)
{
    if (e->stream)
        stream_close(e);
    while (e->n > 0)
        watcher_close(e, e->w[0], err);
}

/* halt_text is what clientv3 reports for a stream's final status. */
static const char *halt_text(const struct cetcd_status *st, char *buf,
                             size_t cap)
{
    /* libcetcd reports a stream the server ended with OK as CANCELLED
     * with the code's name; Go's Recv gives io.EOF there */
    if (st->code == CETCD_CANCELLED && strcmp(st->message, "CANCELLED") == 0)
        return "EOF";
    return ctl_status_text(st, buf, cap);
}

/* reconnect waits for a connection before a new stream opens: libcetcd's
 * streams neither wait for one nor fail over, its unary calls do both
 * (gRPC-go's balancer does it under clientv3's stream).  A cheap
 * serializable count of one key does; its answer does not matter. */
static void reconnect(struct ctl_wengine *e)
{
    static const uint8_t key[1];
    struct cetcd_range_opts o = {0};
    struct cetcd_range_result *r = NULL;
    struct cetcd_status st;
    o.serializable = true;
    o.count_only = true;
    if (cetcd_range(e->client, key, 1, &o, &r, &st) == 0)
        cetcd_range_result_free(r);
}

/* stream_ended reconnects (clientv3 retries UNAVAILABLE and INTERNAL but
 * for "no leader") or halts. */
static void stream_ended(struct ctl_wengine *e,
                         const struct cetcd_status *st)
{
    bool no_leader = strcmp(st->message, "etcdserver: no leader") == 0;
    if ((st->code == CETCD_UNAVAILABLE && !no_leader) ||
        st->code == CETCD_INTERNAL) {
        stream_close(e);
        if (st->code == CETCD_UNAVAILABLE) {
            if (e->backoff_us < 1000)
                e->backoff_us = 1000;
            else if (e->backoff_us < BACKOFF_MAX_US)
                e->backoff_us += e->backoff_us / 4;
            if (e->backoff_us > BACKOFF_MAX_US)
                e->backoff_us = BACKOFF_MAX_US;
            usleep((useconds_t)e->backoff_us);
            reconnect(e);
        }
        return; /* the next step opens a new stream */
    }
    char buf[512];
    halt(e, halt_text(st, buf, sizeof buf));
}

static struct ctl_watcher *find(struct ctl_wengine *e, int64_t id)
{
    for (size_t i = 0; i < e->n; i++)
        if (e->w[i]->id == id)
            return e->w[i];
    return NULL;
}

/* created gives the oldest watcher waiting for it its id, or closes it
 * with the server's reason. */
static void created(struct ctl_wengine *e,
                    const struct cetcd_watch_response *r)
{
    struct ctl_watcher *w = find(e, -1);
    if (!w)
        return; /* nothing asked for it */
    if (r->watch_id == -1 || (r->canceled && r->cancel_reason[0])) {
        watcher_close(e, w, r->cancel_reason);
        return;
    }
    w->id = r->watch_id;
    /* clientv3 resumes a watcher created at the store's revision R from R
     * itself, which sends the event at R again after a reconnect; R + 1 is
     * where it really starts. */
    if (w->next_rev == 0 && r->header.revision > 0)
        w->next_rev = r->header.revision + 1;
}

/* cancel_unknown cancels, once per stream, an id that has no watcher. */
static void cancel_unknown(struct ctl_wengine *e, int64_t id)
{
    struct cetcd_status st;
    assert(e->stream != NULL);
    if (id == -1)
        return; /* not a watcher's id: nothing to cancel */
    for (size_t i = 0; i < e->ncanceled; i++)
        if (e->canceled[i] == id)
            return;
    if (e->ncanceled < sizeof e->canceled / sizeof e->canceled[0])
        e->canceled[e->ncanceled++] = id;
    (void)cetcd_watch_cancel(e->stream, id, &st);
}

/* deliver hands r to w and moves w's resume revision past it (clientv3
 * resumes at the header revision itself; past it is exact). */
static void deliver(struct ctl_wengine *e, struct ctl_watcher *w,
                    const struct cetcd_watch_response *r)
{
    assert(w->id != -1 && r != NULL);
    if (r->events_len > 0)
        w->next_rev = r->events[r->events_len - 1].kv.mod_revision + 1;
    else if (r->header.revision > 0)
        w->next_rev = r->header.revision + 1;
    const char *err = r->compact_revision != 0 ? compacted_text : NULL;
    e->fn(e->ctx, w, r, err);
    if (err)
        watcher_close(e, w, NULL);
}

static void dispatch(struct ctl_wengine *e,
                     const struct cetcd_watch_response *r)
{
    if (r->created) {
        created(e, r);
        return;
    }
    if (r->canceled && r->compact_revision == 0) {
        struct ctl_watcher *w = find(e, r->watch_id);
        if (w && r->watch_id != -1)
            watcher_close(e, w, NULL);
        return;
    }
    if (ctl_wengine_is_progress(r) && r->watch_id == -1) {
        for (size_t i = 0; i < e->n; i++)
            if (e->w[i]->id != -1)
                deliver(e, e->w[i], r);
        return;
    }
    struct ctl_watcher *w = r->watch_id == -1 ? NULL : find(e, r->watch_id);
    if (w)
        deliver(e, w, r);
    else
        cancel_unknown(e, r->watch_id);
}

void ctl_wengine_step(struct ctl_wengine *e, int timeout_ms)
{
    struct cetcd_status st = {0};
    char buf[512];
    assert(e->client != NULL && e->fn != NULL);
    assert(e->n <= CTL_WATCHERS_MAX);
    if (!e->stream) {
        if (e->n == 0)
            return;
        if (stream_open(e, &st) != 0) {
            halt(e, ctl_status_text(&st, buf, sizeof buf));
            return;
        }
    }
    struct cetcd_watch_response *r = NULL;
    int rc = cetcd_watch_poll(e->stream, timeout_ms, &r, &st);
    if (rc == 0) {
        dispatch(e, r);
        cetcd_watch_response_free(r);
    } else if (rc != CETCD_DEADLINE_EXCEEDED) {
        stream_ended(e, &st);
    }
}

void ctl_wengine_close(struct ctl_wengine *e)
{
    if (e->stream)
        stream_close(e);
    for (size_t i = 0; i < e->n; i++)
        watcher_free(e->w[i]);
    e->n = 0;
}

/* ========================================================================
 * Output
 * ====================================================================== */

/* flush_out writes stdout out now (a watch streams); a reader that went
 * away ends cetcdctl by SIGPIPE as it ends etcdctl (gRPC may have set the
 * signal to be ignored). */
static void flush_out(void)
{
    if (fflush(stdout) == 0 || errno != EPIPE)
        return;
    signal(SIGPIPE, SIG_DFL);
    raise(SIGPIPE);
    exit(CTL_EXIT_ERROR);
}

/* A response in the protobuf-c form the printers take, pointing into the
 * libcetcd response it was built from. */
struct pb_watch {
    Etcdserverpb__WatchResponse r;  /* the response */
    Etcdserverpb__ResponseHeader h; /* its header */
    Mvccpb__Event *ev;              /* r.n_events events */
    Mvccpb__Event **evp;            /* r.events: pointers to them */
    Mvccpb__KeyValue *kv;           /* 2 per event: kv, prev_kv */
};

static void kv_to_pb(const struct cetcd_kv *in, Mvccpb__KeyValue *out)
{
    *out = (Mvccpb__KeyValue)MVCCPB__KEY_VALUE__INIT;
    out->key.data = (uint8_t *)in->key;
    out->key.len = in->key_len;
    out->value.data = (uint8_t *)in->value;
    out->value.len = in->value_len;
    out->create_revision = in->create_revision;
    out->mod_revision = in->mod_revision;
    out->version = in->version;
    out->lease = in->lease;
}

static void pb_build(struct pb_watch *p, const struct cetcd_watch_response *r)
{
    size_t n = r->events_len;
    p->r = (Etcdserverpb__WatchResponse)ETCDSERVERPB__WATCH_RESPONSE__INIT;
    p->h = (Etcdserverpb__ResponseHeader)ETCDSERVERPB__RESPONSE_HEADER__INIT;
    p->h.cluster_id = r->header.cluster_id;
    p->h.member_id = r->header.member_id;
    p->h.revision = r->header.revision;
    p->h.raft_term = r->header.raft_term;
    p->ev = calloc(n + 1, sizeof *p->ev);
    p->evp = calloc(n + 1, sizeof *p->evp);
    p->kv = calloc(2 * n + 1, sizeof *p->kv);
    if (!p->ev || !p->evp || !p->kv)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const struct cetcd_watch_event *e = &r->events[i];
        p->ev[i] = (Mvccpb__Event)MVCCPB__EVENT__INIT;
        p->ev[i].type = (Mvccpb__Event__EventType)e->type;
        kv_to_pb(&e->kv, &p->kv[2 * i]);
        p->ev[i].kv = &p->kv[2 * i];
        if (e->has_prev_kv) {
            kv_to_pb(&e->prev_kv, &p->kv[2 * i + 1]);
            p->ev[i].prev_kv = &p->kv[2 * i + 1];
        }
        p->evp[i] = &p->ev[i];
    }
    p->r.header = &p->h;
    p->r.n_events = n;
    p->r.events = p->evp;
    p->r.compact_revision = r->compact_revision;
    p->r.canceled = r->canceled;
    p->r.created = r->created;
}

static void pb_free(struct pb_watch *p)
{
    free(p->ev);
    free(p->evp);
    free(p->kv);
}

/* event_type writes mvccpb.Event_EventType's String(). */
static void event_type(FILE *f, int type)
{
    if (type == CETCD_EVENT_PUT)
        fputs("PUT", f);
    else if (type == CETCD_EVENT_DELETE)
        fputs("DELETE", f);
    else
        fprintf(f, "%d", type);
}

static void show_simple(const Etcdserverpb__WatchResponse *r)
{
    for (size_t i = 0; i < r->n_events; i++) {
        event_type(stdout, r->events[i]->type);
        fputc('\n', stdout);
        if (r->events[i]->prev_kv)
            ctl_simple_kv(stdout, ctl_g.hex, false, r->events[i]->prev_kv);
        ctl_simple_kv(stdout, ctl_g.hex, false, r->events[i]->kv);
    }
}

/* show_json writes clientv3.WatchResponse as encoding/json does.
 * print.h's ctl_json_watch_response writes "Events":null for a response
 * without events, but clientv3 makes the slice of every response it
 * passes on ("Events":[]); only the zero response that carries a closing
 * error (events NULL here) has a nil slice. */
static void show_json(const Etcdserverpb__WatchResponse *r, bool nil_events)
{
    struct ctl_json j;
    ctl_json_init(&j, stdout);
    ctl_json_begin_object(&j);
    ctl_json_key(&j, "Header");
    if (r->header) {
        ctl_json_message_value(&j, &r->header->base);
    } else {
        ctl_json_begin_object(&j);
        ctl_json_end_object(&j);
    }
    ctl_json_key(&j, "Events");
    if (nil_events) {
        ctl_json_null(&j);
    } else {
        ctl_json_begin_array(&j);
        for (size_t i = 0; i < r->n_events; i++)
            ctl_json_message_value(&j, &r->events[i]->base);
        ctl_json_end_array(&j);
    }
    ctl_json_key(&j, "CompactRevision");
    ctl_json_i64(&j, r->compact_revision);
    ctl_json_key(&j, "Canceled");
    ctl_json_bool(&j, r->canceled);
    ctl_json_key(&j, "Created");
    ctl_json_bool(&j, r->created);
    ctl_json_end_object(&j);
    fputc('\n', stdout);
}

/* display is etcdctl's display.Watch; r NULL is the zero response with
 * Canceled set that clientv3 sends with a closing error. */
static void display(enum ctl_output out, const struct cetcd_watch_response *r)
{
    struct pb_watch p = {0};
    Etcdserverpb__WatchResponse zero = ETCDSERVERPB__WATCH_RESPONSE__INIT;
    const Etcdserverpb__WatchResponse *m = &zero;
    zero.canceled = true;
    if (r) {
        pb_build(&p, r);
        m = &p.r;
    }
    switch (out) {
    case CTL_OUT_SIMPLE:
        show_simple(m);
        break;
    case CTL_OUT_JSON:
        show_json(m, r == NULL);
        break;
    case CTL_OUT_PROTOBUF:
        ctl_pb_watch_response(stdout, m);
        break;
    case CTL_OUT_FIELDS:
        ctl_fields_watch(stdout, m);
        break;
    case CTL_OUT_TABLE:
        ctl_exit(CTL_EXIT_BAD_FEATURE, "table not supported as output format");
    }
    if (r)
        pb_free(&p);
    flush_out();
}

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

/* go_errno writes Go's syscall.Errno text: glibc's with a lower-case
 * first letter, which is how Go's table reads for these. */
static void go_errno(char *buf, size_t cap, int err)
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
        go_errno(why, sizeof why, rc);
        snprintf(err, cap, "fork/exec %s: %s", path, why);
        return;
    }
    wait_text(pid, err, cap);
}

/* exec_fail prints etcdctl's line for a failed command and exits 1. */
static void exec_fail(const struct exec_args *x, const char *err)
{
    flush_out();
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

/* What the callback needs. */
struct watch_run {
    enum ctl_output out; /* the output format */
    bool closed;         /* a watcher closed (ends a plain watch) */
};

static void on_watch(void *ctx, struct ctl_watcher *w,
                     const struct cetcd_watch_response *r, const char *err)
{
    struct watch_run *run = ctx;
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
    display(run->out, r);
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

/* A list of argument strings, borrowed. */
struct args {
    char **v; /* the strings */
    int n;    /* how many */
};

/* The watch of a command line: what to watch and what to run. */
struct watch_req {
    struct args watch; /* key [range_end] ... (etcdctl's watchArgs) */
    struct args exec;  /* the command after "--" (execArgs) */
};

static void args_push(struct args *a, char *s)
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
static struct args raw_args(void)
{
    static char buf[1 << 20]; /* longer command lines are cut */
    struct args all = {0}, rest = {0};
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
        args_push(&all, buf + i);
    int w = 0;
    while (w < all.n && strcmp(all.v[w], "watch") != 0)
        w++;
    if (w == all.n)
        return all;
    for (int i = w + 1; i < all.n; i++)
        args_push(&rest, all.v[i]);
    free(all.v);
    return rest;
}

static int find_sep(const struct args *a)
{
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->v[i], "--") == 0)
            return i;
    return -1;
}

/* env_conflict is etcdctl's check that no key was given both in
 * ETCDCTL_WATCH_KEY and before "--": cmd's words are matched from the end
 * against raw's, and one left over when "--" is reached conflicts. */
static bool env_conflict(const struct args *raw, const struct args *cmd,
                         int sep)
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
static void finish(struct watch_req *q, const struct args *with_sep,
                   const struct args *pos, const char *env_key,
                   const char *env_range)
{
    int sep = find_sep(with_sep);
    if (env_key[0]) {
        args_push(&q->watch, (char *)env_key);
        if (env_range[0])
            args_push(&q->watch, (char *)env_range);
    }
    for (int i = 0; i < pos->n; i++)
        args_push(&q->watch, pos->v[i]);
    if (sep < 0)
        return;
    for (int i = sep + 1; i < with_sep->n; i++)
        args_push(&q->exec, with_sep->v[i]);
    q->watch.n -= q->exec.n;
    if (q->watch.n < 0)
        q->watch.n = 0;
}

/* parse_plain is parseWatchArgs for the command line; NULL or the error. */
static const char *parse_plain(struct watch_req *q, const struct args *cmd,
                               const char *env_key, const char *env_range)
{
    struct args raw = raw_args();
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

/* key_range is getWatchChan's part: the key and range of a watch (end
 * NULL: the single key; endbuf has room for the key's length + 1), or the
 * error text. */
static const char *key_range(const struct args *a, uint8_t *endbuf,
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

/* add_watch starts the watch of q on e; NULL or getWatchChan's error. */
static const char *add_watch(struct ctl_wengine *e, struct watch_req *q)
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
 * Interactive mode
 * ====================================================================== */

/* utf8_put writes code point r as UTF-8 (Go's utf8.EncodeRune). */
static size_t utf8_put(char *o, uint32_t r)
{
    if (r < 0x80) {
        o[0] = (char)r;
        return 1;
    }
    if (r < 0x800) {
        o[0] = (char)(0xc0 | r >> 6), o[1] = (char)(0x80 | (r & 0x3f));
        return 2;
    }
    if (r < 0x10000) {
        o[0] = (char)(0xe0 | r >> 12), o[1] = (char)(0x80 | (r >> 6 & 0x3f));
        o[2] = (char)(0x80 | (r & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | r >> 18), o[1] = (char)(0x80 | (r >> 12 & 0x3f));
    o[2] = (char)(0x80 | (r >> 6 & 0x3f)), o[3] = (char)(0x80 | (r & 0x3f));
    return 4;
}

/* escape decodes the escape after the backslash at s[*i] into o (Go's
 * strconv.UnquoteChar inside a double-quoted literal); the bytes
 * written, or -1 when it is not valid. */
static int escape(const char *s, size_t *i, char *o)
{
    static const char in[] = "abfnrtv\\\"", out[] = "\a\b\f\n\r\t\v\\\"";
    const char *e = s[*i] ? strchr(in, s[*i]) : NULL;
    size_t digits = s[*i] == 'x' ? 2 : s[*i] == 'u' ? 4 : s[*i] == 'U' ? 8 : 0;
    if (e) {
        *o = out[e - in];
        return 1;
    }
    if (digits && strspn(s + *i + 1, "0123456789abcdefABCDEF") >= digits) {
        char h[9] = {0};
        memcpy(h, s + *i + 1, digits);
        unsigned long v = strtoul(h, NULL, 16);
        *i += digits;
        if (digits == 2) {
            *o = (char)v;
            return 1;
        }
        if (v > 0x10ffff || (v >= 0xd800 && v < 0xe000))
            return -1;
        return (int)utf8_put(o, (uint32_t)v);
    }
    if (s[*i] >= '0' && s[*i] <= '3' && strspn(s + *i, "01234567") >= 3) {
        *o = (char)((s[*i] - '0') * 64 + (s[*i + 1] - '0') * 8 +
                    (s[*i + 2] - '0'));
        *i += 2;
        return 1;
    }
    return -1;
}

/* unquote_go decodes a double-quoted Go string literal (fmt's %q scan)
 * in place; false when it is not valid. */
static bool unquote_go(char *s)
{
    size_t n = strlen(s), o = 0;
    for (size_t i = 1; i + 1 < n; i++) {
        if (s[i] != '\\') {
            s[o++] = s[i];
            continue;
        }
        i++;
        int k = escape(s, &i, s + o);
        if (k < 0 || i + 1 >= n)
            return false;
        o += (size_t)k;
    }
    s[o] = '\0';
    return true;
}

/* Go's regexp \s: no \v. */
static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r';
}

/* token_end: the end of the token at s (etcdctl's argify regexp
 * "(?:[^"\\]|\\.)*"|'[^']*'|[^'"\s]\S*[^'"\s]?), or NULL when no token
 * starts at s. */
static const char *token_end(const char *s)
{
    const char *p = s + 1;
    if (*s == '"') {
        while (*p && *p != '"')
            p += (*p == '\\' && p[1]) ? 2 : 1;
        return *p == '"' ? p + 1 : NULL;
    }
    if (*s == '\'') {
        p = strchr(p, '\'');
        return p ? p + 1 : NULL;
    }
    if (is_space(*s))
        return NULL;
    while (*p && !is_space(*p))
        p++;
    return p;
}

/* argify splits a line as etcdctl's argify does (its words point into
 * copies it owns).  etcdctl strips a single-quoted word with the count of
 * words instead of the word's length, which cuts it wrongly or panics;
 * the quotes are stripped here. */
static struct args argify(const char *line)
{
    struct args a = {0};
    const char *s = line;
    while (*s) {
        const char *e = token_end(s);
        if (!e) {
            s++;
            continue;
        }
        char *w = strndup(s, (size_t)(e - s));
        if (!w)
            ctl_exit(CTL_EXIT_ERROR, "out of memory");
        if (w[0] == '\'') {
            memmove(w, w + 1, strlen(w) - 2);
            w[strlen(w) - 2] = '\0';
        } else if (w[0] == '"' && !unquote_go(w)) {
            ctl_exit(CTL_EXIT_INVALID_INPUT, "invalid syntax");
        }
        args_push(&a, w);
        s = e;
    }
    return a;
}

/* line_flags parses a line's words with a fresh watch flag set, as
 * etcdctl's NewWatchCommand().Flags().Parse does (which also resets the
 * flag variables); NULL or pflag's error. */
static const char *line_flags(const struct args *in, struct args *pos)
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

/* parse_line is parseWatchArgs for an interactive "watch ..." line (its
 * words after "watch"); errors end cetcdctl as they end etcdctl. */
static void parse_line(struct watch_req *q, const struct args *words,
                       const char *env_key, const char *env_range)
{
    struct args pos = {0};
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

/* watch_line runs a "watch ..." line (its words a). */
static void watch_line(struct ctl_wengine *e, const char *line,
                       const struct args *a, const char *env_key,
                       const char *env_range)
{
    if (a->n < 2 && !env_key[0]) {
        fprintf(stderr, "Invalid command %s (command type or key is not "
                        "provided)\n", line);
        return;
    }
    struct watch_req q = {0};
    struct args words = {a->v + 1, a->n - 1};
    parse_line(&q, &words, env_key, env_range);
    const char *err = add_watch(e, &q);
    if (err)
        fprintf(stderr, "Invalid command %s (%s)\n", line, err);
    free(q.watch.v);
    free(q.exec.v);
}

/* do_line runs one line of input. */
static void do_line(struct ctl_wengine *e, char *line,
                    const char *env_key, const char *env_range)
{
    struct args a = argify(line);
    if (a.n < 1)
        fprintf(stderr, "Invalid command: %s (watch and progress "
                        "supported)\n", line);
    else if (strcmp(a.v[0], "watch") == 0)
        watch_line(e, line, &a, env_key, env_range);
    else if (strcmp(a.v[0], "progress") == 0)
        ctl_wengine_progress(e);
    else
        fprintf(stderr, "Invalid command %s (only support watch)\n", line);
    for (int i = 0; i < a.n; i++)
        free(a.v[i]);
    free(a.v);
}

/* A line being read from stdin. */
struct line_buf {
    char *b;    /* bytes read and not yet used */
    size_t len; /* how many */
    size_t cap; /* allocated */
};

/* read_lines reads what stdin has and runs the complete lines; at the
 * end of input etcdctl's bufio ReadString fails with EOF (a last line
 * without a newline is dropped with it). */
static void read_lines(struct line_buf *lb, struct ctl_wengine *e,
                       const char *env_key, const char *env_range)
{
    if (lb->cap - lb->len < 4096) {
        lb->cap = lb->cap * 2 + 8192;
        if (!(lb->b = realloc(lb->b, lb->cap)))
            ctl_exit(CTL_EXIT_ERROR, "out of memory");
    }
    ssize_t k = read(STDIN_FILENO, lb->b + lb->len, lb->cap - lb->len - 1);
    if (k < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (k <= 0) {
        char why[256] = "EOF";
        if (k < 0) {
            char e2[200];
            go_errno(e2, sizeof e2, errno);
            snprintf(why, sizeof why, "read /dev/stdin: %s", e2);
        }
        ctl_exit(CTL_EXIT_INVALID_INPUT, "Error reading watch request line: "
                                         "%s", why);
    }
    lb->len += (size_t)k;
    char *nl;
    while ((nl = memchr(lb->b, '\n', lb->len)) != NULL) {
        *nl = '\0';
        do_line(e, lb->b, env_key, env_range);
        size_t used = (size_t)(nl - lb->b) + 1;
        memmove(lb->b, nl + 1, lb->len - used);
        lb->len -= used;
    }
}

/* interactive is watchInteractiveFunc: lines from stdin, watchers on one
 * stream.  Responses are polled in short steps between reads of stdin. */
__attribute__((noreturn)) static void
interactive(struct watch_run *run, const char *env_key, const char *env_range)
{
    static struct ctl_wengine e;
    struct line_buf lb = {0};
    run->out = ctl_output_format();
    ctl_require_leader(); /* clientv3.WithRequireLeader, as etcdctl */
    e.client = ctl_client();
    e.fn = on_watch;
    e.ctx = run;
    for (;;) {
        bool active = e.stream || e.n > 0;
        struct pollfd p = {STDIN_FILENO, POLLIN, 0};
        if (poll(&p, 1, active ? 0 : -1) > 0)
            read_lines(&lb, &e, env_key, env_range);
        if (e.stream || e.n > 0)
            ctl_wengine_step(&e, 20);
    }
}

/* ========================================================================
 * The command
 * ====================================================================== */

static int run(int argc, char **argv)
{
    static struct ctl_wengine e;
    struct watch_run wr = {0};
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
        interactive(&wr, env_key, env_range);
    struct watch_req q = {0};
    struct args cmd = {argv, argc};
    const char *err = parse_plain(&q, &cmd, env_key, env_range);
    if (err)
        ctl_exit(CTL_EXIT_BAD_ARGS, "%s", err);
    wr.out = ctl_output_format();
    ctl_require_leader(); /* clientv3.WithRequireLeader, as etcdctl */
    e.client = ctl_client();
    e.fn = on_watch;
    e.ctx = &wr;
    if ((err = add_watch(&e, &q)) != NULL)
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
