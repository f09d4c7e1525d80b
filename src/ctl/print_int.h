/*
 * print_int.h - what the files of the printers share and nobody else uses.
 */
#ifndef CETCD_CTL_PRINT_INT_H
#define CETCD_CTL_PRINT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/* A range of code points, lo..hi inclusive; tables are sorted, disjoint. */
struct ctl__range {
    uint32_t lo; /* first code point */
    uint32_t hi; /* last code point */
};

/* A run of a case mapping: lo, lo + stride, ... up to hi map to
 * themselves plus delta. */
struct ctl__case {
    uint32_t lo;     /* first code point */
    uint32_t hi;     /* last code point */
    uint32_t stride; /* 1: all of them; 2: every other one */
    int32_t delta;   /* what the mapping adds */
};

/* The tables of print_unicode.c (see there for where they come from). */
extern const struct ctl__range ctl__printable[];
extern const size_t ctl__printable_n;
extern const struct ctl__range ctl__width0[];
extern const size_t ctl__width0_n;
extern const struct ctl__range ctl__width2[];
extern const size_t ctl__width2_n;
extern const struct ctl__range ctl__extend[];
extern const size_t ctl__extend_n;
extern const struct ctl__range ctl__prepend[];
extern const size_t ctl__prepend_n;
extern const struct ctl__case ctl__upper[];
extern const size_t ctl__upper_n;

/* ctl__to_upper maps r as Go's unicode.ToUpper does. */
uint32_t ctl__to_upper(uint32_t r);

/* ctl__utf8_put writes r as UTF-8 at o (room for 4 bytes) and returns
 * the bytes written. */
size_t ctl__utf8_put(char *o, uint32_t r);

/* ctl__in says whether r is in the table t of n ranges. */
bool ctl__in(const struct ctl__range *t, size_t n, uint32_t r);

/* U+FFFD, what an invalid byte decodes to. */
#define CTL__RUNE_ERROR 0xfffdu

/* ctl__utf8_decode decodes the rune at the start of s (n > 0 bytes) as
 * Go's utf8.DecodeRune does: it returns the bytes used and sets *r_out; an
 * invalid or short sequence, a surrogate or an overlong form gives
 * CTL__RUNE_ERROR and 1. */
size_t ctl__utf8_decode(const unsigned char *s, size_t n, uint32_t *r_out);

/* ctl__field_in_v34 says whether etcd 3.4's Go struct has field fd of
 * message d: cetcd's protos carry a few fields of later etcd versions that
 * etcdctl 3.4 drops when it decodes, so never prints. */
bool ctl__field_in_v34(const ProtobufCMessageDescriptor *d,
                       const ProtobufCFieldDescriptor *fd);

/* ctl__field_is_zero says whether a singular field holds proto3's default
 * (left out by Marshal, omitempty and the text format alike).  fd is not
 * repeated; p points at the field in the message. */
bool ctl__field_is_zero(const ProtobufCFieldDescriptor *fd, const void *p);

/* ctl__field_present says whether a singular field that is not in a oneof
 * is written: a proto3 field when not zero, a proto2 optional one when
 * set, a required one always. */
bool ctl__field_present(const ProtobufCMessage *m,
                        const ProtobufCFieldDescriptor *fd);

/* ctl__oneof_first says whether fd is the first member (by number) of its
 * oneof in d, i.e. where Go's struct has the oneof's interface field. */
bool ctl__oneof_first(const ProtobufCMessageDescriptor *d,
                      const ProtobufCFieldDescriptor *fd);

/* ctl__oneof_set returns the member of the oneof fd belongs to that m has
 * set, or NULL. */
const ProtobufCFieldDescriptor *
ctl__oneof_set(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *fd);

/* ctl__text_width is ctl_display_width, with the colour sequences counted
 * as text unless ansi (tablewriter lays words out that way). */
size_t ctl__text_width(const char *s, size_t n, bool ansi);

/* ctl__elem_size is the bytes one element of a repeated field of type t
 * takes in protobuf-c's array. */
size_t ctl__elem_size(ProtobufCType t);

/* ctl__field_ptr points at fd's storage in m. */
static inline const void *ctl__field_ptr(const ProtobufCMessage *m,
                                         const ProtobufCFieldDescriptor *fd)
{
    return (const char *)m + fd->offset;
}

#endif
