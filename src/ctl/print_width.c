/*
 * print_width.c - Unicode text for the tables: upper case as Go maps it,
 * and the width of a string in terminal columns, as
 * olekukonko/tablewriter measures its cells: ANSI colour sequences
 * (ESC [ n;n.. m, | or K) removed, then go-runewidth's StringWidth, which
 * splits the text into grapheme clusters (uniseg) and counts each cluster
 * as the width of its first rune that has one (0, 1 or 2 columns).
 *
 * The rune widths and the runes that join a cluster after a base or before
 * one are exact (print_unicode.c).  The other cluster rules are followed
 * as Unicode's UAX #29 states them, with two approximations: Control is
 * C0, C1 and the common format characters, and Extended_Pictographic (for
 * emoji joined by ZWJ) is the emoji and symbol blocks.
 */
#include <assert.h>

#include "ctl/print.h"
#include "ctl/print_int.h"

/* What a cluster rule needs to know of the rune before. */
struct prev {
    uint32_t r;      /* the previous rune; 0 when at the start */
    bool start;      /* no previous rune */
    bool first_pict; /* the cluster began with a pictograph */
    unsigned ri;     /* regional indicators in a row so far */
};

static unsigned rune_width(uint32_t r)
{
    if (ctl__in(ctl__width0, ctl__width0_n, r))
        return 0;
    return ctl__in(ctl__width2, ctl__width2_n, r) ? 2 : 1;
}

static bool is_control(uint32_t r)
{
    static const struct ctl__range t[] = {
        {0x00, 0x1f},       {0x7f, 0x9f},       {0xad, 0xad},
        {0x200b, 0x200b},   {0x200e, 0x200f},   {0x2028, 0x202e},
        {0x2060, 0x206f},   {0xfeff, 0xfeff},   {0xfff0, 0xfffb},
        {0xe0000, 0xe001f}, {0xe0080, 0xe00ff},
    };
    return ctl__in(t, sizeof t / sizeof t[0], r);
}

static bool is_pict(uint32_t r)
{
    static const struct ctl__range t[] = {
        {0xa9, 0xa9},       {0xae, 0xae},       {0x203c, 0x203c},
        {0x2049, 0x2049},   {0x2122, 0x2122},   {0x2139, 0x2139},
        {0x2194, 0x2199},   {0x21a9, 0x21aa},   {0x231a, 0x231b},
        {0x2328, 0x2328},   {0x23cf, 0x23cf},   {0x23e9, 0x23f3},
        {0x23f8, 0x23fa},   {0x24c2, 0x24c2},   {0x25aa, 0x25ab},
        {0x25b6, 0x25b6},   {0x25c0, 0x25c0},   {0x25fb, 0x25fe},
        {0x2600, 0x27bf},   {0x2934, 0x2935},   {0x2b05, 0x2b55},
        {0x3030, 0x3030},   {0x303d, 0x303d},   {0x3297, 0x3297},
        {0x3299, 0x3299},   {0x1f000, 0x1f1e5}, {0x1f200, 0x1f3fa},
        {0x1f400, 0x1faff},
    };
    return ctl__in(t, sizeof t / sizeof t[0], r);
}

static bool is_ri(uint32_t r)
{
    return r >= 0x1f1e6 && r <= 0x1f1ff;
}

/* The Hangul syllable types: L, V, T, LV, LVT (0: none). */
enum { H_NONE, H_L, H_V, H_T, H_LV, H_LVT };

static int hangul(uint32_t r)
{
    if ((r >= 0x1100 && r <= 0x115f) || (r >= 0xa960 && r <= 0xa97c))
        return H_L;
    if ((r >= 0x1160 && r <= 0x11a7) || (r >= 0xd7b0 && r <= 0xd7c6))
        return H_V;
    if ((r >= 0x11a8 && r <= 0x11ff) || (r >= 0xd7cb && r <= 0xd7fb))
        return H_T;
    if (r >= 0xac00 && r <= 0xd7a3)
        return (r - 0xac00) % 28 == 0 ? H_LV : H_LVT;
    return H_NONE;
}

