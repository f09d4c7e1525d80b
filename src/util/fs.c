/* fs.c - file-system helpers (see fs.h). */
#include "util/fs.h"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>

#include "util/err.h"

int fs_mkdir_p(const char *path)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return ERR_INVAL;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0700) != 0 && errno != EEXIST)
            return err_from_errno(errno);
        *p = '/';
    }
    if (mkdir(buf, 0700) != 0 && errno != EEXIST)
        return err_from_errno(errno);
    return 0;
}
