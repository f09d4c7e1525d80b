/*
 * ctl_check.c - "check perf" and "check datascale": etcdctl's load
 * checks of a cluster, with its workloads, texts and pass/fail rules
 * (etcdctl's check.go).
 *
 * perf: for 60 s, puts of 256-byte random keys under --prefix with
 *   1024-byte values, at most the workload's rate (s: 150/s, m: 1000,
 *   l: 8000, xl: 15000) and with at most its number of requests in flight
 *   (50, 200, 500, 1000); then the prefix is deleted.  PASS needs no
 *   error, a throughput above 90% of the rate, the slowest request under
 *   0.5 s and a standard deviation under 0.1 s.
 * datascale: the workload's number of puts (10 000, 100 000, 1 000 000,
 *   3 000 000) of 512-byte keys and 512-byte values with the same
 *   concurrency, and the server's process_resident_memory_bytes (from
 *   <first endpoint>/metrics) before and after; PASS prints the memory
 *   used, any error fails.
 * Both refuse a prefix that has keys, can compact (--auto-compact) and
 * defragment (--auto-defrag) afterwards, and draw etcdctl's progress bar
 * (cheggaaa/pb with format "Bom !") on stdout every 200 ms.
 *
 * Differences, by design: etcdctl opens one client (one connection) per
 * concurrent worker; here one client keeps the same number of requests
 * in flight on one connection (HTTP/2 streams) from one thread, through
 * libcetcd's asynchronous calls.  etcdctl's own calls here have their own
 * deadlines (60 s, 30 s or none); ours take 60 s (perf) or 300 s
 * (datascale, whose last delete can be long), so a dead endpoint ends the
 * check instead of hanging it.
 */
#define _GNU_SOURCE /* strndup */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "ctl/commands.h"
#include "ctl/print.h"
#include "etcdserverpb/rpc.pb-c.h"

static const char *load_flag;
static const char *prefix_flag;
static bool auto_compact;
static bool auto_defrag;

/* A workload model: etcdctl's checkPerfCfgMap / checkDatascaleCfgMap. */
struct model {
    const char *names[2]; /* "s", "small" */
    int perf_limit;       /* puts per second */
    int perf_clients;     /* requests in flight */
    int64_t scale_limit;  /* puts (datascale) */
    int scale_clients;    /* requests in flight (datascale) */
};

static const struct model models[] = {
    {{"s", "small"}, 150, 50, 10000, 50},
    {{"m", "medium"}, 1000, 200, 100000, 200},
    {{"l", "large"}, 8000, 500, 1000000, 500},
    {{"xl", "xLarge"}, 15000, 1000, 3000000, 1000},
};

#define PERF_SECONDS 60
#define ERRORS_MAX 64 /* distinct error texts counted */

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static const struct model *model_find(void)
{
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
        if (strcmp(load_flag, models[i].names[0]) == 0 ||
            strcmp(load_flag, models[i].names[1]) == 0)
            return &models[i];
    ctl_exit(CTL_EXIT_BAD_FEATURE, "unknown load option %s", load_flag);
}

/* ------------------------------------------------------------------------
 * The progress bar (gopkg.in/cheggaaa/pb.v1, format "Bom !", on stdout:
 * counters, bar, percent, time left; the bar only when stdout's terminal
 * has room, as pb measures /dev/tty)
 * ---------------------------------------------------------------------- */

struct bar {
    int64_t total;     /* pb's Total */
    int64_t current;   /* its count */
    int64_t previous;  /* the count at the last refresh */
    int64_t start_ns;  /* Start() */
    int64_t change_ns; /* when the count last changed (at a refresh) */
    int64_t next_ns;   /* the next refresh (every 200 ms) */
};

static int term_width(void)
{
    struct winsize ws;
    int fd = open("/dev/tty", O_RDONLY | O_CLOEXEC), w = 0;
    int use = fd >= 0 ? fd : STDIN_FILENO;
    if (ioctl(use, TIOCGWINSZ, &ws) == 0)
        w = ws.ws_col;
    if (fd >= 0)
        close(fd);
    return w;
}

