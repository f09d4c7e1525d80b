/*
 * test_util.c - goal: the shared pieces (crc32c, err table, mem faults) are
 * right.  Method: known CRC-32C vectors (RFC 3720), hardware vs. table path
 * agreement through extend(), error-table round trips, fault injection.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/x509v3.h>

#include "util/crc32c.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/mem.h"
#include "util/str.h"
#include "util/thread.h"
#include "util/tls_alert.h"
#include "util/x509_host.h"

static void test_crc32c_vectors(void **state)
{
    (void)state;
    unsigned char buf[32];
    assert_int_equal(crc32c_extend(0, "123456789", 9), 0xe3069283);
    memset(buf, 0, sizeof buf);
    assert_int_equal(crc32c_extend(0, buf, 32), 0x8a9136aa);
    memset(buf, 0xff, sizeof buf);
    assert_int_equal(crc32c_extend(0, buf, 32), 0x62a8ab43);
    for (int i = 0; i < 32; i++)
        buf[i] = (unsigned char)i;
    assert_int_equal(crc32c_extend(0, buf, 32), 0x46dd794e);
}

static void test_crc32c_extend_split(void **state)
{
    (void)state;
    char data[1000];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (char)(i * 7 + 3);
    uint32_t whole = crc32c_extend(0, data, sizeof data);
    for (size_t cut = 0; cut <= sizeof data; cut += 37) {
        uint32_t c = crc32c_extend(0, data, cut);
        c = crc32c_extend(c, data + cut, sizeof data - cut);
        assert_int_equal(c, whole);
    }
}

static void test_err_table(void **state)
{
    (void)state;
    assert_string_equal(err_str(ERR_COMPACTED),
                        "mvcc: required revision has been compacted");
    assert_string_equal(err_name(ERR_NOMEM), "ERR_NOMEM");
    assert_string_equal(err_str(12345), "unknown error");
    assert_int_equal(err_from_errno(28 /* ENOSPC */), ERR_NOSPC);
}

static void test_mem_fault(void **state)
{
    (void)state;
    mem_fault_set(2);
    void *a = mem_malloc(8);
    void *b = mem_malloc(8);
    void *c = mem_malloc(8);
    assert_non_null(a);
    assert_null(b);
    assert_non_null(c);
    mem_free(a);
    mem_free(c);
}

/* mem_rss_shared sees a file mapping's pages come in when they are read
 * and go when they are dropped (what the server's house thread relies on
 * to trim the store map on a budget). */
static void test_mem_rss_shared(void **state)
{
    (void)state;
    const size_t len = 32u << 20;
    char path[] = "/tmp/test_util_rssXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    assert_int_equal(ftruncate(fd, (off_t)len), 0);
    char *buf = malloc(1u << 20);
    assert_non_null(buf);
    memset(buf, 'x', 1u << 20);
    for (size_t off = 0; off < len; off += 1u << 20)
        assert_int_equal(pwrite(fd, buf, 1u << 20, (off_t)off), 1 << 20);
    free(buf);
    char *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    assert_true(map != MAP_FAILED);
    size_t before = mem_rss_shared();
    assert_true(before > 0);
    unsigned sum = 0;
    for (size_t off = 0; off < len; off += 4096)
        sum += (unsigned char)map[off];
    assert_int_equal(sum, (unsigned)'x' * (len / 4096));
    size_t mapped = mem_rss_shared();
    assert_true(mapped >= before + len - (1u << 20));
    assert_int_equal(madvise(map, len, MADV_DONTNEED), 0);
    size_t after = mem_rss_shared();
    assert_true(after + len - (1u << 20) <= mapped);
    munmap(map, len);
    close(fd);
}

/* fs_write_all, fs_pwrite_all and fs_pread_all move every byte (300 kB
 * through a 64 kB pipe to a checking reader; a file at two offsets), at
 * the offsets asked; a read past the end is ERR_IO; a write to a pipe
 * nobody reads is an error. */
