/*
 * tls_alert.h - the names Go's crypto/tls gives TLS alerts.
 *
 * etcd logs a handshake that the other end ended with an alert as
 * "remote error: tls: bad certificate" and the like; operators and etcd's
 * own e2e tests look for those words, so cetcd logs the same words for
 * the same alerts (OpenSSL names them "sslv3 alert bad certificate").
 * Pure and thread-safe.
 */
#ifndef CETCD_UTIL_TLS_ALERT_H
#define CETCD_UTIL_TLS_ALERT_H

#include <stddef.h>

/* tls_alert_text writes Go's text of alert description desc (RFC 8446
 * AlertDescription, 0..255) into buf (cap bytes): "bad certificate", or
 * "alert(N)" for one Go has no name for.  Returns buf. */
const char *tls_alert_text(int desc, char *buf, size_t cap);

/* tls_alert_from_openssl finds the alert in an OpenSSL error text
 * ("...sslv3 alert bad certificate", "...tlsv1 alert unknown ca"): its
 * description number, or -1 when the text names no known alert. */
int tls_alert_from_openssl(const char *text);

#endif
