/*
 * main.c - cetcd-bench's command line: etcd benchmark's global flags
 * (--endpoints --conns --clients --total --dial-timeout --precise) and the
 * subcommands put, range <key> [end], txn-put, watch, watch-latency,
 * lease-keepalive, lease-put with their flags.  Flags may
 * come before or after the subcommand, as "--flag value" or "--flag=value".
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"

static const char usage[] =
    "usage: cetcd-bench [global flags] <put|range <key> [end]|txn-put|watch|"
    "watch-latency|lease-keepalive|lease-put> [flags]\n"
    "lease-keepalive: each client grants a lease (TTL 100) and keeps it\n"
    "  alive once per request (etcd's KeepAliveOnce: a LeaseKeepAlive\n"
    "  stream with one renewal); --total renewals in all\n"
    "lease-put: one request is a LeaseGrant (TTL 100) then a Put of the\n"
    "  next key with that lease (the put flags apply; keys are sequential):\n"
    "  --total leases, each holding one key (a loader for lease memory and\n"
    "  restart measurements)\n"
    "  --lease-ttl SECS     TTL of the leases granted (lease-keepalive and\n"
    "                       lease-put; default 100, etcd benchmark's)\n"
    "global flags:\n"
    "  --endpoints LIST     gRPC endpoints (default 127.0.0.1:2379)\n"
    "  --conns N            number of gRPC connections (default 1)\n"
    "  --clients N          number of clients in flight (default 1)\n"
    "  --threads N          completion-queue threads (default 2, <= clients)\n"
    "  --total N            total number of requests (default 10000)\n"
    "  --dial-timeout SECS  dial timeout (default 5)\n"
    "  --precise            print numbers at full precision\n"
    "  --token TOKEN        auth token sent with every request\n"
    "put / txn-put flags:\n"
    "  --key-size N         key size in bytes (default 8)\n"
    "  --val-size N         value size in bytes (default 8)\n"
    "  --key-space-size N   maximum possible keys (default 1)\n"
    "  --sequential-keys    use sequential keys (put)\n"
    "  --txn-ops N          puts per txn (txn-put, default 1)\n"
    "range flags:\n"
    "  --consistency l|s    linearizable or serializable (default l)\n"
    "  --limit N            maximum keys per range (default 0: all)\n"
    "  --count-only         return only the count\n"
    "watch flags (watchers created, then puts, events timed put->event):\n"
    "  --streams N          watch streams (default 10)\n"
    "  --watch-per-stream N watchers per stream (default 100; watch-latency:\n"
    "                       10, also --watchers-per-stream)\n"
    "  --prefix             watch the whole key prefix (every watcher sees\n"
    "                       every put) instead of one key each\n"
    "  --put-total N        puts (watch, default 1000; watch-latency: --total)\n"
    "  --put-rate N         puts per second (watch default 0 = unpaced,\n"
    "                       watch-latency default 100)\n"
    "  --key-size N         key size (default 32), --key-space-size N keys\n"
    "                       watched (default 1), --sequential-keys\n"
    "  --val-size N         value size, >= 8: it carries the send time\n"
    "                       (default 32)\n"
    "  --watch-wait SECS    wait for missing events after the last put, then\n"
    "                       count them as errors (default 10)\n"
    "  --watch-hold SECS    after every watcher is created, print\n"
    "                       \"WATCHERS CREATED\" and wait SECS before the\n"
    "                       puts (for memory probes; default 0)\n";

enum { O_ENDPOINTS = 256, O_CONNS, O_CLIENTS, O_THREADS, O_TOTAL, O_DIAL,
       O_PRECISE, O_TOKEN, O_KEY_SIZE, O_VAL_SIZE, O_KEY_SPACE, O_SEQ,
       O_TXN_OPS, O_CONSISTENCY, O_LIMIT, O_COUNT_ONLY, O_HELP, O_STREAMS,
       O_WPS, O_PREFIX, O_PUT_TOTAL, O_PUT_RATE, O_WATCH_WAIT,
       O_WATCH_HOLD, O_LEASE_TTL };

static const struct option longopts[] = {
    {"endpoints", required_argument, NULL, O_ENDPOINTS},
    {"conns", required_argument, NULL, O_CONNS},
    {"clients", required_argument, NULL, O_CLIENTS},
    {"threads", required_argument, NULL, O_THREADS},
    {"total", required_argument, NULL, O_TOTAL},
    {"dial-timeout", required_argument, NULL, O_DIAL},
    {"precise", no_argument, NULL, O_PRECISE},
    {"token", required_argument, NULL, O_TOKEN},
    {"key-size", required_argument, NULL, O_KEY_SIZE},
    {"val-size", required_argument, NULL, O_VAL_SIZE},
    {"key-space-size", required_argument, NULL, O_KEY_SPACE},
    {"sequential-keys", no_argument, NULL, O_SEQ},
    {"txn-ops", required_argument, NULL, O_TXN_OPS},
    {"consistency", required_argument, NULL, O_CONSISTENCY},
    {"limit", required_argument, NULL, O_LIMIT},
    {"count-only", no_argument, NULL, O_COUNT_ONLY},
    {"help", no_argument, NULL, O_HELP},
    {"streams", required_argument, NULL, O_STREAMS},
    {"watch-per-stream", required_argument, NULL, O_WPS},
    {"watchers-per-stream", required_argument, NULL, O_WPS},
    {"prefix", no_argument, NULL, O_PREFIX},
    {"put-total", required_argument, NULL, O_PUT_TOTAL},
    {"put-rate", required_argument, NULL, O_PUT_RATE},
    {"watch-wait", required_argument, NULL, O_WATCH_WAIT},
    {"watch-hold", required_argument, NULL, O_WATCH_HOLD},
    {"lease-ttl", required_argument, NULL, O_LEASE_TTL},
    {NULL, 0, NULL, 0},
};

/* num parses a positive (or >= min) integer flag value. */
static int num(const char *s, long min, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);

    if (*s == '\0' || *end != '\0' || v < min)
        return -1;
    *out = v;
    return 0;
}

