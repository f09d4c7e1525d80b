/* err.c - messages and names of the error table in err.h. */
#include "util/err.h"

#include <errno.h>

const char *err_str(int code)
{
    switch (code) {
    case 0:
        return "success";
#define ERR_CASE(name, c, msg)                                               \
    case c:                                                                  \
        return msg;
        ERR_MAP(ERR_CASE)
#undef ERR_CASE
    }
    return "unknown error";
}

const char *err_name(int code)
{
    switch (code) {
    case 0:
        return "OK";
#define ERR_CASE(name, c, msg)                                               \
    case c:                                                                  \
        return "ERR_" #name;
        ERR_MAP(ERR_CASE)
#undef ERR_CASE
    }
    return "ERR_UNKNOWN";
}

int err_from_errno(int errnum)
{
    switch (errnum) {
    case 0:
        return 0;
    case ENOMEM:
        return ERR_NOMEM;
    case ENOSPC:
    case EDQUOT:
        return ERR_NOSPC;
    case ENOENT:
        return ERR_NOTFOUND;
    case EEXIST:
        return ERR_EXIST;
    case EINVAL:
        return ERR_INVAL;
    case EBUSY:
    case EAGAIN:
        return ERR_BUSY;
    case ETIMEDOUT:
        return ERR_TIMEOUT;
    default:
        return ERR_IO;
    }
}
