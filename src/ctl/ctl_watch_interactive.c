/*
 * ctl_watch_interactive.c - "watch -i" as etcdctl 3.4.23 runs it: lines
 * read from stdin, split as etcdctl's argify does (quotes, Go escapes),
 * each "watch ..." line adding a watcher on the one stream and each
 * "progress" line asking for a progress notification; the end of stdin
 * ends cetcdctl.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl/ctl_watch.h"

/* utf8_put writes code point r as UTF-8 (Go's utf8.EncodeRune). */
static size_t utf8_put(char *o, uint32_t r)
{
    if (r < 0x80) {
        o[0] = (char)r;
        return 1;
    }
    if (r < 0x800) {
        o[0] = (char)(0xc0 | r >> 6), o[1] = (char)(0x80 | (r & 0x3f));
        return 2;
    }
    if (r < 0x10000) {
        o[0] = (char)(0xe0 | r >> 12), o[1] = (char)(0x80 | (r >> 6 & 0x3f));
        o[2] = (char)(0x80 | (r & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | r >> 18), o[1] = (char)(0x80 | (r >> 12 & 0x3f));
    o[2] = (char)(0x80 | (r >> 6 & 0x3f)), o[3] = (char)(0x80 | (r & 0x3f));
    return 4;
}

/* escape decodes the escape after the backslash at s[*i] into o (Go's
 * strconv.UnquoteChar inside a double-quoted literal); the bytes
 * written, or -1 when it is not valid. */
static int escape(const char *s, size_t *i, char *o)
{
    static const char in[] = "abfnrtv\\\"", out[] = "\a\b\f\n\r\t\v\\\"";
    const char *e = s[*i] ? strchr(in, s[*i]) : NULL;
    size_t digits = s[*i] == 'x' ? 2 : s[*i] == 'u' ? 4 : s[*i] == 'U' ? 8 : 0;
    if (e) {
        *o = out[e - in];
        return 1;
    }
    if (digits && strspn(s + *i + 1, "0123456789abcdefABCDEF") >= digits) {
        char h[9] = {0};
        memcpy(h, s + *i + 1, digits);
        unsigned long v = strtoul(h, NULL, 16);
        *i += digits;
        if (digits == 2) {
            *o = (char)v;
            return 1;
        }
        if (v > 0x10ffff || (v >= 0xd800 && v < 0xe000))
            return -1;
        return (int)utf8_put(o, (uint32_t)v);
    }
    if (s[*i] >= '0' && s[*i] <= '3' && strspn(s + *i, "01234567") >= 3) {
        *o = (char)((s[*i] - '0') * 64 + (s[*i + 1] - '0') * 8 +
                    (s[*i + 2] - '0'));
        *i += 2;
        return 1;
    }
    return -1;
}

/* unquote_go decodes a double-quoted Go string literal (fmt's %q scan)
 * in place; false when it is not valid. */
static bool unquote_go(char *s)
{
    size_t n = strlen(s), o = 0;
    for (size_t i = 1; i + 1 < n; i++) {
        if (s[i] != '\\') {
            s[o++] = s[i];
            continue;
        }
        i++;
        int k = escape(s, &i, s + o);
        if (k < 0 || i + 1 >= n)
            return false;
        o += (size_t)k;
    }
    s[o] = '\0';
    return true;
}

/* Go's regexp \s: no \v. */
static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r';
}

/* token_end: the end of the token at s (etcdctl's argify regexp
 * "(?:[^"\\]|\\.)*"|'[^']*'|[^'"\s]\S*[^'"\s]?), or NULL when no token
 * starts at s. */
static const char *token_end(const char *s)
{
    const char *p = s + 1;
    if (*s == '"') {
        while (*p && *p != '"')
            p += (*p == '\\' && p[1]) ? 2 : 1;
        return *p == '"' ? p + 1 : NULL;
    }
    if (*s == '\'') {
        p = strchr(p, '\'');
        return p ? p + 1 : NULL;
    }
    if (is_space(*s))
        return NULL;
    while (*p && !is_space(*p))
        p++;
    return p;
}

/* argify splits a line as etcdctl's argify does (its words point into
 * copies it owns).  etcdctl strips a single-quoted word with the count of
 * words instead of the word's length, which cuts it wrongly or panics;
 * the quotes are stripped here. */
static struct ctl_watch_args argify(const char *line)
{
    struct ctl_watch_args a = {0};
    const char *s = line;
    while (*s) {
        const char *e = token_end(s);
        if (!e) {
            s++;
            continue;
        }
        char *w = strndup(s, (size_t)(e - s));
        if (!w)
            ctl_exit(CTL_EXIT_ERROR, "out of memory");
        if (w[0] == '\'') {
            memmove(w, w + 1, strlen(w) - 2);
            w[strlen(w) - 2] = '\0';
        } else if (w[0] == '"' && !unquote_go(w)) {
            ctl_exit(CTL_EXIT_INVALID_INPUT, "invalid syntax");
        }
        ctl_watch__args_push(&a, w);
        s = e;
    }
    return a;
}

/* watch_line runs a "watch ..." line (its words a). */
static void watch_line(struct ctl_wengine *e, const char *line,
                       const struct ctl_watch_args *a, const char *env_key,
                       const char *env_range)
{
    if (a->n < 2 && !env_key[0]) {
        fprintf(stderr, "Invalid command %s (command type or key is not "
                        "provided)\n", line);
        return;
    }
    struct ctl_watch_req q = {0};
    struct ctl_watch_args words = {a->v + 1, a->n - 1};
    ctl_watch__parse_line(&q, &words, env_key, env_range);
    const char *err = ctl_watch__add_watch(e, &q);
    if (err)
        fprintf(stderr, "Invalid command %s (%s)\n", line, err);
    free(q.watch.v);
    free(q.exec.v);
}

/* do_line runs one line of input. */
static void do_line(struct ctl_wengine *e, char *line,
                    const char *env_key, const char *env_range)
{
    struct ctl_watch_args a = argify(line);
    if (a.n < 1)
        fprintf(stderr, "Invalid command: %s (watch and progress "
                        "supported)\n", line);
    else if (strcmp(a.v[0], "watch") == 0)
        watch_line(e, line, &a, env_key, env_range);
    else if (strcmp(a.v[0], "progress") == 0)
        ctl_wengine_progress(e);
    else
        fprintf(stderr, "Invalid command %s (only support watch)\n", line);
    for (int i = 0; i < a.n; i++)
        free(a.v[i]);
    free(a.v);
}

/* A line being read from stdin. */
struct line_buf {
    char *b;    /* bytes read and not yet used */
    size_t len; /* how many */
    size_t cap; /* allocated */
};

/* read_lines reads what stdin has and runs the complete lines; at the
 * end of input etcdctl's bufio ReadString fails with EOF (a last line
 * without a newline is dropped with it). */
static void read_lines(struct line_buf *lb, struct ctl_wengine *e,
                       const char *env_key, const char *env_range)
{
    if (lb->cap - lb->len < 4096) {
        lb->cap = lb->cap * 2 + 8192;
        if (!(lb->b = realloc(lb->b, lb->cap)))
            ctl_exit(CTL_EXIT_ERROR, "out of memory");
    }
    ssize_t k = read(STDIN_FILENO, lb->b + lb->len, lb->cap - lb->len - 1);
    if (k < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (k <= 0) {
        char why[256] = "EOF";
        if (k < 0) {
            char e2[200];
            ctl_watch__go_errno(e2, sizeof e2, errno);
            snprintf(why, sizeof why, "read /dev/stdin: %s", e2);
        }
        ctl_exit(CTL_EXIT_INVALID_INPUT, "Error reading watch request line: "
                                         "%s", why);
    }
    lb->len += (size_t)k;
    char *nl;
    while ((nl = memchr(lb->b, '\n', lb->len)) != NULL) {
        *nl = '\0';
        do_line(e, lb->b, env_key, env_range);
        size_t used = (size_t)(nl - lb->b) + 1;
        memmove(lb->b, nl + 1, lb->len - used);
        lb->len -= used;
    }
}

void ctl_watch__interactive(struct ctl_watch_run *run, const char *env_key,
                            const char *env_range)
{
    static struct ctl_wengine e;
    struct line_buf lb = {0};
    run->out = ctl_output_format();
    ctl_require_leader(); /* clientv3.WithRequireLeader, as etcdctl */
    e.client = ctl_client();
    e.fn = ctl_watch__on_watch;
    e.ctx = run;
    for (;;) {
        bool active = e.stream || e.n > 0;
        struct pollfd p = {STDIN_FILENO, POLLIN, 0};
        if (poll(&p, 1, active ? 0 : -1) > 0)
            read_lines(&lb, &e, env_key, env_range);
        if (e.stream || e.n > 0)
            ctl_wengine_step(&e, 20);
    }
}
