/*
 * bench.h - cetcd-bench's internal interface: the parsed command line, the
 * runner that keeps every client's request in flight, and the report.
 *
 * Threads: main parses, then bench_run() starts cfg->threads threads, each
 * owning one async queue and the workers (logical clients) bound to it; a
 * worker's next request is started from its previous one's callback, so
 * every worker's state is touched by one thread only.
 */
#ifndef CETCD_BENCH_H
#define CETCD_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cetcd/cetcd.h"

enum bench_op { BENCH_PUT, BENCH_RANGE, BENCH_TXN_PUT, BENCH_WATCH,
                BENCH_WATCH_LATENCY, BENCH_LEASE_KEEPALIVE, BENCH_LEASE_PUT };

/* The command line, as etcd's benchmark takes it. */
struct bench_cfg {
    enum bench_op op;          /* subcommand */
    const char *endpoints;     /* --endpoints, comma separated */
    int conns;                 /* --conns: gRPC connections */
    int clients;               /* --clients: requests in flight */
    int threads;               /* --threads: completion-queue threads */
    long total;                /* --total requests */
    int key_size;              /* --key-size bytes */
    int val_size;              /* --val-size bytes */
    long key_space_size;       /* --key-space-size */
    bool sequential_keys;      /* --sequential-keys */
    int txn_ops;               /* --txn-ops puts per txn */
    bool serializable;         /* --consistency s */
    long limit;                /* range --limit */
    bool count_only;           /* range --count-only */
    const char *range_key;     /* range <key> */
    const char *range_end;     /* range [end], NULL = single key */
    int dial_timeout_ms;       /* --dial-timeout */
    bool precise;              /* --precise: full-precision numbers */
    const char *token;         /* --token: auth token metadata */
    /* watch / watch-latency (etcd benchmark's flags, see watch.c) */
    int streams;               /* --streams: watch streams */
    int watch_per_stream;      /* --watch-per-stream watchers each */
    bool watch_prefix;         /* --prefix: every watcher sees every put */
    long put_total;            /* watch --put-total puts */
    int put_rate;              /* --put-rate puts/s; 0 = unpaced */
    int watch_wait_s;          /* --watch-wait: wait for missing events */
    int watch_hold_s;          /* --watch-hold: idle after creation */
    long lease_ttl;            /* --lease-ttl: TTL of granted leases */
    bool key_size_set;         /* --key-size was given */
    bool val_size_set;         /* --val-size was given */
    bool total_set;            /* --total was given */
};

/* What a run measured. */
struct bench_result {
    struct cetcd_latency lat;  /* latencies of successful requests */
    double total_s;            /* first start to last completion */
    char first_error[512];     /* message of the first failure, if any */
};

/* bench_cfg_parse fills cfg from argv; prints usage and returns -1 on
 * error, 1 for --help, 0 on success. */
int bench_cfg_parse(struct bench_cfg *cfg, int argc, char **argv);

/* bench_run connects, runs cfg->total requests and fills res (res->lat is
 * initialised here; close it with cetcd_latency_close).  Returns 0, or a
 * cetcd_code when it could not connect or start. */
int bench_run(const struct bench_cfg *cfg, struct bench_result *res);

/* bench_watch runs the watch or watch-latency subcommand (watch.c) and
 * prints its reports.  Returns 0, or a cetcd_code when it could not
 * connect or start (the message on stderr). */
int bench_watch(const struct bench_cfg *cfg);

/* bench_report_named prints one report of lat (as bench_report, under
 * title when not NULL) with "RESULT op=<op>". */
void bench_report_named(const struct bench_cfg *cfg, const char *op,
                        const char *title, struct cetcd_latency *lat,
                        double total_s, const char *first_error);

/* bench_report prints etcd benchmark's summary, histogram, percentiles and
 * error count, then the RESULT line for scripts. */
void bench_report(const struct bench_cfg *cfg, struct bench_result *res);

#endif