/* bar_box draws the bar itself into out (size columns of it). */
static void bar_box(char *out, size_t cap, const struct bar *b, int size)
{
    int cur = (int)ceil((double)b->current / (double)b->total * size);
    int empty = size - cur < 0 ? 0 : size - cur;
    if (cur > size)
        cur = size;
    size_t w = (size_t)snprintf(out, cap, "B");
    for (int i = 0; i < (empty <= 0 ? cur : cur - 1) && w + 2 < cap; i++)
        out[w++] = 'o';
    if (empty > 0 && cur > 0 && w + 2 < cap)
        out[w++] = 'm';
    for (int i = 0; i < empty && w + 2 < cap; i++)
        out[w++] = ' ';
    out[w++] = '!';
    out[w] = '\0';
}

/* time_left writes pb's formatDuration of sec seconds: [Nd][Nh]MMmSSs. */
static void time_left(char *out, size_t cap, int64_t sec)
{
    size_t w = (size_t)snprintf(out, cap, " ");
    if (sec > 86400) {
        w += (size_t)snprintf(out + w, cap - w, "%lldd",
                              (long long)(sec / 86400));
        sec %= 86400;
    }
    if (sec > 3600) {
        w += (size_t)snprintf(out + w, cap - w, "%lldh",
                              (long long)(sec / 3600));
        sec %= 3600;
    }
    snprintf(out + w, cap - w, "%02lldm%02llds", (long long)(sec / 60),
             (long long)(sec % 60));
}

/* bar_write prints the bar's line, as pb's write (final: its end). */
static void bar_write(struct bar *b, bool final)
{
    char counters[64], percent[32], left[64] = "", box[512] = "";
    int64_t now = now_ns();
    snprintf(counters, sizeof counters, " %lld / %lld ",
             (long long)b->current, (long long)b->total);
    snprintf(percent, sizeof percent, " %6.02f%%",
             (double)b->current / ((double)b->total / 100.0));
    int64_t from_start = now - b->start_ns, moved = b->current;
    if (final) {
        char d[CTL_DURATION_MAX];
        snprintf(left, sizeof left, " %s",
                 ctl_duration(d, sizeof d, from_start / 1000000000 *
                                               1000000000));
    } else if (moved > 0) {
        int64_t per = (b->change_ns - b->start_ns) / moved;
        int64_t l = (b->total - moved) * per - (now - b->change_ns);
        l = l / 1000000000;
        if (l > 0)
            time_left(left, sizeof left, l);
    }
    int width = term_width();
    int used = (int)(strlen(counters) + 2 + strlen(percent) + strlen(left));
    if (width - used > 0)
        bar_box(box, sizeof box, b, width - used);
    char line[1024];
    int n = snprintf(line, sizeof line, "%s%s%s%s", counters, box, percent,
                     left);
    printf("\r%s%*s", line, n < width ? width - n : 0, "");
    fflush(stdout);
}

static void bar_start(struct bar *b, int64_t total)
{
    memset(b, 0, sizeof *b);
    b->total = total;
    b->start_ns = b->change_ns = now_ns();
    b->next_ns = b->start_ns + 200000000;
    bar_write(b, false);
}

/* bar_tick refreshes the bar when its 200 ms are up. */
static void bar_tick(struct bar *b)
{
    int64_t now = now_ns();
    if (now < b->next_ns)
        return;
    b->next_ns = now + 200000000;
    if (b->current != b->previous) {
        b->change_ns = now;
        b->previous = b->current;
    }
    bar_write(b, false);
}

static void bar_finish(struct bar *b)
{
    bar_write(b, true);
    putchar('\n');
    fflush(stdout);
}

/* ------------------------------------------------------------------------
 * The load: puts kept in flight on one queue
 * ---------------------------------------------------------------------- */

struct load;

/* One request in flight. */
struct slot {
    struct load *l;   /* its load */
    int64_t start_ns; /* when it was sent */
    struct slot *next; /* free list */
};

