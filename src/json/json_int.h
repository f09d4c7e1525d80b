/* json_int.h - what encode.c and decode.c share. */
#ifndef CETCD_JSON_JSON_INT_H
#define CETCD_JSON_JSON_INT_H

#include <stddef.h>
#include <stdint.h>

/* json__utf8_len: the length of the valid UTF-8 sequence at s (n > 0 bytes
 * left), its code point in *cp; 0 when it is not valid (Go's rules: no
 * overlong forms, no surrogates, at most U+10FFFF). */
size_t json__utf8_len(const unsigned char *s, size_t n, uint32_t *cp);

#endif
