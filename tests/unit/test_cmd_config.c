/*
 * test_cmd_config.c - goal: config_parse (src/cmd/config.c) turns etcd
 * 3.4's YAML keys into the flag values etcd would set, and a bad file
 * into etcd's message with nothing set.  Method: config_parse on small
 * documents with a setter that records (flag, value) pairs; one group per
 * rule: plain values, nested TLS blocks, nulls keep the default, lists,
 * durations in nanoseconds, YAML 1.1 booleans and integers, unknown keys
 * (warned, ignored), the first error in sorted key order, a refusing
 * setter, and a non-mapping document.  (tests/integration/test_config_file
 * compares the error texts with /usr/bin/etcd's.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cmd/config.h"
#include "util/err.h"

struct rec {
    char got[2048]; /* "flag=value;" for each set, in order */
    int warns;      /* warnings received */
    int refuse_at;  /* refuse the Nth set (1-based), 0: never */
    int sets;       /* sets received */
};

static int set(void *ctx, const char *key, const char *flag,
               const char *value, char *err, size_t cap)
{
    struct rec *r = ctx;
    r->sets++;
    if (r->refuse_at == r->sets) {
        snprintf(err, cap, "refused %s", key);
        return 1;
    }
    size_t n = strlen(r->got);
    snprintf(r->got + n, sizeof r->got - n, "%s=%s;", flag, value);
    return 0;
}

static void warn(void *ctx, const char *msg)
{
    (void)msg;
    ((struct rec *)ctx)->warns++;
}

static int parse(const char *doc, struct rec *r, char *err, size_t cap)
{
    return config_parse(doc, strlen(doc), set, warn, r, err, cap);
}

static void expect_ok(const char *doc, const char *want)
{
    struct rec r = {0};
    char err[512];
    assert_int_equal(parse(doc, &r, err, sizeof err), 0);
    assert_string_equal(r.got, want);
    assert_string_equal(err, "");
}

static void expect_err(const char *doc, const char *want)
{
    struct rec r = {0};
    char err[512];
    assert_int_equal(parse(doc, &r, err, sizeof err), ERR_CONFIG_FILE);
    assert_string_equal(err, want);
    assert_string_equal(r.got, ""); /* a bad file sets nothing */
}

static void test_plain_values(void **state)
{
    (void)state;
    expect_ok("name: m1\nsnapshot-count: 0x10\nstrict-reconfig-check: off\n"
              "quota-backend-bytes: -1\n",
              "name=m1;snapshot-count=16;strict-reconfig-check=false;"
              "quota-backend-bytes=-1;");
    expect_ok("name: '15'\nauto-compaction-retention: \"1h\"\n",
              "name=15;auto-compaction-retention=1h;");
}

static void test_nested_tls(void **state)
{
    (void)state;
    expect_ok("client-transport-security:\n  cert-file: c.pem\n"
              "  client-cert-auth: yes\n  bogus: 1\n"
              "peer-transport-security:\n  auto-tls: true\n",
              "cert-file=c.pem;client-cert-auth=true;peer-auto-tls=true;");
}

static void test_null_keeps_default(void **state)
{
    (void)state;
    expect_ok("data-dir:\nwal-dir: ~\ndiscovery: null\n"
              "client-transport-security:\n", "");
    expect_ok("", "");
    expect_ok("# only a comment\n", "");
}

static void test_lists_and_durations(void **state)
{
    (void)state;
    expect_ok("log-outputs: [stderr, stdout]\ncipher-suites: []\n"
              "grpc-keepalive-min-time: 5000000000\n"
              "log-output: [default]\n",
              "log-outputs=stderr,stdout;cipher-suites=;"
              "grpc-keepalive-min-time=5000000000ns;log-outputs=default;");
}

static void test_unknown_keys_warned(void **state)
{
    (void)state;
    struct rec r = {0};
    char err[256];
    assert_int_equal(parse("tls-min-version: TLS1.2\nname: x\n"
                           "experimental-enable-lease-checkpoint-persist: "
                           "true\n", &r, err, sizeof err), 0);
    assert_string_equal(r.got, "name=x;");
    assert_int_equal(r.warns, 1);
}

static void test_first_error_sorted(void **state)
{
    (void)state;
    /* etcd decodes a sorted JSON map: election-timeout before pre-vote. */
    expect_err("pre-vote: 3\nelection-timeout: x\n",
               "error unmarshaling JSON: while decoding JSON: json: cannot "
               "unmarshal string into Go struct field "
               "configYAML.election-timeout of type uint");
    /* configProxy's keys only when configYAML's decode passed. */
    expect_err("proxy-dial-timeout: x\nname: [1]\n",
               "error unmarshaling JSON: while decoding JSON: json: cannot "
               "unmarshal array into Go struct field configYAML.name of "
               "type string");
    expect_err("max-concurrent-streams: 4294967296\n",
               "error unmarshaling JSON: while decoding JSON: json: cannot "
               "unmarshal number 4294967296 into Go struct field "
               "configYAML.max-concurrent-streams of type uint32");
    expect_err("name: [x\n", "error converting YAML to JSON: yaml: line 1: "
               "did not find expected ',' or ']'");
}

static void test_refusing_setter(void **state)
{
    (void)state;
    struct rec r = {.refuse_at = 2};
    char err[256];
    assert_int_equal(parse("name: a\ndata-dir: b\nwal-dir: c\n", &r, err,
                           sizeof err), ERR_CONFIG_FILE);
    assert_string_equal(err, "refused data-dir");
    assert_int_equal(r.sets, 2); /* stopped there */
}

static void test_not_a_mapping(void **state)
{
    (void)state;
    expect_err("- a\n", "error unmarshaling JSON: while decoding JSON: json: "
               "cannot unmarshal array into Go value of type "
               "embed.configYAML");
    expect_err("5\n", "error unmarshaling JSON: while decoding JSON: json: "
               "cannot unmarshal number into Go value of type "
               "embed.configYAML");
}

static void test_missing_file(void **state)
{
    (void)state;
    struct rec r = {0};
    char err[256];
    assert_int_equal(config_load("/nonexistent/c.yml", set, warn, &r, err,
                                 sizeof err), ERR_CONFIG_FILE);
    assert_string_equal(err, "open /nonexistent/c.yml: no such file or "
                             "directory");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_values),
        cmocka_unit_test(test_nested_tls),
        cmocka_unit_test(test_null_keeps_default),
        cmocka_unit_test(test_lists_and_durations),
        cmocka_unit_test(test_unknown_keys_warned),
        cmocka_unit_test(test_first_error_sorted),
        cmocka_unit_test(test_refusing_setter),
        cmocka_unit_test(test_not_a_mapping),
        cmocka_unit_test(test_missing_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
