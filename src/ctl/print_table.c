/*
 * print_table.c - etcdctl -w table: olekukonko/tablewriter as etcdctl sets
 * it up (NewWriter, SetHeader, Append, SetAlignment(ALIGN_RIGHT), Render),
 * written from what it renders:
 *
 *   +------+-------+      a border line: '-' over each column's width
 *   |  ID  | NAME  |      plus its two padding spaces, '+' between;
 *   +------+-------+      header cells upper-cased and centred (the odd
 *   |   1a | alpha |      space to the right), body cells right-aligned,
 *   |      |  beta |      a cell's extra lines below it.
 *   +------+-------+
 *
 * Each cell (header cells too) is measured before it is printed: its lines
 * (split at '\n') give a width, capped at CTL_TABLE_WRAP_WIDTH; the lines
 * are then joined with spaces into one paragraph ("reflow") and split at
 * every space into words, which are laid out at that width with minimal
 * raggedness (the sum over lines but the last of the square of the room
 * left; a word wider than the width widens it; words are measured with
 * their colour sequences, lines without).  The column is as wide as
 * its widest laid-out line.  A missing line of a shorter cell prints as
 * two spaces, right-aligned.  Header text is measured, then rewritten as
 * tablewriter's Title does (see title()).
 */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "ctl/print.h"
#include "ctl/print_int.h"
#include "util/err.h"
#include "util/mem.h"

/* A piece of a cell's text. */
struct span {
    size_t off; /* its first byte in the cell's text */
    size_t len; /* its bytes */
};

/* One cell, laid out. */
struct cell {
    char *text;         /* the paragraph: the lines joined by spaces */
    struct span *lines; /* the laid-out lines, into text */
    size_t nlines;      /* at least 1 */
    size_t width;       /* the widest line, or the capped width if wider */
};

/* The cost of a line wider than the width (tablewriter's penalty). */
#define OVERFLOW_COST 100000
#define NO_COST INT32_MAX

/* span_width measures a laid-out line; word_width a word, which
 * tablewriter's wrapping measures without removing colour sequences. */
static size_t span_width(const char *text, struct span s)
{
    return ctl_display_width(text + s.off, s.len);
}

static size_t word_width(const char *text, struct span s)
{
    return ctl__text_width(text + s.off, s.len, false);
}

/* layout breaks the n words of text into lines of at most lim columns
 * (lim grows to the widest word), filling c->lines.  The cost of breaking
 * before word j is found from the end back, the first cheapest j kept. */
static int layout(struct cell *c, const struct span *w, size_t n, size_t lim)
{
    size_t *pre = mem_calloc(n + 1, sizeof *pre);
    size_t *brk = mem_calloc(n, sizeof *brk);
    int64_t *cost = mem_calloc(n, sizeof *cost);
    c->lines = mem_calloc(n, sizeof *c->lines);
    if (pre == NULL || brk == NULL || cost == NULL || c->lines == NULL)
        goto err_free;
    for (size_t k = 0; k < n; k++) {
        size_t ww = word_width(c->text, w[k]);
        pre[k + 1] = pre[k] + ww;
        lim = ww > lim ? ww : lim;
    }
#define LEN(i, j) ((int64_t)(pre[(j) + 1] - pre[i] + ((j) - (i))))
    for (size_t i = n; i-- > 0;) {
        cost[i] = NO_COST;
        brk[i] = 0;
        if (LEN(i, n - 1) <= (int64_t)lim) {
            cost[i] = 0;
            brk[i] = n;
            continue;
        }
        for (size_t j = i + 1; j < n; j++) {
            int64_t d = (int64_t)lim - LEN(i, j - 1);
            int64_t over = LEN(i, j - 1) > (int64_t)lim ? OVERFLOW_COST : 0;
            if (d * d + cost[j] + over < cost[i]) {
                cost[i] = d * d + cost[j] + over;
                brk[i] = j;
            }
            if (over > 0 && d * d + over >= cost[i])
                break; /* every later break costs more still */
        }
        if (brk[i] == 0)
            brk[i] = i + 1; /* tablewriter would loop for ever here */
    }
#undef LEN
    for (size_t i = 0; i < n; i = brk[i]) {
        size_t last = brk[i] - 1;
        c->lines[c->nlines].off = w[i].off;
        c->lines[c->nlines].len = w[last].off + w[last].len - w[i].off;
        c->nlines++;
    }
    mem_free(pre);
    mem_free(brk);
    mem_free(cost);
    return 0;
err_free:
    mem_free(pre);
    mem_free(brk);
    mem_free(cost);
    mem_free(c->lines);
    c->lines = NULL;
    return ERR_NOMEM;
}