static int set_num(int c, long v, struct bench_cfg *cfg)
{
    switch (c) {
    case O_CONNS: cfg->conns = (int)v; break;
    case O_CLIENTS: cfg->clients = (int)v; break;
    case O_THREADS: cfg->threads = (int)v; break;
    case O_TOTAL: cfg->total = v; cfg->total_set = true; break;
    case O_DIAL: cfg->dial_timeout_ms = (int)(v * 1000); break;
    case O_KEY_SIZE: cfg->key_size = (int)v; cfg->key_size_set = true; break;
    case O_VAL_SIZE: cfg->val_size = (int)v; cfg->val_size_set = true; break;
    case O_STREAMS: cfg->streams = (int)v; break;
    case O_WPS: cfg->watch_per_stream = (int)v; break;
    case O_PUT_TOTAL: cfg->put_total = v; break;
    case O_PUT_RATE: cfg->put_rate = (int)v; break;
    case O_WATCH_WAIT: cfg->watch_wait_s = (int)v; break;
    case O_WATCH_HOLD: cfg->watch_hold_s = (int)v; break;
    case O_LEASE_TTL: cfg->lease_ttl = v; break;
    case O_KEY_SPACE: cfg->key_space_size = v; break;
    case O_TXN_OPS: cfg->txn_ops = (int)v; break;
    case O_LIMIT: cfg->limit = v; break;
    default: return -1;
    }
    return 0;
}

static int flag(int c, const char *arg, struct bench_cfg *cfg)
{
    long v;

    switch (c) {
    case O_ENDPOINTS: cfg->endpoints = arg; return 0;
    case O_PRECISE: cfg->precise = true; return 0;
    case O_TOKEN: cfg->token = arg; return 0;
    case O_SEQ: cfg->sequential_keys = true; return 0;
    case O_COUNT_ONLY: cfg->count_only = true; return 0;
    case O_PREFIX: cfg->watch_prefix = true; return 0;
    case O_CONSISTENCY:
        if (strcmp(arg, "l") != 0 && strcmp(arg, "s") != 0)
            return -1;
        cfg->serializable = arg[0] == 's';
        return 0;
    default:
        if (num(arg, c == O_LIMIT || c == O_PUT_RATE || c == O_WATCH_HOLD
                         ? 0 : 1, &v) != 0)
            return -1;
        return set_num(c, v, cfg);
    }
}

