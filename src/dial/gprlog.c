/*
 * gprlog.c - the gRPC core's log lines go through cetcd's logger (see
 * dial.h dial_log_install).
 *
 * Why: the core reports a TLS handshake that the other end refused only
 * in its own log ("...SSL routines::sslv3 alert bad certificate"); the
 * call itself fails with "Endpoint read failed".  etcd logs the same event
 * as "remote error: tls: bad certificate", and operators and etcd's e2e
 * tests look for those words (TestEtcdPeerCNAuth), so such a line is also
 * said in Go's words.
 */
#include <grpc/support/log.h>

#include "dial/dial.h"
#include "util/log.h"
#include "util/tls_alert.h"

static void gpr_to_log(gpr_log_func_args *a)
{
    const char *msg = a->message != NULL ? a->message : "";
    int alert = tls_alert_from_openssl(msg);
    if (alert >= 0) {
        char text[64];
        log_warn("dial", "TLS handshake failed: remote error: "
                 "tls: %s", tls_alert_text(alert, text, sizeof text));
        return;
    }
    switch (a->severity) {
    case GPR_LOG_SEVERITY_ERROR:
        log_error("grpc", "%s:%d] %s", a->file, a->line, msg);
        break;
    case GPR_LOG_SEVERITY_INFO:
        log_info("grpc", "%s:%d] %s", a->file, a->line, msg);
        break;
    default:
        log_debug("grpc", "%s:%d] %s", a->file, a->line, msg);
        break;
    }
}

void dial_log_install(void)
{
    gpr_set_log_function(gpr_to_log);
}
