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

#include <cmocka.h>

#include "util/crc32c.h"
#include "util/err.h"
#include "util/mem.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c_vectors),
        cmocka_unit_test(test_crc32c_extend_split),
        cmocka_unit_test(test_err_table),
        cmocka_unit_test(test_mem_fault),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
