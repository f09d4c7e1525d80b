/*
 * ctl_txn.c - "txn": one transaction read from standard input, as
 * etcdctl 3.4.23's txn command reads it.
 *
 * The input is three blocks, each ended by an empty line: compares
 * ("val(\"k\") = \"v\"", "ver(...)", "c(...)", "m(...)", "lease(...)"),
 * then the success requests and the failure requests, each a get, put or
 * del command line as the commands take it.  --interactive prints a
 * prompt before each block.  Input that ends before the third empty line
 * is "Error: EOF" (exit 3), as etcdctl's line reader reports it.
 *
 * Parsing follows etcdctl's pieces, rewritten from their behaviour:
 *   - a compare is target "(" then what Go's fmt.Sscanf(rest, "%q) %s %q")
 *     takes: a Go quoted string (double- or back-quoted), ")", spaces, a
 *     word, spaces, a quoted string; the error names how far it got;
 *   - a request line is split into words as etcdctl's argify regexp does
 *     ("double quoted" with Go escapes, 'single quoted', or a run of
 *     non-blanks), and the words run through a private cobra root holding
 *     copies of get/put/del (prefix matching on; flag errors print cobra's
 *     default usage of the copy on stderr).
 *
 * Where etcdctl has plain bugs, cetcdctl does better (each marked BUG
 * below): a 'single-quoted' word keeps its whole text (etcdctl slices it
 * by the number of words and may panic); an unknown compare operator is an
 * invalid compare (etcdctl panics); "lease(\"k\") = \"<hex id>\"" compares
 * the key's lease (etcdctl panics on every lease compare); a request with
 * -h/--help prints the copy's help and is then an invalid request, and the
 * help and completion words are invalid requests (etcdctl waits forever).
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/commands.h"
#include "ctl/ctl_int.h"
#include "ctl/ctl_kv.h"
#include "ctl/print.h"

static bool interactive;

static struct ctl_flag flags[] = {
    {"interactive", 'i', CTL_FLAG_BOOL, &interactive, "false",
     "Input transaction in interactive mode", false},
    CTL_FLAG_END,
};

/* A growing byte buffer (NUL-terminated). */
struct buf {
    char *p;    /* the bytes, or NULL while empty */
    size_t n;   /* used */
    size_t cap; /* allocated */
};

