/*
 * notify.h - systemd's readiness notification (sd_notify "READY=1"), sent
 * as etcd 3.4 sends it (coreos/go-systemd daemon.SdNotify): once the
 * member has joined its cluster and its listeners accept, one datagram to
 * the AF_UNIX socket $NOTIFY_SOCKET names (a leading '@' is Linux's
 * abstract namespace).  Without NOTIFY_SOCKET nothing is sent: a unit of
 * Type=notify then waits for READY=1, any other runs as before.
 * Called from main()'s thread.
 */
#ifndef CETCD_CMD_NOTIFY_H
#define CETCD_CMD_NOTIFY_H

/* notify_ready sends READY=1 if NOTIFY_SOCKET is set.  Returns 0 (sent, or
 * nothing to send), or a negative ERR_* code: ERR_INVAL for a path too
 * long for sockaddr_un, else the socket's errno as err_from_errno maps it.
 * Like etcd, the caller logs a failure and keeps serving. */
int notify_ready(void);

#endif
