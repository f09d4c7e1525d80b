/* str.c - see str.h. */
#include "util/str.h"

#include <assert.h>
#include <ctype.h>
#include <string.h>

void str_trim(const char **b, const char **e)
{
    assert(b != NULL && e != NULL && *b <= *e);
    while (*b < *e && isspace((unsigned char)**b))
        (*b)++;
    while (*e > *b && isspace((unsigned char)(*e)[-1]))
        (*e)--;
}

void str_trim_inplace(char *s)
{
    assert(s != NULL);
    const char *b = s, *e = s + strlen(s);
    str_trim(&b, &e);
    memmove(s, b, (size_t)(e - b));
    s[e - b] = '\0';
}
