/*
 * notify.c - sd_notify READY=1 without libsystemd: the protocol is one
 * datagram of "KEY=value" lines on an AF_UNIX SOCK_DGRAM socket.
 */
#include "cmd/notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/err.h"

int notify_ready(void)
{
    static const char msg[] = "READY=1";
    const char *path = getenv("NOTIFY_SOCKET");
    if (path == NULL || path[0] == '\0')
        return 0;
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    size_t n = strlen(path);
    if (n >= sizeof sa.sun_path)
        return ERR_INVAL;
    memcpy(sa.sun_path, path, n);
    if (path[0] == '@')
        sa.sun_path[0] = '\0'; /* abstract socket */
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return err_from_errno(errno);
    ssize_t w = sendto(fd, msg, sizeof msg - 1, MSG_NOSIGNAL,
                       (struct sockaddr *)&sa, len);
    int rc = w == (ssize_t)(sizeof msg - 1) ? 0 : err_from_errno(errno);
    close(fd);
    return rc;
}
