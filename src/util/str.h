/*
 * str.h - small string helpers shared by the daemon and the client.
 * Thread-safe (no shared state).
 */
#ifndef CETCD_UTIL_STR_H
#define CETCD_UTIL_STR_H

#include <stddef.h>

/* str_trim narrows the range [*b, *e) to drop the ASCII white space
 * (isspace in the C locale) at both of its ends. */
void str_trim(const char **b, const char **e);

/* str_trim_inplace drops the white space at both ends of the NUL-terminated
 * s, moving what is left to its start. */
void str_trim_inplace(char *s);

#endif