static void test_fs_all(void **state)
{
    (void)state;
    char path[] = "/tmp/cetcd-test-fs-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    static unsigned char big[300000], back[300000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (unsigned char)(i * 7 + i / 251);
    assert_int_equal(fs_pwrite_all(fd, big, sizeof big, 4096), 0);
    assert_int_equal(fs_pwrite_all(fd, "head", 4, 0), 0);
    assert_int_equal(fs_pread_all(fd, back, sizeof big, 4096), 0);
    assert_memory_equal(back, big, sizeof big);
    assert_int_equal(fs_pread_all(fd, back, 4, 0), 0);
    assert_memory_equal(back, "head", 4);
    assert_int_equal(fs_pread_all(fd, back, 2, 4096 + sizeof big - 1), ERR_IO);
    close(fd);

    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) { /* the reader: checks every byte, exits 0 if all came */
        close(p[1]);
        size_t got = 0;
        unsigned char b[8192];
        ssize_t r;
        while ((r = read(p[0], b, sizeof b)) > 0) {
            for (ssize_t i = 0; i < r; i++)
                if (b[i] != big[got + (size_t)i])
                    _exit(2);
            got += (size_t)r;
        }
        _exit(got == sizeof big ? 0 : 1);
    }
    close(p[0]);
    assert_int_equal(fs_write_all(p[1], big, sizeof big), 0);
    close(p[1]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    assert_int_equal(pipe(p), 0);
    close(p[0]);
    signal(SIGPIPE, SIG_IGN);
    assert_true(fs_write_all(p[1], "x", 1) != 0);
    close(p[1]);
}

static void test_str_go_duration(void **state)
{
    (void)state;
    char b[40];
    /* Go's time.Duration.String for the same values. */
    assert_string_equal(str_go_duration(b, sizeof b, 0), "0s");
    assert_string_equal(str_go_duration(b, sizeof b, 350), "350ns");
    assert_string_equal(str_go_duration(b, sizeof b, 1500), "1.5\xc2\xb5s");
    assert_string_equal(str_go_duration(b, sizeof b, 12345000), "12.345ms");
    assert_string_equal(str_go_duration(b, sizeof b, 2000000000ull), "2s");
    assert_string_equal(str_go_duration(b, sizeof b, 90000000000ull),
                        "1m30s");
    assert_string_equal(str_go_duration(b, sizeof b, 3600000000000ull),
                        "1h0m0s");
    assert_string_equal(str_go_duration(b, sizeof b, 3723500000000ull),
                        "1h2m3.5s");
    /* A short buffer is cut, NUL-terminated. */
    char s[4];
    assert_string_equal(str_go_duration(s, sizeof s, 3723500000000ull),
                        "1h2");
}

static void test_str_trim(void **state)
{
    (void)state;
    const char *txt = " \t http://a:1 \n";
    const char *b = txt, *e = txt + strlen(txt);
    str_trim(&b, &e);
    assert_int_equal(e - b, 10);
    assert_memory_equal(b, "http://a:1", 10);
    const char *blank = " \t\r\n";
    b = blank;
    e = blank + strlen(blank);
    str_trim(&b, &e);
    assert_true(b == e);
    char s1[] = "  x y  ", s2[] = "   ", s3[] = "z";
    str_trim_inplace(s1);
    str_trim_inplace(s2);
    str_trim_inplace(s3);
    assert_string_equal(s1, "x y");
    assert_string_equal(s2, "");
    assert_string_equal(s3, "z");
}

/* Go's words for alerts, and OpenSSL's error texts read back (the gRPC
 * core logs them: dial/gprlog.c). */
/* Turns (thread.h): work deferred inside a turn runs once at its end, in
 * order, the same (fn, arg) once; work deferred while the end runs runs
 * too, even the same (fn, arg) again; outside a turn (and with the queue
 * full) the caller is told to do it now. */
struct turn_log {
    char s[64];
    size_t n;
};
static struct turn_log tl;