/* cell_parse measures and lays out the text s into c. */
static int cell_parse(struct cell *c, const char *s)
{
    size_t len = strlen(s), maxw = 0, nwords = 1;
    int rc;
    memset(c, 0, sizeof *c);
    for (size_t b = 0, e; b <= len; b = e + 1) {
        const char *nl = memchr(s + b, '\n', len - b);
        e = nl != NULL ? (size_t)(nl - s) : len;
        size_t w = ctl_display_width(s + b, e - b);
        maxw = w > maxw ? w : maxw;
    }
    if (maxw > CTL_TABLE_WRAP_WIDTH)
        maxw = CTL_TABLE_WRAP_WIDTH;
    c->text = mem_malloc(len + 1);
    if (c->text == NULL)
        return ERR_NOMEM;
    for (size_t i = 0; i <= len; i++) {
        c->text[i] = s[i] == '\n' ? ' ' : s[i];
        nwords += c->text[i] == ' ';
    }
    struct span *w = mem_calloc(nwords, sizeof *w);
    if (w == NULL)
        return ERR_NOMEM;
    for (size_t i = 0, k = 0, b = 0; i <= len; i++) {
        if (i == len || c->text[i] == ' ') {
            w[k].off = b;
            w[k++].len = i - b;
            b = i + 1;
        }
    }
    rc = layout(c, w, nwords, maxw);
    mem_free(w);
    c->width = maxw;
    for (size_t i = 0; rc == 0 && i < c->nlines; i++) {
        size_t lw = span_width(c->text, c->lines[i]);
        c->width = lw > c->width ? lw : c->width;
    }
    return rc;
}

static void cell_free(struct cell *c)
{
    mem_free(c->text);
    mem_free(c->lines);
}

static void repeat(FILE *f, char ch, size_t n)
{
    for (size_t i = 0; i < n; i++)
        fputc(ch, f);
}

static void border(FILE *f, const size_t *cs, size_t ncols)
{
    fputc('+', f);
    for (size_t c = 0; c < ncols; c++) {
        repeat(f, '-', cs[c] + 2);
        fputc('+', f);
    }
    fputc('\n', f);
}

static bool num_or_space(uint32_t r)
{
    return (r >= '0' && r <= '9') || r == ' ';
}

/* is_space is Go's unicode.IsSpace. */
static bool is_space(uint32_t r)
{
    return r == ' ' || (r >= '\t' && r <= '\r') || r == 0x85 || r == 0xa0 ||
           r == 0x1680 || (r >= 0x2000 && r <= 0x200a) || r == 0x2028 ||
           r == 0x2029 || r == 0x202f || r == 0x205f || r == 0x3000;
}

/* title writes the n bytes at s as tablewriter's Title makes them to out
 * (room for 3 * n + 1 bytes) and returns the bytes written.  rs has room
 * for n runes.  Title works on the runes (a byte of bad UTF-8 is U+FFFD):
 * '_' and a '.' with a neighbour that is neither digit nor space become
 * spaces, white space is trimmed (a line left blank keeps one space), and
 * the rest is upper-cased. */
static size_t title(const char *s, size_t n, uint32_t *rs, char *out)
{
    size_t nr = 0, b = 0, o = 0;
    for (size_t i = 0; i < n;)
        i += ctl__utf8_decode((const unsigned char *)s + i, n - i, &rs[nr++]);
    for (size_t i = 0; i < nr; i++) {
        if (rs[i] == '_')
            rs[i] = ' ';
        else if (rs[i] == '.' && ((i != 0 && !num_or_space(rs[i - 1])) ||
                                  (i + 1 != nr && !num_or_space(rs[i + 1]))))
            rs[i] = ' ';
    }
    while (b < nr && is_space(rs[b]))
        b++;
    while (nr > b && is_space(rs[nr - 1]))
        nr--;
    if (b == nr && n > 0)
        out[o++] = ' ';
    for (size_t i = b; i < nr; i++)
        o += ctl__utf8_put(out + o, ctl__to_upper(rs[i]));
    assert(o <= 3 * n + 1);
    return o;
}