struct load {
    struct cetcd_client *c;      /* the client */
    struct cetcd_async_queue *q; /* its queue */
    struct slot *slots, *free;   /* max_inflight slots */
    size_t inflight, max_inflight;
    uint8_t *key;                /* prefix + the random key bytes */
    size_t plen, klen;           /* prefix length, key bytes after it */
    uint8_t *value;              /* zeros */
    size_t vlen;
    struct cetcd_latency lat;    /* successful puts' latencies */
    char err_text[ERRORS_MAX][512]; /* failures by text */
    uint64_t err_n[ERRORS_MAX];
    size_t nerr;
    struct bar *bar_per_op;      /* datascale: a step per put */
};

static void load_error(struct load *l, const struct cetcd_status *st)
{
    char text[512];
    ctl_status_text(st, text, sizeof text);
    size_t i = 0;
    while (i < l->nerr && strcmp(l->err_text[i], text) != 0)
        i++;
    if (i == l->nerr && l->nerr < ERRORS_MAX)
        snprintf(l->err_text[l->nerr++], sizeof l->err_text[0], "%s", text);
    if (i < l->nerr)
        l->err_n[i]++;
    l->lat.errors++;
}

static void put_done(void *arg, const struct cetcd_status *st,
                     ProtobufCMessage *resp)
{
    struct slot *s = arg;
    struct load *l = s->l;
    double took = (double)(now_ns() - s->start_ns) / 1e9;
    if (st->code == 0)
        (void)cetcd_latency_add(&l->lat, took);
    else
        load_error(l, st);
    protobuf_c_message_free_unpacked(resp, NULL);
    s->next = l->free;
    l->free = s;
    l->inflight--;
    if (l->bar_per_op)
        l->bar_per_op->current++;
}

/* put_start sends one put of a new random key (etcd: binary.PutVarint of
 * a random int63 over the start of the key's bytes). */
static void put_start(struct load *l)
{
    uint64_t r = ((uint64_t)random() << 32 ^ (uint64_t)random()) >> 1;
    uint64_t zz = r << 1; /* zigzag of a non-negative value */
    size_t i = 0;
    do {
        l->key[l->plen + i++] =
            (uint8_t)((zz & 0x7F) | (zz > 0x7F ? 0x80 : 0));
        zz >>= 7;
    } while (zz && i < l->klen);
    Etcdserverpb__PutRequest req = ETCDSERVERPB__PUT_REQUEST__INIT;
    req.key.data = l->key;
    req.key.len = l->plen + l->klen;
    req.value.data = l->value;
    req.value.len = l->vlen;
    struct slot *s = l->free;
    l->free = s->next;
    s->start_ns = now_ns();
    struct cetcd_async_done done = {put_done, s};
    if (cetcd_async_call(l->c, l->q, "/etcdserverpb.KV/Put", &req.base,
                         NULL, &done) != 0) {
        struct cetcd_status st = {CETCD_INTERNAL, "could not start a put"};
        s->next = l->free;
        l->free = s;
        load_error(l, &st);
        return;
    }
    l->inflight++;
}

static void load_init(struct load *l, size_t inflight, size_t klen,
                      size_t vlen)
{
    memset(l, 0, sizeof *l);
    l->c = ctl_client();
    l->plen = strlen(prefix_flag);
    l->klen = klen;
    l->vlen = vlen;
    l->max_inflight = inflight;
    l->key = calloc(1, l->plen + klen);
    l->value = calloc(1, vlen + 1);
    l->slots = calloc(inflight, sizeof *l->slots);
    if (!l->key || !l->value || !l->slots ||
        cetcd_async_queue_open(&l->q) != 0 ||
        cetcd_latency_init(&l->lat, 1024) != 0)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    memcpy(l->key, prefix_flag, l->plen);
    for (size_t i = 0; i < inflight; i++) {
        l->slots[i].l = l;
        l->slots[i].next = l->free;
        l->free = &l->slots[i];
    }
    srandom((unsigned)now_ns());
}

static void load_close(struct load *l)
{
    cetcd_async_queue_close(l->q);
    cetcd_latency_close(&l->lat);
    free(l->key);
    free(l->value);
    free(l->slots);
}