static int subcommand(struct bench_cfg *cfg, int argc, char **argv)
{
    if (argc < 1)
        return -1;
    if (strcmp(argv[0], "put") == 0 && argc == 1)
        cfg->op = BENCH_PUT;
    else if (strcmp(argv[0], "txn-put") == 0 && argc == 1)
        cfg->op = BENCH_TXN_PUT;
    else if (strcmp(argv[0], "watch") == 0 && argc == 1)
        cfg->op = BENCH_WATCH;
    else if (strcmp(argv[0], "lease-keepalive") == 0 && argc == 1)
        cfg->op = BENCH_LEASE_KEEPALIVE;
    else if (strcmp(argv[0], "lease-put") == 0 && argc == 1)
        cfg->op = BENCH_LEASE_PUT;
    else if (strcmp(argv[0], "watch-latency") == 0 && argc == 1)
        cfg->op = BENCH_WATCH_LATENCY;
    else if (strcmp(argv[0], "range") == 0 && (argc == 2 || argc == 3)) {
        cfg->op = BENCH_RANGE;
        cfg->range_key = argv[1];
        cfg->range_end = argc == 3 ? argv[2] : NULL;
    } else
        return -1;
    return 0;
}

/* watch_defaults applies the watch subcommands' own defaults (etcd's
 * benchmark: 32-byte keys and values, 100 watchers per stream for watch,
 * 10 and 100 puts/s for watch-latency) to the flags not given. */
static void watch_defaults(struct bench_cfg *cfg)
{
    bool lat = cfg->op == BENCH_WATCH_LATENCY;

    if (cfg->op != BENCH_WATCH && !lat)
        return;
    if (!cfg->key_size_set)
        cfg->key_size = 32;
    if (!cfg->val_size_set)
        cfg->val_size = 32;
    if (cfg->val_size < 8)
        cfg->val_size = 8; /* the send time */
    if (cfg->watch_per_stream < 0)
        cfg->watch_per_stream = lat ? 10 : 100;
    if (cfg->put_rate < 0)
        cfg->put_rate = lat ? 100 : 0;
    if (!lat)
        cfg->total = cfg->put_total;
}

int bench_cfg_parse(struct bench_cfg *cfg, int argc, char **argv)
{
    int c;

    *cfg = (struct bench_cfg){.endpoints = "127.0.0.1:2379", .conns = 1,
                              .clients = 1, .threads = 2, .total = 10000,
                              .key_size = 8, .val_size = 8,
                              .key_space_size = 1, .txn_ops = 1,
                              .dial_timeout_ms = 5000, .streams = 10,
                              .watch_per_stream = -1, .put_total = 1000,
                              .put_rate = -1, .watch_wait_s = 10,
                              .lease_ttl = 100};
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (c == 'h' || c == O_HELP) {
            fputs(usage, stdout);
            return 1;
        }
        if (c == '?' || flag(c, optarg, cfg) != 0) {
            if (c != '?')
                fprintf(stderr, "cetcd-bench: bad value \"%s\"\n", optarg);
            fputs(usage, stderr);
            return -1;
        }
    }
    if (subcommand(cfg, argc - optind, argv + optind) != 0) {
        fputs(usage, stderr);
        return -1;
    }
    watch_defaults(cfg);
    if (cfg->threads > cfg->clients)
        cfg->threads = cfg->clients;
    if (cfg->conns > cfg->clients)
        cfg->conns = cfg->clients;
    return 0;
}

int main(int argc, char **argv)
{
    struct bench_cfg cfg;
    struct bench_result res;
    int rc;

    rc = bench_cfg_parse(&cfg, argc, argv);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    if (cfg.op == BENCH_WATCH || cfg.op == BENCH_WATCH_LATENCY)
        return bench_watch(&cfg) == 0 ? 0 : 1;
    rc = bench_run(&cfg, &res);
    if (rc != 0) {
        fprintf(stderr, "cetcd-bench: %s: %s\n", cetcd_code_name(rc),
                res.first_error);
        return 1;
    }
    bench_report(&cfg, &res);
    cetcd_latency_close(&res.lat);
    return 0;
}