/* cell_title replaces a header cell's lines by their Title. */
static int cell_title(struct cell *c)
{
    size_t cap = 1, maxlen = 1, at = 0;
    for (size_t i = 0; i < c->nlines; i++) {
        cap += 3 * c->lines[i].len + 1;
        maxlen = c->lines[i].len > maxlen ? c->lines[i].len : maxlen;
    }
    char *t = mem_malloc(cap);
    uint32_t *rs = mem_calloc(maxlen, sizeof *rs);
    if (t == NULL || rs == NULL) {
        mem_free(t);
        mem_free(rs);
        return ERR_NOMEM;
    }
    for (size_t i = 0; i < c->nlines; i++) {
        size_t len =
            title(c->text + c->lines[i].off, c->lines[i].len, rs, t + at);
        c->lines[i].off = at;
        c->lines[i].len = len;
        at += len;
    }
    assert(at < cap);
    mem_free(rs);
    mem_free(c->text);
    c->text = t;
    return 0;
}

static void header_line(FILE *f, const struct cell *h, const size_t *cs,
                        size_t ncols, size_t x)
{
    fputc('|', f);
    for (size_t c = 0; c < ncols; c++) {
        const char *s = "";
        size_t n = 0;
        if (x < h[c].nlines) {
            s = h[c].text + h[c].lines[x].off;
            n = h[c].lines[x].len;
        }
        size_t w = ctl_display_width(s, n);
        size_t gap = cs[c] > w ? cs[c] - w : 0;
        fputc(' ', f);
        repeat(f, ' ', gap / 2);
        fwrite(s, 1, n, f);
        repeat(f, ' ', gap - gap / 2);
        fputs(" |", f);
    }
    fputc('\n', f);
}

static void body_line(FILE *f, const struct cell *row, const size_t *cs,
                      size_t ncols, size_t x)
{
    for (size_t c = 0; c < ncols; c++) {
        const char *s = "  "; /* what tablewriter pads short cells with */
        size_t n = 2;
        if (x < row[c].nlines) {
            s = row[c].text + row[c].lines[x].off;
            n = row[c].lines[x].len;
        }
        size_t w = ctl_display_width(s, n);
        fputs("| ", f);
        repeat(f, ' ', cs[c] > w ? cs[c] - w : 0);
        fwrite(s, 1, n, f);
        fputc(' ', f);
    }
    fputs("|\n", f);
}

static size_t height(const struct cell *row, size_t ncols)
{
    size_t h = 0;
    for (size_t c = 0; c < ncols; c++)
        h = row[c].nlines > h ? row[c].nlines : h;
    return h;
}

static void render(FILE *f, struct cell *all, bool has_hdr, size_t ncols,
                   size_t nrows, const size_t *cs)
{
    struct cell *body = has_hdr ? all + ncols : all;
    border(f, cs, ncols);
    if (has_hdr) {
        for (size_t x = 0, h = height(all, ncols); x < h; x++)
            header_line(f, all, cs, ncols, x);
        border(f, cs, ncols);
    }
    for (size_t r = 0; r < nrows; r++) {
        const struct cell *row = body + r * ncols;
        for (size_t x = 0, h = height(row, ncols); x < h; x++)
            body_line(f, row, cs, ncols, x);
    }
    border(f, cs, ncols);
}

int ctl_table_print(FILE *f, const char *const *hdr, size_t ncols,
                    const char *const *cells, size_t nrows)
{
    size_t n = (nrows + (hdr != NULL)) * ncols, done = 0;
    int rc = ERR_NOMEM;
    assert(f != NULL);
    assert(cells != NULL || nrows == 0 || ncols == 0);
    struct cell *all = mem_calloc(n > 0 ? n : 1, sizeof *all);
    size_t *cs = mem_calloc(ncols > 0 ? ncols : 1, sizeof *cs);
    if (all == NULL || cs == NULL)
        goto err_free;
    for (; done < n; done++) {
        size_t k = hdr != NULL ? done : done + ncols; /* ncols: header */
        const char *s = k < ncols ? hdr[k] : cells[k - ncols];
        rc = cell_parse(&all[done], s != NULL ? s : "");
        if (rc == 0 && k < ncols)
            rc = cell_title(&all[done]); /* after measuring: Title is not */
        if (rc != 0) {
            done++; /* it holds what it got, to be freed */
            goto err_free;
        }
        size_t c = done % (ncols > 0 ? ncols : 1);
        cs[c] = all[done].width > cs[c] ? all[done].width : cs[c];
    }
    /* No columns: tablewriter skips the header and its line. */
    render(f, all, hdr != NULL && ncols > 0, ncols, nrows, cs);
    rc = ferror(f) ? ERR_IO : 0;
err_free:
    assert(rc == 0 || rc == ERR_NOMEM || rc == ERR_IO);
    for (size_t i = 0; i < done; i++)
        cell_free(&all[i]);
    mem_free(all);
    mem_free(cs);
    return rc;
}