/* load_drain waits for every put in flight. */
static void load_drain(struct load *l, struct bar *b)
{
    while (l->inflight > 0) {
        cetcd_async_queue_run(l->q, 50);
        if (b)
            bar_tick(b);
    }
}

/* ------------------------------------------------------------------------
 * Before and after the load
 * ---------------------------------------------------------------------- */

/* prefix_end is clientv3's GetPrefixRangeEnd of the prefix. */
static ProtobufCBinaryData prefix_end(const char *p)
{
    size_t n = strlen(p);
    uint8_t *e = malloc(n + 1);
    if (!e)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    memcpy(e, p, n);
    while (n > 0 && e[n - 1] == 0xFF)
        n--;
    if (n == 0) {
        e[0] = 0;
        return (ProtobufCBinaryData){1, e};
    }
    e[n - 1]++;
    return (ProtobufCBinaryData){n, e};
}

/* prefix_empty exits as etcdctl when the prefix has keys. */
static void prefix_empty(void)
{
    Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
    req.key.data = (uint8_t *)prefix_flag;
    req.key.len = strlen(prefix_flag);
    req.range_end = prefix_end(prefix_flag);
    req.limit = 1;
    Etcdserverpb__RangeResponse *r = (Etcdserverpb__RangeResponse *)ctl_call(
        "/etcdserverpb.KV/Range", &req.base,
        &etcdserverpb__range_response__descriptor);
    if (r->n_kvs > 0) {
        fputs("Error: prefix ", stderr);
        ctl_quote(stderr, prefix_flag, strlen(prefix_flag));
        fprintf(stderr, " has keys. Delete with etcdctl del --prefix %s "
                        "first\n",
                prefix_flag);
        exit(CTL_EXIT_INVALID_INPUT);
    }
    protobuf_c_message_free_unpacked(&r->base, NULL);
    free(req.range_end.data);
}

/* prefix_delete deletes the prefix; returns the revision after it. */
static int64_t prefix_delete(void)
{
    Etcdserverpb__DeleteRangeRequest req =
        ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
    req.key.data = (uint8_t *)prefix_flag;
    req.key.len = strlen(prefix_flag);
    req.range_end = prefix_end(prefix_flag);
    Etcdserverpb__DeleteRangeResponse *r =
        (Etcdserverpb__DeleteRangeResponse *)ctl_call(
            "/etcdserverpb.KV/DeleteRange", &req.base,
            &etcdserverpb__delete_range_response__descriptor);
    int64_t rev = r->header ? r->header->revision : 0;
    protobuf_c_message_free_unpacked(&r->base, NULL);
    free(req.range_end.data);
    return rev;
}

/* after_load compacts and defragments as --auto-compact and
 * --auto-defrag ask (etcdctl's compact and defrag helpers). */
static void after_load(int64_t rev)
{
    if (auto_compact) {
        printf("Compacting with revision %lld\n", (long long)rev);
        Etcdserverpb__CompactionRequest req =
            ETCDSERVERPB__COMPACTION_REQUEST__INIT;
        req.revision = rev;
        req.physical = true;
        protobuf_c_message_free_unpacked(
            ctl_call("/etcdserverpb.KV/Compact", &req.base,
                     &etcdserverpb__compaction_response__descriptor),
            NULL);
        printf("Compacted with revision %lld\n", (long long)rev);
    }
    const struct ctl_strings *eps = ctl_endpoint_list();
    for (size_t i = 0; auto_defrag && i < eps->n; i++) {
        printf("Defragmenting ");
        ctl_quote(stdout, eps->v[i], strlen(eps->v[i]));
        printf("\n");
        fflush(stdout);
        /* clientv3's Dial of the endpoint reuses the client's token */
        const char *user = ctl_g.user;
        ctl_g.user = ""; /* ctl_client_for authenticates for --user */
        struct cetcd_client *c = ctl_client_for(eps->v[i]);
        ctl_g.user = user;
        const char *token = ctl_client_token();
        if (token && cetcd_client_token_set(c, token) != 0)
            ctl_exit(CTL_EXIT_ERROR, "out of memory");
        Etcdserverpb__DefragmentRequest req =
            ETCDSERVERPB__DEFRAGMENT_REQUEST__INIT;
        ProtobufCMessage *resp = NULL;
        struct cetcd_status st = {0};
        if (ctl_unary(c, "/etcdserverpb.Maintenance/Defragment", &req.base,
                      &etcdserverpb__defragment_response__descriptor, &resp,
                      &st) != 0)
            ctl_exit_status(CTL_EXIT_ERROR, &st);
        protobuf_c_message_free_unpacked(resp, NULL);
        cetcd_client_close(c);
        printf("Defragmented ");
        ctl_quote(stdout, eps->v[i], strlen(eps->v[i]));
        printf("\n");
    }
}

