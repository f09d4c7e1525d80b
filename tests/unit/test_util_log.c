/*
 * test_util_log.c - util/log's zap lines and its writer.
 *
 * Goal: zap lines are etcd's shape (level, ts, caller, msg, fields) with
 * JSON escaping as zap's and stay valid JSON when cut; Go durations print
 * as Go does; a caller never blocks on an output nobody reads (the ring
 * fills, lines are dropped and counted, the count is reported later).
 * Method: log_format_zap on chosen input; log_open on a pipe's write end
 * that the test reads only after logging 20 MB.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/log.h"

static void test_duration(void **state)
{
    (void)state;
    static const struct {
        int64_t ns;
        const char *want;
    } cases[] = {{0, "0s"},
                 {999, "999ns"},
                 {1500, "1.5\xc2\xb5s"},
                 {13905090, "13.90509ms"},
                 {900000000, "900ms"},
                 {1000000000, "1s"},
                 {7000000000, "7s"},
                 {1117000000, "1.117s"},
                 {90000000000, "1m30s"},
                 {3600000000000, "1h0m0s"},
                 {-1500000000, "-1.5s"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[64];
        log_go_duration(cases[i].ns, buf, sizeof buf);
        assert_string_equal(buf, cases[i].want);
    }
}

/* The line after its "ts" value, which varies. */
static const char *after_ts(const char *line)
{
    const char *p = strstr(line, "\",\"caller\":");
    assert_non_null(p);
    return p + 2;
}

static void test_zap_line(void **state)
{
    (void)state;
    char buf[LOG_LINE_MAX];
    struct log_field f[] = {
        LOG_ID("local-member-id", 0xbdae9bbc11dd390dULL),
        LOG_CSV("peer-urls", "http://a:1,http://b:2"),
        LOG_CSV("none", ""),
        LOG_DUR_MS("publish-timeout", 7000),
        LOG_INT("forward-ticks", -9),
        LOG_UINT("snapshot-count", 100000),
        LOG_BOOL("pre-vote", true),
        LOG_SIZE("quota-size", 2147483648ULL),
        LOG_STR("s", "q\"b\\n\nt\tc\x01u\xc3\xa9x\xff")};
    size_t n = log_format_zap(buf, sizeof buf, LOG_NOTICE,
                              "/x/src/server/members.c", 715, "added member",
                              f, sizeof f / sizeof f[0]);
    assert_int_equal(n, strlen(buf));
    assert_memory_equal(buf, "{\"level\":\"info\",\"ts\":\"", 22);
    /* 2026-12-04T17:03:00.233Z or ...233+0100 */
    assert_true(buf[22 + 10] == 'T' && buf[22 + 19] == '.');
    assert_string_equal(
        after_ts(buf),
        "\"caller\":\"server/members.c:715\",\"msg\":\"added member\","
        "\"local-member-id\":\"bdae9bbc11dd390d\","
        "\"peer-urls\":[\"http://a:1\",\"http://b:2\"],\"none\":[],"
        "\"publish-timeout\":\"7s\",\"forward-ticks\":-9,"
        "\"snapshot-count\":100000,\"pre-vote\":true,"
        "\"quota-size\":\"2.1 GB\","
        "\"s\":\"q\\\"b\\\\n\\nt\\tc\\u0001u\xc3\xa9x\\ufffd\"}\n");
}

/* A line longer than the buffer is cut inside a string and still ends as
 * JSON: the string, the array and the object are closed. */
static void test_zap_cut(void **state)
{
    (void)state;
    char big[3000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    for (size_t cap = 512; cap < 900; cap += 7) {
        char buf[900];
        struct log_field f[] = {LOG_CSV("urls", big), LOG_STR("x", big)};
        size_t n = log_format_zap(buf, cap, LOG_WARN, "a/b.c", 1, "m", f, 2);
        assert_true(n > 0 && n < cap);
        assert_int_equal(buf[n - 1], '\n');
        buf[n] = '\0';
        int depth = 0, quotes = 0;
        for (size_t i = 0; i < n; i++) {
            if (buf[i] == '\\') {
                i++;
                continue;
            }
            quotes += buf[i] == '"';
            if (quotes % 2 == 0)
                depth += (buf[i] == '{' || buf[i] == '[') -
                         (buf[i] == '}' || buf[i] == ']');
        }
        assert_int_equal(quotes % 2, 0);
        assert_int_equal(depth, 0);
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* 20000 lines of ~1 KB into a pipe nobody reads yet: logging returns at
 * once (the ring is 256 KB, the pipe 64 KB), lines are dropped, and once
 * the pipe is read the writer reports how many. */
static void test_slow_output_never_blocks(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    char path[64], why[256];
    snprintf(path, sizeof path, "/proc/self/fd/%d", p[1]);
    const char *outs[] = {path};
    assert_int_equal(log_open(true, outs, 1, why, sizeof why), 0);
    char text[1000];
    memset(text, 'x', sizeof text - 1);
    text[sizeof text - 1] = '\0';
    double t0 = now_s();
    for (int i = 0; i < 20000; i++)
        log_info("test", "%d %s", i, text);
    double took = now_s() - t0;
    /* Generous on a loaded machine: blocking would be forever. */
    assert_true(took < 10.0);
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    static char got[1 << 20];
    size_t n = 0;
    double deadline = now_s() + 20;
    while (now_s() < deadline && n < sizeof got - 1) {
        ssize_t r = read(p[0], got + n, sizeof got - 1 - n);
        if (r > 0) {
            n += (size_t)r;
            got[n] = '\0';
            if (strstr(got, "dropped ") != NULL &&
                got[n - 1] == '\n')
                break;
        } else {
            usleep(1000);
        }
    }
    got[n] = '\0';
    const char *d = strstr(got, "\"msg\":\"dropped ");
    assert_non_null(d);
    unsigned long long dropped = 0;
    assert_int_equal(sscanf(d, "\"msg\":\"dropped %llu log lines", &dropped),
                     1);
    assert_true(dropped > 0 && dropped < 20000);
    assert_memory_equal(got, "{\"level\":\"info\"", 15);
    /* The reader goes away: the writer's next write fails (EPIPE, as in
     * cetcd SIGPIPE is ignored) and log_close returns without waiting. */
    signal(SIGPIPE, SIG_IGN);
    close(p[0]);
    double c0 = now_s();
    log_close();
    assert_true(now_s() - c0 < 4.0);
    close(p[1]);
}

static void test_open_errors(void **state)
{
    (void)state;
    char why[256];
    const char *bad[] = {"/nonexistent-dir-cetcd/x.log"};
    assert_int_equal(log_open(true, bad, 1, why, sizeof why), -820);
    assert_string_equal(why, "open sink \"/nonexistent-dir-cetcd/x.log\": "
                             "open /nonexistent-dir-cetcd/x.log: no such "
                             "file or directory");
    setenv("CETCD_JOURNAL_SOCKET", "/nonexistent-dir-cetcd/socket", 1);
    const char *j[] = {"systemd/journal"};
    assert_int_equal(log_open(true, j, 1, why, sizeof why), -820);
    assert_string_equal(why, "can't find journal (dial unixgram "
                             "/nonexistent-dir-cetcd/socket: connect: no "
                             "such file or directory)");
    assert_false(log_is_zap());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_duration),
        cmocka_unit_test(test_zap_line),
        cmocka_unit_test(test_zap_cut),
        cmocka_unit_test(test_open_errors),
        cmocka_unit_test(test_slow_output_never_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