static void turn_a(void *arg)
{
    tl.s[tl.n++] = *(const char *)arg;
}

static void turn_again(void *arg)
{
    tl.s[tl.n++] = 'r';
    if (tl.n < 2) /* defers itself once more while the turn ends */
        assert_true(thread_turn_defer(turn_again, arg));
}

static void test_thread_turns(void **state)
{
    (void)state;
    static const char a = 'a', b = 'b';
    memset(&tl, 0, sizeof tl);
    assert_false(thread_turn_defer(turn_a, (void *)&a)); /* no turn */
    thread_turn_begin();
    assert_true(thread_turn_defer(turn_a, (void *)&a));
    assert_true(thread_turn_defer(turn_a, (void *)&b));
    assert_true(thread_turn_defer(turn_a, (void *)&a)); /* queued already */
    assert_int_equal(tl.n, 0);                           /* nothing ran */
    thread_turn_end();
    assert_string_equal(tl.s, "ab");
    assert_false(thread_turn_defer(turn_a, (void *)&a)); /* closed */

    memset(&tl, 0, sizeof tl);
    thread_turn_begin();
    assert_true(thread_turn_defer(turn_again, NULL));
    thread_turn_end();
    assert_string_equal(tl.s, "rr");

    /* a full queue: the caller runs the work itself */
    static char k[THREAD_TURN_MAX + 1];
    memset(&tl, 0, sizeof tl);
    thread_turn_begin();
    for (int i = 0; i < THREAD_TURN_MAX; i++) {
        k[i] = (char)('0' + i);
        assert_true(thread_turn_defer(turn_a, &k[i]));
    }
    assert_false(thread_turn_defer(turn_a, &k[THREAD_TURN_MAX]));
    thread_turn_end();
    assert_int_equal(tl.n, THREAD_TURN_MAX);
    assert_memory_equal(tl.s, "01234567", THREAD_TURN_MAX);
}

/* Held wake-ups: queued once per (fn, arg), run at the outermost
 * release in order, refused (the caller wakes now) when nothing is held
 * or the queue is full. */
static void test_thread_wakes_held(void **state)
{
    (void)state;
    static const char a = 'a', b = 'b';
    memset(&tl, 0, sizeof tl);
    assert_false(thread_wake_defer(turn_a, (void *)&a)); /* not held */
    thread_wakes_hold();
    assert_true(thread_wake_defer(turn_a, (void *)&a));
    thread_wakes_hold(); /* nested */
    assert_true(thread_wake_defer(turn_a, (void *)&b));
    assert_true(thread_wake_defer(turn_a, (void *)&a)); /* once */
    thread_wakes_release();
    assert_int_equal(tl.n, 0); /* still held by the outer one */
    thread_wakes_release();
    assert_string_equal(tl.s, "ab");
    assert_false(thread_wake_defer(turn_a, (void *)&a)); /* released */

    /* a full queue: the caller wakes now */
    static char k[THREAD_WAKES_MAX + 1];
    memset(&tl, 0, sizeof tl);
    thread_wakes_hold();
    for (int i = 0; i < THREAD_WAKES_MAX; i++) {
        k[i] = (char)('0' + i);
        assert_true(thread_wake_defer(turn_a, &k[i]));
    }
    assert_false(thread_wake_defer(turn_a, &k[THREAD_WAKES_MAX]));
    thread_wakes_release();
    assert_int_equal(tl.n, THREAD_WAKES_MAX);
    assert_memory_equal(tl.s, "01234567", THREAD_WAKES_MAX);
    /* a second burst starts empty */
    memset(&tl, 0, sizeof tl);
    thread_wakes_hold();
    assert_true(thread_wake_defer(turn_a, (void *)&b));
    thread_wakes_release();
    assert_string_equal(tl.s, "b");
}