/* print_errors prints etcdctl's lines for the failed puts; false if
 * there were any. */
static bool print_errors(const struct load *l)
{
    if (l->lat.errors == 0)
        return true;
    printf("FAIL: too many errors\n");
    for (size_t i = 0; i < l->nerr; i++)
        printf("FAIL: ERROR(%s) -> %llu\n", l->err_text[i],
               (unsigned long long)l->err_n[i]);
    return false;
}

/* The timeouts of the check's own calls (see the top of the file).
 * etcdctl gives these calls their own deadlines, not --command-timeout;
 * the client takes its deadline from it, so it is set here, before the
 * client is made. */
static void check_timeouts(int64_t seconds)
{
    ctl_g.command_timeout_ns = seconds * 1000000000;
}

/* ------------------------------------------------------------------------
 * perf
 * ---------------------------------------------------------------------- */

/* perf_load runs the puts for PERF_SECONDS at most limit per second
 * (rate.Limiter with a burst of 1: a put may go when its token is due
 * and a request slot is free), the bar counting the seconds. */
static void perf_load(struct load *l, int limit, struct bar *b)
{
    int64_t start = now_ns(), end = start + (int64_t)PERF_SECONDS * 1000000000;
    int64_t interval = 1000000000 / limit, token = start;
    bar_start(b, PERF_SECONDS);
    for (;;) {
        int64_t now = now_ns();
        if (b->current < PERF_SECONDS)
            b->current = (now - start) / 1000000000;
        bar_tick(b);
        if (now >= end)
            break;
        if (now >= token && l->free != NULL) {
            put_start(l);
            token = (token + interval > now ? token : now) + interval;
            continue;
        }
        int64_t wait = l->free ? token - now : 50000000;
        if (wait > 50000000)
            wait = 50000000;
        cetcd_async_queue_run(l->q, (int)(wait / 1000000));
    }
    b->current = PERF_SECONDS;
    bar_finish(b);
}

/* perf_report prints etcdctl's verdict; returns the exit code. */
static int perf_report(const struct load *l, double total_s, int limit)
{
    struct cetcd_latency_summary s;
    struct cetcd_latency lat = l->lat; /* summarise sorts in place */
    cetcd_latency_summarise(&lat, total_s, &s);
    bool ok = print_errors(l);
    /* etcd's report divides by the count: no success, no mean */
    double stddev = s.count ? s.stddev_s : NAN;
    int rps = (int)s.rps + 1;
    if (s.rps / limit <= 0.9) {
        printf("FAIL: Throughput too low: %d writes/s\n", rps);
        ok = false;
    } else {
        printf("PASS: Throughput is %d writes/s\n", rps);
    }
    if (s.slowest_s > 0.5) {
        printf("Slowest request took too long: %fs\n", s.slowest_s);
        ok = false;
    } else {
        printf("PASS: Slowest request took %fs\n", s.slowest_s);
    }
    if (stddev > 0.1) {
        printf("Stddev too high: %fs\n", stddev);
        ok = false;
    } else if (isnan(stddev)) {
        printf("PASS: Stddev is NaNs\n"); /* Go's %f of NaN */
    } else {
        printf("PASS: Stddev is %fs\n", stddev);
    }
    printf(ok ? "PASS\n" : "FAIL\n");
    return ok ? CTL_EXIT_SUCCESS : CTL_EXIT_ERROR;
}