static void buf_put(struct buf *b, const void *p, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        if (!b->p)
            ctl_exit(CTL_EXIT_ERROR, "out of memory");
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void buf_byte(struct buf *b, char c) { buf_put(b, &c, 1); }

static void buf_str(struct buf *b, const char *s) { buf_put(b, s, strlen(s)); }

/* The line being parsed, for the error lines: its bytes may hold a NUL,
 * which etcdctl prints as it is. */
static struct ctl_kv_arg cur;

/* fail prints "Error: " pfx, the current line and sfx (which may hold
 * NULs: m bytes), and exits with etcdctl's code for bad txn input. */
static void fail(const char *pfx, const char *sfx, size_t m)
{
    fflush(stdout);
    fprintf(stderr, "Error: %s", pfx);
    fwrite(cur.p, 1, cur.n, stderr);
    fwrite(sfx, 1, m, stderr);
    fputc('\n', stderr);
    exit(CTL_EXIT_INVALID_INPUT);
}

/* ------------------------------------------------------------------------
 * UTF-8 and Go's notion of white space
 * ---------------------------------------------------------------------- */

#define RUNE_ERROR 0xfffdu
#define RUNE_EOF 0xffffffffu

/* utf8_decode decodes the rune at s (n > 0 bytes) as Go's
 * utf8.DecodeRune: bytes used, RUNE_ERROR and 1 for a bad sequence. */
static size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *r)
{
    static const unsigned char lo2[5] = {0xa0, 0x80, 0x80, 0x90, 0x80};
    static const unsigned char hi2[5] = {0xbf, 0xbf, 0x9f, 0xbf, 0x8f};
    assert(s != NULL && n > 0);
    unsigned char c = s[0];
    *r = RUNE_ERROR;
    if (c < 0x80) {
        *r = c;
        return 1;
    }
    size_t len = c >= 0xc2 && c <= 0xdf   ? 2
                 : c >= 0xe0 && c <= 0xef ? 3
                 : c >= 0xf0 && c <= 0xf4 ? 4
                                          : 0;
    if (len == 0 || n < len)
        return 1;
    /* the second byte's range depends on the first (no overlong forms,
     * surrogates or runes past U+10FFFF) */
    int k = c == 0xe0 ? 0 : c == 0xed ? 2 : c == 0xf0 ? 3 : c == 0xf4 ? 4 : 1;
    if (len == 2)
        k = 1;
    if (s[1] < lo2[k] || s[1] > hi2[k])
        return 1;
    for (size_t i = 2; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 1;
    uint32_t v = c & (len == 2 ? 0x1f : len == 3 ? 0x0f : 0x07);
    for (size_t i = 1; i < len; i++)
        v = v << 6 | (s[i] & 0x3f);
    *r = v;
    return len;
}

static void utf8_put(struct buf *b, uint32_t r)
{
    char e[4];
    if (r < 0x80) {
        buf_byte(b, (char)r);
    } else if (r < 0x800) {
        e[0] = (char)(0xc0 | r >> 6), e[1] = (char)(0x80 | (r & 0x3f));
        buf_put(b, e, 2);
    } else if (r < 0x10000) {
        e[0] = (char)(0xe0 | r >> 12);
        e[1] = (char)(0x80 | (r >> 6 & 0x3f));
        e[2] = (char)(0x80 | (r & 0x3f));
        buf_put(b, e, 3);
    } else {
        e[0] = (char)(0xf0 | r >> 18);
        e[1] = (char)(0x80 | (r >> 12 & 0x3f));
        e[2] = (char)(0x80 | (r >> 6 & 0x3f));
        e[3] = (char)(0x80 | (r & 0x3f));
        buf_put(b, e, 4);
    }
}

/* go_space: Go's unicode.IsSpace (fmt's scanner and strings.TrimSpace
 * agree on it). */
static bool go_space(uint32_t r)
{
    return (r >= 0x09 && r <= 0x0d) || r == 0x20 || r == 0x85 ||
           r == 0xa0 || r == 0x1680 || (r >= 0x2000 && r <= 0x200a) ||
           r == 0x2028 || r == 0x2029 || r == 0x202f || r == 0x205f ||
           r == 0x3000;
}

/* trim_space cuts Go's white space from both ends of s[0..*n); returns
 * the new start. */
static char *trim_space(char *s, size_t *n)
{
    uint32_t r;
    size_t w;
    while (*n > 0 && (w = utf8_decode((unsigned char *)s, *n, &r)) &&
           go_space(r))
        s += w, *n -= w;
    while (*n > 0) {
        size_t start = *n - 1, k = 0;
        while (start > 0 && k < 3 && ((unsigned char)s[start] & 0xc0) == 0x80)
            start--, k++;
        w = utf8_decode((unsigned char *)s + start, *n - start, &r);
        if (start + w != *n || !go_space(r))
            break;
        *n = start;
    }
    s[*n] = '\0';
    return s;
}

/* valid_utf8 copies s with each bad byte replaced by U+FFFD, as Go's fmt
 * scanner reads runes. */
static void valid_utf8(const char *s, size_t n, struct buf *out)
{
    for (size_t i = 0; i < n;) {
        uint32_t r;
        size_t w = utf8_decode((const unsigned char *)s + i, n - i, &r);
        if (r == RUNE_ERROR && w == 1)
            utf8_put(out, RUNE_ERROR);
        else
            buf_put(out, s + i, w);
        i += w;
    }
}

/* ------------------------------------------------------------------------
 * Go's strconv.Unquote of a double-quoted string (valid UTF-8 input)
 * ---------------------------------------------------------------------- */

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)(c | 0x20);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* unquote_escape decodes the escape at s[0] == '\\' into out; returns
 * the bytes used or 0 for a bad one (UnquoteChar's rules for '"'). */
static size_t unquote_escape(const char *s, size_t n, struct buf *out)
{
    static const char simple[] = "abfnrtv\\\"";
    static const char value[] = "\a\b\f\n\r\t\v\\\"";
    if (n < 2)
        return 0;
    const char *p = strchr(simple, s[1]);
    if (p && s[1] != '\0') {
        buf_byte(out, value[p - simple]);
        return 2;
    }
    size_t digits = s[1] == 'x' ? 2 : s[1] == 'u' ? 4 : s[1] == 'U' ? 8 : 0;
    uint32_t v = 0;
    if (digits) {
        for (size_t j = 0; j < digits; j++) {
            int h = 2 + j < n ? hexval(s[2 + j]) : -1;
            if (h < 0)
                return 0;
            v = v << 4 | (uint32_t)h;
        }
        if (s[1] == 'x') {
            buf_byte(out, (char)v);
        } else {
            if (v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
                return 0;
            utf8_put(out, v);
        }
        return 2 + digits;
    }
    if (s[1] < '0' || s[1] > '7' || n < 4)
        return 0;
    for (size_t j = 1; j < 4; j++) {
        if (s[j] < '0' || s[j] > '7')
            return 0;
        v = v << 3 | (uint32_t)(s[j] - '0');
    }
    if (v > 255)
        return 0;
    buf_byte(out, (char)v);
    return 4;
}

/* go_unquote decodes q[0..n), a whole "..." string; -1 when Go's
 * strconv.Unquote says "invalid syntax". */
static int go_unquote(const char *q, size_t n, struct buf *out)
{
    assert(q != NULL && out != NULL);
    if (n < 2 || q[0] != '"' || q[n - 1] != '"')
        return -1;
    buf_put(out, "", 0);
    for (size_t i = 1; i < n - 1;) {
        if (q[i] == '"' || q[i] == '\n')
            return -1;
        if (q[i] != '\\') {
            buf_byte(out, q[i++]);
            continue;
        }
        size_t used = unquote_escape(q + i, n - 1 - i, out);
        if (used == 0)
            return -1;
        i += used;
    }
    return 0;
}

/* ------------------------------------------------------------------------
 * Compares: fmt.Sscanf(rest, "%q) %s %q", &key, &op, &val)
 * ---------------------------------------------------------------------- */

/* The scanner over the rest of a compare line (valid UTF-8 by now). */
struct scan {
    const char *s; /* the text after the first '(' */
    size_t n;      /* its length */
    size_t i;      /* bytes read */
};

static uint32_t peek_rune(const struct scan *sc, size_t *w)
{
    if (sc->i >= sc->n) {
        *w = 0;
        return RUNE_EOF;
    }
    uint32_t r;
    *w = utf8_decode((const unsigned char *)sc->s + sc->i, sc->n - sc->i, &r);
    return r;
}

static uint32_t next_rune(struct scan *sc)
{
    size_t w;
    uint32_t r = peek_rune(sc, &w);
    sc->i += w;
    return r;
}

/* skip_space is fmt's SkipSpace (a newline cannot occur in a line). */
static void skip_space(struct scan *sc)
{
    size_t w;
    uint32_t r;
    while ((r = peek_rune(sc, &w)) != RUNE_EOF && go_space(r))
        sc->i += w;
}

/* scan_quoted is the %q verb: a back-quoted string as it is, or a
 * double-quoted one through strconv.Unquote. */
static bool scan_quoted(struct scan *sc, struct buf *out)
{
    skip_space(sc);
    size_t start = sc->i;
    uint32_t q = next_rune(sc);
    if (q != '"' && q != '`')
        return false;
    for (;;) {
        uint32_t r = next_rune(sc);
        if (r == RUNE_EOF)
            return false;
        if (r == q)
            break;
        if (q == '"' && r == '\\' && next_rune(sc) == RUNE_EOF)
            return false;
    }
    if (q == '`') {
        buf_put(out, sc->s + start + 1, sc->i - start - 2);
        return true;
    }
    /* Sscanf assigns nothing when the verb fails */
    struct buf v = {0};
    if (go_unquote(sc->s + start, sc->i - start, &v) != 0) {
        free(v.p);
        return false;
    }
    buf_put(out, v.p, v.n);
    free(v.p);
    return true;
}

/* scan_gap is a blank in the format: at least one space, or the end. */
static bool scan_gap(struct scan *sc)
{
    size_t w;
    uint32_t r = peek_rune(sc, &w);
    if (r != RUNE_EOF && !go_space(r))
        return false;
    skip_space(sc);
    return true;
}

/* scan_word is the %s verb: the next run of non-spaces. */
static bool scan_word(struct scan *sc, struct buf *out)
{
    skip_space(sc);
    size_t w, start = sc->i;
    uint32_t r;
    if (sc->i >= sc->n)
        return false;
    while ((r = peek_rune(sc, &w)) != RUNE_EOF && !go_space(r))
        sc->i += w;
    buf_put(out, sc->s + start, sc->i - start);
    return true;
}

/* scan_compare returns how many of key, op and val it read, as Sscanf's
 * count. */
static int scan_compare(struct scan *sc, struct buf *key, struct buf *op,
                        struct buf *val)
{
    assert(sc->i <= sc->n);
    if (!scan_quoted(sc, key))
        return 0;
    if (next_rune(sc) != ')' || !scan_gap(sc) || !scan_word(sc, op))
        return 1;
    if (!scan_gap(sc) || !scan_quoted(sc, val))
        return 2;
    return 3;
}

/* compare_result maps the operator; -1 for others. */
static int compare_result(const char *op)
{
    static const char *const ops[] = {"=", ">", "<", "!="};
    for (int i = 0; i < 4; i++)
        if (strcmp(op, ops[i]) == 0)
            return i; /* EQUAL, GREATER, LESS, NOT_EQUAL */
    return -1;
}

/* compare_target sets c's target and value from the target word. */
static void compare_target(const struct ctl_kv_arg *target, struct buf *val,
                           Etcdserverpb__Compare *c)
{
    static const struct {
        const char *a, *b;
        Etcdserverpb__Compare__CompareTarget t;
        Etcdserverpb__Compare__TargetUnionCase u;
    } t[] = {
        {"ver", "version", ETCDSERVERPB__COMPARE__COMPARE_TARGET__VERSION,
         ETCDSERVERPB__COMPARE__TARGET_UNION_VERSION},
        {"c", "create", ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE,
         ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION},
        {"m", "mod", ETCDSERVERPB__COMPARE__COMPARE_TARGET__MOD,
         ETCDSERVERPB__COMPARE__TARGET_UNION_MOD_REVISION},
        {"val", "value", ETCDSERVERPB__COMPARE__COMPARE_TARGET__VALUE,
         ETCDSERVERPB__COMPARE__TARGET_UNION_VALUE},
        {"lease", "lease", ETCDSERVERPB__COMPARE__COMPARE_TARGET__LEASE,
         ETCDSERVERPB__COMPARE__TARGET_UNION_LEASE},
    };
    size_t i = 0;
    while (i < 5 && (strlen(target->p) != target->n ||
                     (strcmp(target->p, t[i].a) && strcmp(target->p, t[i].b))))
        i++;
    if (i == 5) {
        struct buf m = {0};
        buf_str(&m, " (unknown target ");
        buf_put(&m, target->p, target->n);
        buf_str(&m, ")");
        fail("malformed comparison: ", m.p, m.n);
    }
    c->target = t[i].t;
    c->target_union_case = t[i].u;
    if (c->target == ETCDSERVERPB__COMPARE__COMPARE_TARGET__VALUE) {
        c->value = (ProtobufCBinaryData){val->n, (uint8_t *)val->p};
        return;
    }
    /* BUG: etcdctl hands the lease text to clientv3 as a string and
     * panics; cetcdctl reads it as put --lease does, in hex */
    int base = c->target == ETCDSERVERPB__COMPARE__COMPARE_TARGET__LEASE
                   ? 16
                   : 10;
    char err[512];
    if (ctl_kv_parse_int(val->p ? val->p : "", val->n, base, &c->version,
                         err, sizeof err))
        fail("invalid txn compare request: ", "", 0);
}

/* malformed prints etcdctl's error for a compare Sscanf did not read
 * whole: what it got so far. */
static void malformed(const struct ctl_kv_arg *target, const struct buf *key,
                      const struct buf *op, const struct buf *val)
{
    struct buf m = {0};
    char q[4096];
    buf_str(&m, "; got ");
    buf_put(&m, target->p, target->n);
    buf_str(&m, "(");
    buf_str(&m, ctl_kv_quote(key->p, key->n, q, sizeof q));
    buf_str(&m, ") ");
    buf_put(&m, op->p ? op->p : "", op->n);
    buf_str(&m, " ");
    buf_str(&m, ctl_kv_quote(val->p, val->n, q, sizeof q));
    fail("malformed comparison: ", m.p, m.n);
}

static Etcdserverpb__Compare *parse_compare(const char *line, size_t len)
{
    const char *paren = memchr(line, '(', len);
    if (!paren)
        fail("malformed comparison: ", "", 0);
    struct buf tbuf = {0}, rest = {0}, key = {0}, op = {0}, val = {0};
    buf_put(&tbuf, line, (size_t)(paren - line));
    struct ctl_kv_arg target = {tbuf.p, tbuf.n};
    valid_utf8(paren + 1, len - (size_t)(paren + 1 - line), &rest);
    struct scan sc = {rest.p ? rest.p : "", rest.n, 0};
    if (scan_compare(&sc, &key, &op, &val) != 3)
        malformed(&target, &key, &op, &val);
    Etcdserverpb__Compare *c = ctl_kv_keep(malloc(sizeof *c));
    *c = (Etcdserverpb__Compare)ETCDSERVERPB__COMPARE__INIT;
    c->key = (ProtobufCBinaryData){key.n, (uint8_t *)ctl_kv_keep(key.p)};
    ctl_kv_keep(val.p); /* the value compare points into it */
    compare_target(&target, &val, c);
    /* BUG: etcdctl panics on an operator clientv3 does not know */
    int result = strlen(op.p) == op.n ? compare_result(op.p) : -1;
    if (result < 0)
        fail("invalid txn compare request: ", "", 0);
    c->result = (Etcdserverpb__Compare__CompareResult)result;
    free(tbuf.p);
    free(rest.p);
    free(op.p);
    return c;
}

/* ------------------------------------------------------------------------
 * Requests: argify, then the private cobra root
 * ---------------------------------------------------------------------- */

/* The words of a request line; each owns a NUL-terminated copy. */
struct words {
    struct ctl_kv_arg *v; /* the words */
    int n;                /* how many */
};

static void words_add(struct words *w, const char *p, size_t n)
{
    struct ctl_kv_arg *v = realloc(w->v, (size_t)(w->n + 1) * sizeof *v);
    if (!v)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    char *c = ctl_kv_keep(malloc(n + 1)); /* requests point into words */
    memcpy(c, p, n);
    c[n] = '\0';
    v[w->n++] = (struct ctl_kv_arg){c, n};
    w->v = v;
}

/* re_space is \s of Go's regexp (RE2's Perl class): ASCII only. */
static bool re_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r';
}

/* dquoted_end: the end of a "..." word at s[i] (the regexp's
 * "(?:[^"\\]|\\.)*"), or 0 when it has no closing quote. */
static size_t dquoted_end(const char *s, size_t n, size_t i)
{
    for (i++; i < n; i++) {
        if (s[i] == '"')
            return i + 1;
        if (s[i] == '\\' && (i + 1 >= n || s[i + 1] == '\n'))
            return 0;
        if (s[i] == '\\')
            i++;
    }
    return 0;
}

/* dquoted_word decodes a "..." word as fmt.Sscanf's %q does. */
static void dquoted_word(const char *s, size_t n, struct words *w)
{
    struct buf v = {0}, out = {0};
    valid_utf8(s, n, &v);
    if (go_unquote(v.p, v.n, &out) != 0)
        ctl_exit(CTL_EXIT_INVALID_INPUT, "invalid syntax");
    words_add(w, out.p, out.n);
    free(v.p);
    free(out.p);
}

/* argify splits a line as etcdctl's regexp
 * "(?:[^"\\]|\\.)*"|'[^']*'|[^'"\s]\S*[^'"\s]? finds words, leftmost
 * first: a quoted string, or a run of non-blanks that does not start
 * with a quote.  A quote that is never closed starts no word. */
static struct words argify(const char *s, size_t n)
{
    struct words w = {0};
    assert(s != NULL);
    for (size_t i = 0; i < n;) {
        size_t end = 0;
        if (s[i] == '"' && (end = dquoted_end(s, n, i)) != 0) {
            dquoted_word(s + i, end - i, &w);
        } else if (s[i] == '\'' && memchr(s + i + 1, '\'', n - i - 1)) {
            const char *q = memchr(s + i + 1, '\'', n - i - 1);
            end = (size_t)(q - s) + 1;
            /* BUG: etcdctl cuts the word by the number of words */
            words_add(&w, s + i + 1, end - i - 2);
        } else if (s[i] != '"' && s[i] != '\'' && !re_space(s[i])) {
            for (end = i; end < n && !re_space(s[end]); end++)
                ;
            words_add(&w, s + i, end - i);
        }
        i = end > i ? end : i + 1;
    }
    assert(w.n >= 0);
    return w;
}

/* command_word finds the word cobra takes for the command (its
 * stripFlags, the root having no flags): the index, or -1. */
static int command_word(const struct words *w)
{
    for (int i = 0; i < w->n; i++) {
        const char *s = w->v[i].p;
        if (strcmp(s, "--") == 0)
            return -1;
        bool dashdash = strncmp(s, "--", 2) == 0 && !strchr(s, '=');
        bool dash = s[0] == '-' && !strchr(s, '=') && strlen(s) == 2;
        if (dashdash || dash) {
            if (w->n - i - 1 <= 1)
                return -1;
            i++;
            continue;
        }
        if (s[0] != '\0' && s[0] != '-')
            return i;
    }
    return -1;
}

/* find_kind: the command named word, or its unique prefix among the
 * root's commands (cobra adds help and completion); NULL if none or
 * one of those two. */
static const struct ctl_kv_kind *find_kind(const char *word)
{
    static const char *const names[] = {"put", "get", "del", "help",
                                        "completion"};
    static const struct ctl_kv_kind *const kinds[] = {
        &ctl_kv_put_kind, &ctl_kv_get_kind, &ctl_kv_del_kind, NULL, NULL};
    int match = -1, matches = 0;
    size_t wl = strlen(word);
    for (int i = 0; i < 5; i++) {
        if (strcmp(names[i], word) == 0)
            return kinds[i];
        if (strncmp(names[i], word, wl) == 0)
            match = i, matches++;
    }
    return matches == 1 ? kinds[match] : NULL;
}

static void invalid_request(void) { fail("invalid txn request: ", "", 0); }

/* positional maps the parser's positional pointers back to words (their
 * lengths: a word may hold a NUL). */
static struct ctl_kv_arg *positional(const struct words *w, char **pos,
                                     int npos)
{
    struct ctl_kv_arg *a = calloc((size_t)npos + 1, sizeof *a);
    if (!a)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    for (int j = 0; j < npos; j++) {
        a[j] = (struct ctl_kv_arg){pos[j], strlen(pos[j])};
        for (int i = 0; i < w->n; i++)
            if (w->v[i].p == pos[j])
                a[j] = w->v[i];
    }
    return a;
}

/* run_kind parses the words (the command word taken out) with the
 * command's flags and builds the operation, as the private copy runs. */
static void run_kind(const struct ctl_kv_kind *k, char **args, int n,
                     const struct words *w, Etcdserverpb__RequestOp *op)
{
    static bool help;
    struct ctl_flag help_flag[] = {
        {"help", 'h', CTL_FLAG_BOOL, &help, "false", "", false},
        CTL_FLAG_END,
    };
    struct ctl_flag *sets[2] = {k->flags, help_flag};
    ctl__flags_defaults(k->flags);
    ctl__flags_defaults(help_flag);
    char **pos = calloc((size_t)n + 1, sizeof *pos), err[512];
    int npos = 0;
    if (!pos)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    if (ctl__flags_parse(sets, 2, args, n, pos, &npos, err, sizeof err)) {
        fflush(stdout);
        fprintf(stderr, "%s\n", k->usage); /* cobra's c.Println(usage) */
        invalid_request();
    }
    if (help) { /* BUG: etcdctl prints this, then waits forever */
        printf("%s\n\n%s", k->help_head, k->usage);
        invalid_request();
    }
    struct ctl_kv_arg *a = positional(w, pos, npos);
    k->build(a, npos, op);
    free(a);
    free(pos);
}

static Etcdserverpb__RequestOp *parse_request(const char *line, size_t len)
{
    struct words w = argify(line, len);
    if (w.n < 2)
        fail("invalid txn compare request: ", "", 0);
    int c = command_word(&w);
    const struct ctl_kv_kind *k = c < 0 ? NULL : find_kind(w.v[c].p);
    if (!k) /* BUG for help and completion: see the top */
        invalid_request();
    /* cobra drops the first word equal to the command word, which may be
     * an earlier flag value */
    char **args = calloc((size_t)w.n, sizeof *args);
    int n = 0;
    bool dropped = false;
    if (!args)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    for (int i = 0; i < w.n; i++) {
        if (!dropped && strcmp(w.v[i].p, w.v[c].p) == 0 &&
            strlen(w.v[i].p) == w.v[i].n) {
            dropped = true;
            continue;
        }
        args[n++] = (char *)w.v[i].p;
    }
    Etcdserverpb__RequestOp *op = ctl_kv_keep(malloc(sizeof *op));
    *op = (Etcdserverpb__RequestOp)ETCDSERVERPB__REQUEST_OP__INIT;
    run_kind(k, args, n, &w, op);
    free(args);
    free(w.v);
    return op;
}

/* ------------------------------------------------------------------------
 * Reading the blocks
 * ---------------------------------------------------------------------- */

/* read_line returns the next line without its blanks, or NULL for the
 * empty line ending a block; at the end of the input (even after part of
 * a line) it exits as etcdctl's reader does. */
static char *line_buf;  /* read_line's buffer */
static size_t line_cap; /* its size */

static char *read_line(size_t *len_out)
{
    ssize_t n = getline(&line_buf, &line_cap, stdin);
    if (n <= 0 || line_buf[n - 1] != '\n')
        ctl_exit(CTL_EXIT_INVALID_INPUT, "EOF");
    size_t len = (size_t)n;
    char *s = trim_space(line_buf, &len);
    *len_out = len;
    return len ? s : NULL;
}

static void prompt(const char *s)
{
    if (interactive) {
        puts(s);
        fflush(stdout);
    }
}

static Etcdserverpb__Compare **read_compares(size_t *n_out)
{
    Etcdserverpb__Compare **v = NULL;
    size_t n = 0, len;
    char *line;
    while ((line = read_line(&len)) != NULL) {
        cur = (struct ctl_kv_arg){line, len};
        Etcdserverpb__Compare *c = parse_compare(line, len);
        v = realloc(v, (n + 1) * sizeof *v);
        if (!v)
            ctl_exit(CTL_EXIT_ERROR, "out of memory");
        v[n++] = c;
    }
    *n_out = n;
    return v ? ctl_kv_keep(v) : NULL;
}

static Etcdserverpb__RequestOp **read_ops(size_t *n_out)
{
    Etcdserverpb__RequestOp **v = NULL;
    size_t n = 0, len;
    char *line;
    while ((line = read_line(&len)) != NULL) {
        cur = (struct ctl_kv_arg){line, len};
        Etcdserverpb__RequestOp *op = parse_request(line, len);
        v = realloc(v, (n + 1) * sizeof *v);
        if (!v)
            ctl_exit(CTL_EXIT_ERROR, "out of memory");
        v[n++] = op;
    }
    *n_out = n;
    return v ? ctl_kv_keep(v) : NULL;
}

/* ------------------------------------------------------------------------
 * The command
 * ---------------------------------------------------------------------- */

static void simple(const Etcdserverpb__TxnResponse *r)
{
    puts(r->succeeded ? "SUCCESS" : "FAILURE");
    for (size_t i = 0; i < r->n_responses; i++) {
        const Etcdserverpb__ResponseOp *o = r->responses[i];
        putchar('\n');
        /* a nested txn cannot be asked for from etcdctl's grammar */
        switch (o->response_case) {
        case ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE:
            ctl_kv_range_simple(o->response_range, false);
            break;
        case ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_PUT:
            ctl_kv_put_simple(o->response_put);
            break;
        case ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_DELETE_RANGE:
            ctl_kv_del_simple(o->response_delete_range);
            break;
        default:
            break;
        }
    }
}

static void display(enum ctl_output out, const Etcdserverpb__TxnResponse *r)
{
    switch (out) {
    case CTL_OUT_SIMPLE:
        simple(r);
        break;
    case CTL_OUT_JSON:
        ctl_json_message(stdout, &r->base);
        break;
    case CTL_OUT_PROTOBUF:
        ctl_pb_message(stdout, &r->base);
        break;
    case CTL_OUT_FIELDS:
        ctl_fields_txn(stdout, r);
        break;
    case CTL_OUT_TABLE: /* etcdctl has committed the txn by now */
        ctl_exit(CTL_EXIT_BAD_FEATURE, "table not supported as output format");
    }
}

static int run(int argc, char **argv)
{
    (void)argv;
    if (argc != 0)
        ctl_exit(CTL_EXIT_BAD_ARGS, "txn command does not accept argument");
    enum ctl_output out = ctl_output_format();
    (void)ctl_client(); /* etcdctl makes (and authenticates) it first */
    Etcdserverpb__TxnRequest req = ETCDSERVERPB__TXN_REQUEST__INIT;
    prompt("compares:");
    req.compare = read_compares(&req.n_compare);
    prompt("success requests (get, put, del):");
    req.success = read_ops(&req.n_success);
    prompt("failure requests (get, put, del):");
    req.failure = read_ops(&req.n_failure);
    /* etcdctl gives the commit no deadline; cetcdctl's client keeps
     * --command-timeout (see the report) */
    Etcdserverpb__TxnResponse *resp = (Etcdserverpb__TxnResponse *)ctl_call(
        "/etcdserverpb.KV/Txn", &req.base,
        &etcdserverpb__txn_response__descriptor);
    display(out, resp);
    protobuf_c_message_free_unpacked(&resp->base, NULL);
    ctl_kv_release();
    free(line_buf);
    return CTL_EXIT_SUCCESS;
}

const struct ctl_cmd ctl_cmd_txn = {
    .use = "txn [options]",
    .short_desc = "Txn processes all the requests in one transaction",
    .flags = flags,
    .run = run,
};