/* joins says whether r continues the cluster p's rune is in. */
static bool joins(const struct prev *p, uint32_t r)
{
    int a = hangul(p->r), b = hangul(r);
    if (p->start)
        return false;
    if (is_control(p->r) || is_control(r))
        return false;
    if (a == H_L && b != H_NONE && b != H_T)
        return true;
    if ((a == H_LV || a == H_V) && (b == H_V || b == H_T))
        return true;
    if ((a == H_LVT || a == H_T) && b == H_T)
        return true;
    if (r == 0x200d || ctl__in(ctl__extend, ctl__extend_n, r) ||
        rune_width(r) == 0)
        return true;
    if (ctl__in(ctl__prepend, ctl__prepend_n, p->r))
        return true;
    if (p->r == 0x200d && p->first_pict && is_pict(r))
        return true;
    return is_ri(p->r) && is_ri(r) && p->ri % 2 == 1;
}

/* ansi_len is the length of the colour sequence at s, or 0 if none. */
static size_t ansi_len(const char *s, size_t n)
{
    size_t i = 2;
    if (n < 3 || s[0] != '\033' || s[1] != '[')
        return 0;
    for (bool group = true; group && i < n;) {
        size_t d = 0;
        while (i + d < n && s[i + d] >= '0' && s[i + d] <= '9')
            d++;
        if (d > 3 || (d == 0 && i > 2))
            return 0;
        i += d;
        group = d > 0 && i + 1 < n && s[i] == ';';
        if (group)
            i++;
    }
    if (i < n && (s[i] == 'm' || s[i] == '|' || s[i] == 'K'))
        return i + 1;
    return 0;
}

size_t ctl_display_width(const char *s, size_t n)
{
    return ctl__text_width(s, n, true);
}

size_t ctl__text_width(const char *s, size_t n, bool ansi)
{
    struct prev p = {0, true, false, 0};
    size_t total = 0;
    unsigned cw = 0; /* the width of the cluster so far */
    assert(s != NULL || n == 0);
    for (size_t i = 0; i < n;) {
        size_t esc = ansi ? ansi_len(s + i, n - i) : 0;
        if (esc > 0) {
            i += esc;
            continue;
        }
        uint32_t r;
        i += ctl__utf8_decode((const unsigned char *)s + i, n - i, &r);
        if (!joins(&p, r)) {
            total += cw;
            cw = 0;
            p.first_pict = is_pict(r);
        }
        if (cw == 0)
            cw = rune_width(r);
        p.ri = is_ri(r) ? p.ri + 1 : 0;
        p.r = r;
        p.start = false;
    }
    return total + cw;
}

uint32_t ctl__to_upper(uint32_t r)
{
    size_t lo = 0, hi = ctl__upper_n;
    if (r < 0x80)
        return r >= 'a' && r <= 'z' ? r - 'a' + 'A' : r;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct ctl__case *c = &ctl__upper[mid];
        if (c->hi < r) {
            lo = mid + 1;
        } else if (c->lo > r) {
            hi = mid;
        } else {
            assert(c->stride == 1 || c->stride == 2);
            return (r - c->lo) % c->stride == 0
                       ? (uint32_t)((int32_t)r + c->delta)
                       : r;
        }
    }
    return r;
}

size_t ctl__utf8_put(char *o, uint32_t r)
{
    assert(r <= 0x10ffff);
    if (r < 0x80) {
        o[0] = (char)r;
        return 1;
    }
    if (r < 0x800) {
        o[0] = (char)(0xc0 | r >> 6);
        o[1] = (char)(0x80 | (r & 0x3f));
        return 2;
    }
    if (r < 0x10000) {
        o[0] = (char)(0xe0 | r >> 12);
        o[1] = (char)(0x80 | ((r >> 6) & 0x3f));
        o[2] = (char)(0x80 | (r & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | r >> 18);
    o[1] = (char)(0x80 | ((r >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((r >> 6) & 0x3f));
    o[3] = (char)(0x80 | (r & 0x3f));
    return 4;
}