static int perf_run(int argc, char **argv)
{
    (void)argc, (void)argv;
    const struct model *m = model_find();
    check_timeouts(PERF_SECONDS);
    struct load l;
    load_init(&l, (size_t)m->perf_clients, 256, 1024);
    prefix_empty();
    struct bar b;
    int64_t t0 = now_ns();
    perf_load(&l, m->perf_limit, &b);
    load_drain(&l, NULL);
    double total_s = (double)(now_ns() - t0) / 1e9;
    after_load(prefix_delete());
    int rc = perf_report(&l, total_s, m->perf_limit);
    load_close(&l);
    return rc;
}

/* ------------------------------------------------------------------------
 * datascale
 * ---------------------------------------------------------------------- */

/* http_get fetches url (http or https, as etcdctl's endpointMemoryMetrics
 * does: https offers --cert/--key and checks the server unless
 * --insecure-skip-tls-verify) into a malloc'd body; NULL after printing
 * etcdctl's "fetch error" line. */
static char *http_get(const char *url);

/* rss_bytes reads process_resident_memory_bytes from <ep>/metrics; 0
 * (after etcdctl's line saying why) when it cannot. */
static double rss_bytes(const char *ep)
{
    static const char key[] = "process_resident_memory_bytes";
    char url[1024];
    bool scheme = strncmp(ep, "http://", 7) == 0 ||
                  strncmp(ep, "https://", 8) == 0;
    snprintf(url, sizeof url, "%s%s/metrics", scheme ? "" : "http://", ep);
    char *body = http_get(url);
    if (!body)
        return 0;
    double v = 0;
    bool found = false;
    for (char *line = body; line && *line; ) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (strncmp(line, key, sizeof key - 1) == 0) {
            char *val = line + sizeof key - 1, *end = NULL;
            while (*val == ' ' || *val == '\t')
                val++;
            v = strtod(val, &end);
            found = true;
            if (end == val) {
                printf("parse error: strconv.ParseFloat: parsing \"%s\": "
                       "invalid syntax\n", val);
                v = 0;
            }
            break;
        }
        line = nl ? nl + 1 : NULL;
    }
    if (!found)
        printf("could not find: %s\n", key);
    free(body);
    return v;
}

static void scale_load(struct load *l, int64_t total, struct bar *b)
{
    bar_start(b, total);
    l->bar_per_op = b;
    for (int64_t started = 0; started < total;) {
        while (l->free != NULL && started < total) {
            put_start(l);
            started++;
        }
        cetcd_async_queue_run(l->q, 50);
        bar_tick(b);
    }
    load_drain(l, b);
    bar_finish(b);
}

static int scale_run(int argc, char **argv)
{
    (void)argc, (void)argv;
    const struct model *m = model_find();
    check_timeouts(300);
    struct load l;
    load_init(&l, (size_t)m->scale_clients, 512, 512);
    const char *ep = ctl_endpoint_list()->v[0];
    prefix_empty();
    double before = rss_bytes(ep);
    if (before == 0) {
        printf("FAIL: Could not read process_resident_memory_bytes before "
               "the put operations.\n");
        load_close(&l);
        return CTL_EXIT_ERROR;
    }
    printf("Start data scale check for work load [%lld key-value pairs, "
           "1024 bytes per key-value, %d concurrent clients].\n",
           (long long)m->scale_limit, m->scale_clients);
    struct bar b;
    scale_load(&l, m->scale_limit, &b);
    double after = rss_bytes(ep);
    if (after == 0) {
        printf("FAIL: Could not read process_resident_memory_bytes after "
               "the put operations.\n");
        load_close(&l);
        return CTL_EXIT_ERROR;
    }
    after_load(prefix_delete());
    bool ok = print_errors(&l);
    if (ok)
        printf("PASS: Approximate system memory used : %.2f MB.\n",
               (after - before) / (1024 * 1024));
    load_close(&l);
    return ok ? CTL_EXIT_SUCCESS : CTL_EXIT_ERROR;
}

/* ---- a small HTTP/1.0 GET (the metrics page only) ---- */

