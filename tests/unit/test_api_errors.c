/*
 * test_api_errors.c - goal: the errors a member gives when its leader is
 * lost or changes reach clients with etcd 3.4's gRPC codes and texts
 * (rpctypes.ErrGRPCLeaderChanged, ErrGRPCTimeout,
 * ErrGRPCTimeoutDueToLeaderFail, ErrGRPCTimeoutDueToConnectionLost), which
 * clientv3 and etcdctl match on.  Method: api_error on each code.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "api/api.h"
#include "util/err.h"

static void expect(int err, grpc_status_code code, const char *text)
{
    const char *msg = NULL;
    assert_int_equal(api_error(err, &msg), code);
    assert_non_null(msg);
    assert_string_equal(msg, text);
}

static void test_leader_errors(void **state)
{
    (void)state;
    expect(ERR_LEADER_CHANGED, GRPC_STATUS_UNAVAILABLE,
           "etcdserver: leader changed");
    expect(ERR_TIMEOUT, GRPC_STATUS_UNAVAILABLE,
           "etcdserver: request timed out");
    expect(ERR_TIMEOUT_LEADER_FAIL, GRPC_STATUS_UNAVAILABLE,
           "etcdserver: request timed out, possibly due to previous leader "
           "failure");
    expect(ERR_TIMEOUT_CONN_LOST, GRPC_STATUS_UNAVAILABLE,
           "etcdserver: request timed out, possibly due to connection lost");
    expect(ERR_NO_LEADER, GRPC_STATUS_UNAVAILABLE, "etcdserver: no leader");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_leader_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