static void test_tls_alert(void **state)
{
    (void)state;
    char buf[64];
    assert_string_equal(tls_alert_text(42, buf, sizeof buf),
                        "bad certificate");
    assert_string_equal(tls_alert_text(48, buf, sizeof buf),
                        "unknown certificate authority");
    assert_string_equal(tls_alert_text(200, buf, sizeof buf), "alert(200)");
    assert_int_equal(tls_alert_from_openssl(
                         "error:0A000412:SSL routines::sslv3 alert bad "
                         "certificate"),
                     42);
    assert_int_equal(tls_alert_from_openssl("error:0A000418:SSL routines::"
                                            "tlsv1 alert unknown ca"),
                     48);
    assert_int_equal(tls_alert_from_openssl("sslv3 alert handshake failure"),
                     40);
    assert_int_equal(tls_alert_from_openssl("Corruption detected."), -1);
    assert_int_equal(tls_alert_from_openssl("tlsv1 alert bogus"), -1);
    assert_int_equal(tls_alert_from_openssl(NULL), -1);
}

/* A certificate with subject CN cn and subjectAltName san (OpenSSL's
 * config syntax, NULL for none); unsigned (the host check reads names
 * only). */
static X509 *cert_with(const char *cn, const char *san)
{
    X509 *x = X509_new();
    assert_non_null(x);
    X509_NAME *name = X509_get_subject_name(x);
    assert_int_equal(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                                (const unsigned char *)cn,
                                                -1, -1, 0),
                     1);
    if (san != NULL) {
        X509_EXTENSION *ext =
            X509V3_EXT_conf_nid(NULL, NULL, NID_subject_alt_name, san);
        assert_non_null(ext);
        assert_int_equal(X509_add_ext(x, ext, -1), 1);
        X509_EXTENSION_free(ext);
    }
    return x;
}

/* Go's VerifyHostname rules: IPs against IP SANs only, names against
 * DNS SANs only, a wildcard as a whole leftmost label, never the CN. */
static void test_x509_valid_for_host(void **state)
{
    (void)state;
    X509 *x = cert_with("www.example.com",
                        "DNS:*.example.com,DNS:f*.test.org,IP:127.0.0.1,"
                        "IP:::1,DNS:10.0.0.1");
    assert_true(x509_valid_for_host(x, "a.example.com"));
    assert_true(x509_valid_for_host(x, "A.Example.COM"));
    assert_false(x509_valid_for_host(x, "b.a.example.com"));
    assert_false(x509_valid_for_host(x, "example.com"));
    assert_false(x509_valid_for_host(x, "foo.test.org")); /* partial */
    assert_true(x509_valid_for_host(x, "127.0.0.1"));
    assert_false(x509_valid_for_host(x, "127.0.0.2"));
    assert_true(x509_valid_for_host(x, "::1"));
    /* an IP literal is never matched against a DNS SAN */
    assert_false(x509_valid_for_host(x, "10.0.0.1"));
    assert_false(x509_valid_for_host(x, NULL));
    X509_free(x);
    /* no SANs: the CN is not a fallback (OpenSSL's default would be) */
    x = cert_with("cn-only.example.com", NULL);
    assert_false(x509_valid_for_host(x, "cn-only.example.com"));
    X509_free(x);
    x = cert_with("cn.example.com", "IP:192.0.2.1");
    assert_false(x509_valid_for_host(x, "cn.example.com"));
    assert_true(x509_valid_for_host(x, "192.0.2.1"));
    X509_free(x);
    assert_false(x509_valid_for_host(NULL, "a.example.com"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c_vectors),
        cmocka_unit_test(test_crc32c_extend_split),
        cmocka_unit_test(test_err_table),
        cmocka_unit_test(test_mem_fault),
        cmocka_unit_test(test_mem_rss_shared),
        cmocka_unit_test(test_str_trim),
        cmocka_unit_test(test_str_go_duration),
        cmocka_unit_test(test_fs_all),
        cmocka_unit_test(test_tls_alert),
        cmocka_unit_test(test_x509_valid_for_host),
        cmocka_unit_test(test_thread_turns),
        cmocka_unit_test(test_thread_wakes_held),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