/* The connection: a socket, TLS on it for https. */
struct conn {
    int fd;   /* the socket */
    SSL *ssl; /* NULL for http */
};

static int conn_io(struct conn *c, void *p, size_t n, bool wr)
{
    if (c->ssl)
        return wr ? SSL_write(c->ssl, p, (int)n) : SSL_read(c->ssl, p, (int)n);
    return (int)(wr ? write(c->fd, p, n) : read(c->fd, p, n));
}

/* tls_start puts TLS on c as Go's http client with etcdctl's settings
 * would; false after the line saying why. */
static bool tls_start(struct conn *c, const char *host)
{
    if (!ctl_g.cert[0] || !ctl_g.key[0]) {
        printf("client certificate error: open %s: no such file or "
               "directory\n", ctl_g.cert[0] ? ctl_g.key : ctl_g.cert);
        return false;
    }
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx || SSL_CTX_use_certificate_chain_file(ctx, ctl_g.cert) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, ctl_g.key, SSL_FILETYPE_PEM) != 1) {
        printf("client certificate error: %s\n",
               ERR_reason_error_string(ERR_get_error()));
        return false;
    }
    SSL_CTX_set_default_verify_paths(ctx);
    SSL_CTX_set_verify(ctx, ctl_g.insecure_skip_verify ? SSL_VERIFY_NONE
                                                       : SSL_VERIFY_PEER,
                       NULL);
    c->ssl = SSL_new(ctx);
    SSL_CTX_free(ctx); /* the SSL keeps its reference */
    SSL_set_fd(c->ssl, c->fd);
    SSL_set_tlsext_host_name(c->ssl, host);
    if (!ctl_g.insecure_skip_verify)
        SSL_set1_host(c->ssl, host);
    if (SSL_connect(c->ssl) != 1) {
        printf("fetch error: tls: %s\n",
               ERR_reason_error_string(ERR_get_error()));
        return false;
    }
    return true;
}

