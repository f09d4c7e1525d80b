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

/* str_go_duration writes ns as Go's time.Duration.String does ("0s",
 * "350ns", "1.5\u00b5s", "12.345ms", "2s", "1m30s", "1h0m0s") into buf
 * (cap bytes, NUL-terminated, cut if short); returns buf. */
char *str_go_duration(char *buf, size_t cap, unsigned long long ns);

#endif