/* conn_open connects to url's host; false after the fetch error line. */
static bool conn_open(struct conn *c, const char *url, char *host,
                      size_t cap)
{
    bool tls = strncmp(url, "https://", 8) == 0;
    const char *h = url + (tls ? 8 : 7);
    size_t hl = strcspn(h, "/");
    snprintf(host, cap, "%.*s", (int)hl, h);
    char name[512], port[16] = "";
    const char *colon = strrchr(host, ':');
    snprintf(name, sizeof name, "%.*s",
             (int)(colon ? (size_t)(colon - host) : strlen(host)), host);
    snprintf(port, sizeof port, "%s", colon ? colon + 1 : tls ? "443" : "80");
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    if (getaddrinfo(name, port, &hints, &ai) != 0) {
        printf("fetch error: Get \"%s\": dial tcp: lookup %s: no such host\n",
               url, name);
        return false;
    }
    c->fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int rc = c->fd < 0 ? -1 : connect(c->fd, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    if (rc != 0) {
        const char *why = strerror(errno);
        printf("fetch error: Get \"%s\": dial tcp %s: connect: %c%s\n", url,
               host, why[0] >= 'A' && why[0] <= 'Z' ? why[0] + 32 : why[0],
               why + 1);
        return false;
    }
    return !tls || tls_start(c, name);
}

/* dechunk undoes a chunked body in place. */
static void dechunk(char *b)
{
    char *in = b, *out = b;
    for (;;) {
        char *end = NULL;
        unsigned long n = strtoul(in, &end, 16);
        char *data = end ? strstr(end, "\r\n") : NULL;
        if (n == 0 || !data || strlen(data + 2) < n)
            break;
        memmove(out, data + 2, n);
        out += n;
        in = data + 2 + n + 2;
    }
    *out = '\0';
}

/* read_all reads c until it ends into a malloc'd buffer (one byte more
 * for a NUL); NULL when nothing came. */
static char *read_all(struct conn *c, size_t *len)
{
    char *buf = NULL;
    size_t cap = 0;
    *len = 0;
    for (;;) {
        if (*len + 4097 > cap) {
            cap = 2 * cap + 8192;
            char *g = realloc(buf, cap);
            if (!g)
                ctl_exit(CTL_EXIT_ERROR, "out of memory");
            buf = g;
        }
        int r = conn_io(c, buf + *len, 4096, false);
        if (r <= 0)
            break;
        *len += (size_t)r;
    }
    if (*len == 0) {
        free(buf);
        return NULL;
    }
    buf[*len] = '\0';
    return buf;
}

static char *http_get(const char *url)
{
    struct conn c = {.fd = -1};
    char host[600], req[1400], *buf = NULL;
    size_t len = 0;
    if (conn_open(&c, url, host, sizeof host)) {
        int n = snprintf(req, sizeof req,
                         "GET %s HTTP/1.0\r\nHost: %s\r\nUser-Agent: "
                         "Go-http-client/1.1\r\n\r\n",
                         strchr(url + 8, '/'), host);
        if (conn_io(&c, req, (size_t)n, true) == n)
            buf = read_all(&c, &len);
        if (!buf)
            printf("fetch error: Get \"%s\": EOF\n", url);
    }
    if (c.ssl)
        SSL_free(c.ssl);
    if (c.fd >= 0)
        close(c.fd);
    char *body = buf ? strstr(buf, "\r\n\r\n") : NULL;
    if (!body) {
        if (buf)
            printf("fetch error: reading %s: unexpected EOF\n", url);
        free(buf);
        return NULL;
    }
    bool chunked = strcasestr(buf, "transfer-encoding: chunked") != NULL;
    memmove(buf, body + 4, strlen(body + 4) + 1);
    if (chunked)
        dechunk(buf);
    return buf;
}

/* ------------------------------------------------------------------------
 * The commands
 * ---------------------------------------------------------------------- */

static struct ctl_flag perf_flags[] = {
    {"load", 0, CTL_FLAG_STRING, &load_flag, "s",
     "The performance check's workload model. Accepted workloads: "
     "s(small), m(medium), l(large), xl(xLarge)",
     false},
    {"prefix", 0, CTL_FLAG_STRING, &prefix_flag, "/etcdctl-check-perf/",
     "The prefix for writing the performance check's keys.", false},
    {"auto-compact", 0, CTL_FLAG_BOOL, &auto_compact, "false",
     "Compact storage with last revision after test is finished.", false},
    {"auto-defrag", 0, CTL_FLAG_BOOL, &auto_defrag, "false",
     "Defragment storage after test is finished.", false},
    CTL_FLAG_END,
};

static struct ctl_flag scale_flags[] = {
    {"load", 0, CTL_FLAG_STRING, &load_flag, "s",
     "The datascale check's workload model. Accepted workloads: s(small), "
     "m(medium), l(large), xl(xLarge)",
     false},
    {"prefix", 0, CTL_FLAG_STRING, &prefix_flag,
     "/etcdctl-check-datascale/",
     "The prefix for writing the datascale check's keys.", false},
    {"auto-compact", 0, CTL_FLAG_BOOL, &auto_compact, "false",
     "Compact storage with last revision after test is finished.", false},
    {"auto-defrag", 0, CTL_FLAG_BOOL, &auto_defrag, "false",
     "Defragment storage after test is finished.", false},
    CTL_FLAG_END,
};

static const struct ctl_cmd perf_cmd = {
    .use = "perf [options]",
    .short_desc = "Check the performance of the etcd cluster",
    .flags = perf_flags,
    .run = perf_run,
};

static const struct ctl_cmd scale_cmd = {
    .use = "datascale [options]",
    .short_desc = "Check the memory usage of holding data for different "
                  "workloads on a given server endpoint.",
    .long_desc = "If no endpoint is provided, localhost will be used. If "
                 "multiple endpoints are provided, first endpoint will be "
                 "used.",
    .flags = scale_flags,
    .run = scale_run,
};

static const struct ctl_cmd *const subs[] = {&perf_cmd, &scale_cmd, NULL};

const struct ctl_cmd ctl_cmd_check = {
    .use = "check <subcommand>",
    .short_desc = "commands for checking properties of the etcd cluster",
    .subs = subs,
};
