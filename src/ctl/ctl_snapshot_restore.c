/*
 * ctl_snapshot_restore.c - "snapshot restore": etcdctl's snapshot restore
 * (clientv3/snapshot's Restore), which makes a new member's data dir from
 * a snapshot file; see the RESTORE section below.  The snapshot group
 * (ctl_snapshot.c) lists it as ctl_snapshot_restore_cmd (ctl_snapshot.h).
 */
#define _GNU_SOURCE /* memrchr, asprintf, nftw */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "bbolt/bbolt.h"
#include "ctl/commands.h"
#include "ctl/ctl_snapshot.h"
#include "ctl/print.h"
#include "util/crc32c.h"
#include "util/err.h"

/* ------------------------------------------------------------------------
 * RESTORE
 *
 * etcd's Restore makes a new data dir from the snapshot, byte for byte as
 * etcd 3.4 would have it at the first start of a new cluster:
 *   member/snap/db     the snapshot without its SHA-256 trailer (checked
 *                      unless --skip-hash-check), rewritten with the
 *                      project's bbolt writer: every bucket and entry
 *                      kept, the key, lease and meta buckets made if
 *                      missing, meta/consistent_index set to the number
 *                      of members (what etcd's mvcc store writes when
 *                      restore opens it; etcd 3.4 also means to drop the
 *                      old members but its loop deletes mvcc keys
 *                      instead, so they stay, here too).  The file's page
 *                      layout is the writer's, not bbolt's: the same
 *                      buckets and entries in other pages.
 *   member/snap/<term>-<index>.snap  (0000000000000001-%016x) a raft
 *                      snapshot at index N (members), term 1, whose data
 *                      is the v2 store etcd builds: the members' raft
 *                      attributes under /0/members, as Go's encoding/json
 *                      writes etcd's store.
 *   member/wal/0000000000000000-0000000000000000.wal  64 000 000 bytes,
 *                      preallocated: a crc record, the metadata (node and
 *                      cluster id), an empty snapshot record, one
 *                      ConfChange AddNode entry per member, the hard state
 *                      (term 1, vote the first member, commit N) and the
 *                      snapshot record at index N.
 * Member ids are etcd's: the first 8 bytes of SHA-1 of the member's
 * sorted peer URLs and the cluster token; the cluster id the first 8
 * bytes of SHA-1 of the sorted member ids.  The texts of etcd's checks
 * (URLs, the local member, existing dirs, the hash) are etcd's.
 * Doing better than etcdctl: a restore that fails half way removes the
 * directories it made (etcdctl leaves them, and the next try then fails
 * with "data-dir exists").
 * ---------------------------------------------------------------------- */

static const char *restore_data_dir;
static const char *restore_wal_dir;
static const char *restore_cluster;
static const char *restore_token;
static const char *restore_peer_urls;
static const char *restore_name;
static bool skip_hash_check;

#define MEMBERS_MAX 1000 /* etcd's v2 event history holds 1000 */
#define URLS_MAX 64       /* peer URLs of one member */

/* URLs as types.URLs keeps them: their String() forms. */
struct url_list {
    char *v[URLS_MAX]; /* sorted after parse */
    size_t n;
};

struct member {
    char *name;            /* --initial-cluster name */
    struct url_list urls;  /* its peer URLs, sorted */
    uint64_t id;           /* etcd's member id */
};

/* The cluster being made. */
struct restore {
    struct member m[MEMBERS_MAX]; /* sorted by id once made */
    size_t n;
    uint64_t cluster_id;
    const char *src;                      /* the snapshot file */
    char *data_dir, *wal_dir, *snap_dir; /* as etcdctl logs them */
    bool made_data, made_wal;             /* for the clean-up */
};

static struct restore rs;

static int rm_entry(const char *p, const struct stat *s, int flag,
                    struct FTW *ftw)
{
    (void)s, (void)flag, (void)ftw;
    (void)remove(p); /* best effort: the error line says what failed */
    return 0;
}

/* restore_fail removes what this restore made and exits with etcdctl's
 * error line. */
__attribute__((noreturn, format(printf, 1, 2))) static void
restore_fail(const char *fmt, ...)
{
    if (rs.made_wal)
        nftw(rs.wal_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    if (rs.made_data)
        nftw(rs.data_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    fputs("Error: ", stderr);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(CTL_EXIT_ERROR);
}

/* ---- Go's path/filepath.Clean and Join ---- */

static char *go_clean(const char *path)
{
    size_t n = strlen(path), w = 0, r = 0, dotdot = 0;
    char *out = calloc(1, n + 2);
    if (!out)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    bool rooted = n > 0 && path[0] == '/';
    if (rooted) {
        out[w++] = '/';
        r = dotdot = 1;
    }
    while (r < n) {
        bool end1 = r + 1 == n || path[r + 1] == '/';
        if (path[r] == '/') {
            r++;
        } else if (path[r] == '.' && end1) {
            r++;
        } else if (path[r] == '.' && path[r + 1] == '.' &&
                   (r + 2 == n || path[r + 2] == '/')) {
            r += 2;
            if (w > dotdot) {
                w--;
                while (w > dotdot && out[w] != '/')
                    w--;
            } else if (!rooted) {
                if (w > 0)
                    out[w++] = '/';
                out[w++] = '.';
                out[w++] = '.';
                dotdot = w;
            }
        } else {
            if ((rooted && w != 1) || (!rooted && w != 0))
                out[w++] = '/';
            for (; r < n && path[r] != '/'; r++)
                out[w++] = path[r];
        }
    }
    if (w == 0)
        out[w++] = '.';
    out[w] = '\0';
    return out;
}

static char *go_join3(const char *a, const char *b, const char *c)
{
    size_t n = strlen(a) + strlen(b) + strlen(c) + 3;
    char *j = malloc(n);
    if (!j)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    snprintf(j, n, "%s/%s/%s", a, b, c);
    char *cl = go_clean(j);
    free(j);
    return cl;
}

/* go_quoted returns Go's %q of s (malloc'd). */
static char *go_quoted(const char *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    ctl_quote(f, s, strlen(s));
    fclose(f);
    return buf;
}

/* ---- peer URLs: types.NewURLs ---- */

/* url_check parses in as Go's url.Parse and etcd's NewURLs check it;
 * returns the URL's String() form (malloc'd) or exits with etcd's text. */
static char *url_check(const char *raw)
{
    while (*raw == ' ' || *raw == '\t' || *raw == '\n' || *raw == '\r' ||
           *raw == '\v' || *raw == '\f')
        raw++;
    size_t n = strlen(raw);
    while (n && strchr(" \t\n\r\v\f", raw[n - 1]))
        n--;
    char *in = strndup(raw, n);
    if (!in)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    size_t k = 0; /* the scheme: a letter, then letters, digits, + - . */
    if ((in[0] | 32) >= 'a' && (in[0] | 32) <= 'z')
        while (in[k] && (strchr("+-.", in[k]) ||
                         ((in[k] | 32) >= 'a' && (in[k] | 32) <= 'z') ||
                         (in[k] >= '0' && in[k] <= '9')))
            k++;
    if (in[k] != ':')
        k = 0;
    char scheme[16] = "";
    for (size_t i = 0; i < k && i < sizeof scheme - 1; i++)
        scheme[i] = (char)(in[i] | 32), scheme[i + 1] = '\0';
    bool known = !strcmp(scheme, "http") || !strcmp(scheme, "https") ||
                 !strcmp(scheme, "unix") || !strcmp(scheme, "unixs");
    if (k >= sizeof scheme || !known)
        restore_fail("URL scheme must be http, https, unix, or unixs: %s", in);
    const char *rest = in + k + 1, *host = "", *path = "";
    size_t hl = 0;
    if (strncmp(rest, "//", 2) == 0) {
        host = rest + 2;
        hl = strcspn(host, "/?#");
        path = host + hl;
        const char *at = memrchr(host, '@', hl);
        if (at)
            hl -= (size_t)(at + 1 - host), host = at + 1;
    } else {
        path = rest;
    }
    /* net.SplitHostPort: "host:port", "[v6]:port" */
    const char *colon = memrchr(host, ':', hl);
    bool ok = colon != NULL;
    if (ok && host[0] == '[')
        ok = colon > host && colon[-1] == ']' &&
             memchr(host, ']', hl) == colon - 1;
    else if (ok)
        ok = memchr(host, ':', (size_t)(colon - host)) == NULL &&
             memchr(host, '[', hl) == NULL && memchr(host, ']', hl) == NULL;
    if (!ok)
        restore_fail("URL address does not have the form \"host:port\": %s",
                     in);
    if (*path && *path != '?' && *path != '#')
        restore_fail("URL must not contain a path: %s", in);
    memcpy(in, scheme, k); /* String() writes the scheme in lower case */
    return in;
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* urls_parse splits csv at commas into l (sorted), as NewURLs does. */
static void urls_parse(const char *csv, struct url_list *l)
{
    const char *p = csv;
    for (;;) {
        size_t len = strcspn(p, ",");
        if (l->n == URLS_MAX)
            restore_fail("too many URLs (at most %d)", URLS_MAX);
        char *one = strndup(p, len);
        if (!one)
            ctl_exit(CTL_EXIT_ERROR, "out of memory");
        l->v[l->n++] = url_check(one);
        free(one);
        if (p[len] == '\0')
            break;
        p += len + 1;
    }
    qsort(l->v, l->n, sizeof l->v[0], str_cmp);
}

/* ---- the initial cluster: types.NewURLsMap, VerifyBootstrap ---- */

static struct member *member_find(const char *name)
{
    for (size_t i = 0; i < rs.n; i++)
        if (strcmp(rs.m[i].name, name) == 0)
            return &rs.m[i];
    return NULL;
}

/* cluster_parse reads --initial-cluster: name=url pairs at commas, a
 * name given twice gets every URL. */
static void cluster_parse(const char *s)
{
    static char *vals[MEMBERS_MAX][URLS_MAX];
    size_t nv[MEMBERS_MAX] = {0};
    for (const char *p = s; *p;) {
        size_t len = strcspn(p, ",");
        char *kv = strndup(p, len);
        if (!kv)
            ctl_exit(CTL_EXIT_ERROR, "out of memory");
        p += len + (p[len] == ',');
        if (!*kv) {
            free(kv);
            continue;
        }
        char *eq = strchr(kv, '='), *val = eq ? eq + 1 : "";
        if (eq)
            *eq = '\0';
        struct member *m = member_find(kv);
        if (!m && rs.n == MEMBERS_MAX)
            restore_fail("too many members (at most %d)", MEMBERS_MAX);
        if (!m) {
            m = &rs.m[rs.n++];
            m->name = kv;
        }
        size_t i = (size_t)(m - rs.m);
        if (nv[i] == URLS_MAX)
            restore_fail("too many URLs (at most %d)", URLS_MAX);
        vals[i][nv[i]++] = val;
    }
    for (size_t i = 0; i < rs.n; i++) {
        for (size_t k = 0; k < nv[i]; k++)
            urls_parse(vals[i][k], &rs.m[i].urls);
        qsort(rs.m[i].urls.v, rs.m[i].urls.n, sizeof(char *), str_cmp);
    }
}

/* urls_map_string writes types.URLsMap's String(): sorted name=url. */
static char *urls_map_string(const struct member *ms, size_t n)
{
    size_t total = 0, k = 0;
    for (size_t i = 0; i < n; i++)
        total += ms[i].urls.n;
    char **pairs = calloc(total + 1, sizeof *pairs);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!pairs || !f)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    for (size_t i = 0; i < n; i++)
        for (size_t u = 0; u < ms[i].urls.n; u++)
            if (asprintf(&pairs[k++], "%s=%s", ms[i].name,
                         ms[i].urls.v[u]) < 0)
                ctl_exit(CTL_EXIT_ERROR, "out of memory");
    qsort(pairs, total, sizeof *pairs, str_cmp);
    for (size_t i = 0; i < total; i++) {
        fprintf(f, "%s%s", i ? "," : "", pairs[i]);
        free(pairs[i]);
    }
    fclose(f);
    free(pairs);
    return buf;
}

/* resolved returns u (malloc'd) with its host resolved as etcd's
 * netutil.resolveURL does: names other than localhost become the first
 * address found (logged as etcd logs it); IPs, localhost and unix URLs
 * stay.  NULL with *why set when a name does not resolve. */
static char *resolved(const char *u, char **why)
{
    const char *h = strstr(u, "://");
    char *copy = strdup(u);
    if (!copy)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    if (!h || strncmp(u, "unix", 4) == 0)
        return copy;
    h += 3;
    size_t hl = strcspn(h, "/?#");
    const char *colon = memrchr(h, ':', hl);
    if (!colon || h[0] == '[')
        return copy;
    char host[256], port[16], addr[INET6_ADDRSTRLEN];
    snprintf(host, sizeof host, "%.*s", (int)(colon - h), h);
    snprintf(port, sizeof port, "%.*s", (int)(h + hl - colon - 1), colon + 1);
    if (strcmp(host, "localhost") == 0 || inet_pton(AF_INET, host, addr) == 1)
        return copy;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    if (getaddrinfo(host, NULL, &hints, &ai) != 0 || !ai) {
        if (asprintf(why, "failed to resolve \"%s\" (lookup %s: no such "
                          "host)", u, host) < 0)
            *why = NULL;
        free(copy);
        return NULL;
    }
    bool v6 = ai->ai_family == AF_INET6;
    inet_ntop(ai->ai_family,
              v6 ? (void *)&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr
                 : (void *)&((struct sockaddr_in *)ai->ai_addr)->sin_addr,
              addr, sizeof addr);
    freeaddrinfo(ai);
    char hostport[300], *out = NULL;
    snprintf(hostport, sizeof hostport, v6 ? "[%s]:%s" : "%s:%s", addr, port);
    ctl_snapshot_zap_begin("info", false, "netutil/netutil.go:112",
                           "resolved URL Host");
    ctl_snapshot_zap_field("url", u);
    snprintf(host, sizeof host, "%.*s", (int)hl, h);
    ctl_snapshot_zap_field("host", host);
    ctl_snapshot_zap_field("resolved-addr", hostport);
    ctl_snapshot_zap_end();
    if (asprintf(&out, "%.*s%s%s", (int)(h - u), u, hostport, h + hl) < 0)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    free(copy);
    return out;
}

/* quoted_list writes Go's %q of a []string. */
static void quoted_list(FILE *f, char *const *v, size_t n)
{
    fputc('[', f);
    for (size_t i = 0; i < n; i++) {
        if (i)
            fputc(' ', f);
        ctl_quote(f, v[i], strlen(v[i]));
    }
    fputc(']', f);
}

/* urls_equal is netutil.URLStringsEqual: true, or false with why
 * (malloc'd). */
static bool urls_equal(const struct url_list *a, const struct url_list *b,
                       char **why)
{
    size_t len = 0;
    bool eq = a->n == b->n;
    for (size_t i = 0; eq && i < a->n; i++)
        eq = strcmp(a->v[i], b->v[i]) == 0;
    if (eq)
        return true;
    FILE *f = open_memstream(why, &len);
    if (!f)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    if (a->n != b->n) {
        fputs("len(", f);
        quoted_list(f, a->v, a->n);
        fputs(") != len(", f);
        quoted_list(f, b->v, b->n);
        fputc(')', f);
        fclose(f);
        return false;
    }
    static struct url_list ra, rb;
    const struct url_list *in[2] = {a, b};
    struct url_list *out[2] = {&ra, &rb};
    for (int k = 0; k < 2; k++) {
        out[k]->n = in[k]->n;
        for (size_t i = 0; i < in[k]->n; i++) {
            char *err = NULL;
            out[k]->v[i] = resolved(in[k]->v[i], &err);
            if (!out[k]->v[i]) {
                fputs(err ? err : "failed to resolve", f);
                fclose(f);
                return false;
            }
        }
        qsort(out[k]->v, out[k]->n, sizeof(char *), str_cmp);
    }
    for (size_t i = 0; i < ra.n; i++) {
        if (strcmp(ra.v[i], rb.v[i]) == 0)
            continue;
        fputs("resolved urls: ", f);
        ctl_quote(f, ra.v[i], strlen(ra.v[i]));
        fputs(" != ", f);
        ctl_quote(f, rb.v[i], strlen(rb.v[i]));
        fclose(f);
        return false;
    }
    fclose(f);
    return true;
}

static bool list_has(const struct url_list *l, const char *u)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i], u) == 0)
            return true;
    return false;
}

/* advertise_check is etcd's advertiseMatchesCluster. */
static void advertise_check(const struct member *me,
                            const struct url_list *ap)
{
    char *why = NULL;
    if (urls_equal(ap, &me->urls, &why)) {
        free(why);
        return;
    }
    char *miss = NULL, *aps = NULL;
    size_t ml = 0, al = 0;
    FILE *mf = open_memstream(&miss, &ml), *af = open_memstream(&aps, &al);
    if (!mf || !af)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    size_t nm = 0;
    for (size_t i = 0; i < me->urls.n; i++)
        if (!list_has(ap, me->urls.v[i]))
            fprintf(mf, "%s%s=%s", nm++ ? "," : "", me->name,
                    me->urls.v[i]);
    for (size_t i = 0; i < ap->n; i++)
        fprintf(af, "%s%s", i ? "," : "", ap->v[i]);
    fflush(mf);
    fclose(af);
    if (nm > 0)
        restore_fail("--initial-cluster has %s but missing from "
                     "--initial-advertise-peer-urls=%s (%s)",
                     miss, aps, why);
    for (size_t i = 0; i < ap->n; i++)
        if (!list_has(&me->urls, ap->v[i]))
            fprintf(mf, "%s%s", nm++ ? "," : "", ap->v[i]);
    fclose(mf);
    struct member adv = {.name = me->name, .urls = *ap};
    char *map = urls_map_string(&adv, 1);
    if (nm > 0)
        restore_fail("--initial-advertise-peer-urls has %s but missing from "
                     "--initial-cluster=%s",
                     miss, map);
    restore_fail("failed to resolve %s to match --initial-cluster=%s (%s)",
                 aps, map, why);
}

/* verify_bootstrap is etcd's ServerConfig.VerifyBootstrap for restore. */
static void verify_bootstrap(const struct url_list *ap)
{
    const struct member *me = member_find(restore_name);
    if (!me) {
        char *q = go_quoted(restore_name);
        restore_fail("couldn't find local name %s in the initial cluster "
                     "configuration",
                     q);
    }
    advertise_check(me, ap);
    for (size_t i = 0; i < rs.n; i++)
        for (size_t u = 0; u < rs.m[i].urls.n; u++)
            for (size_t j = 0; j <= i; j++)
                for (size_t v = 0; v < (j == i ? u : rs.m[j].urls.n); v++)
                    if (strcmp(rs.m[i].urls.v[u], rs.m[j].urls.v[v]) == 0)
                        restore_fail("initial cluster %s has duplicate url",
                                     urls_map_string(rs.m, rs.n));
}

/* ---- member and cluster ids ---- */

static uint64_t sha1_prefix(const void *p, size_t n)
{
    uint8_t d[EVP_MAX_MD_SIZE];
    unsigned int dl = 0;
    if (!EVP_Digest(p, n, d, &dl, EVP_sha1(), NULL) || dl < 8)
        ctl_exit(CTL_EXIT_ERROR, "sha1 failed");
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | d[i];
    return v;
}

static int member_cmp(const void *a, const void *b)
{
    uint64_t x = ((const struct member *)a)->id;
    uint64_t y = ((const struct member *)b)->id;
    return x < y ? -1 : x > y;
}

/* members_make gives each member etcd's id and the cluster its id. */
static void members_make(void)
{
    for (size_t i = 0; i < rs.n; i++) {
        struct member *m = &rs.m[i];
        size_t len = strlen(restore_token) + 1;
        for (size_t u = 0; u < m->urls.n; u++)
            len += strlen(m->urls.v[u]);
        char *b = malloc(len);
        if (!b)
            ctl_exit(CTL_EXIT_ERROR, "out of memory");
        b[0] = '\0';
        for (size_t u = 0; u < m->urls.n; u++)
            strcat(b, m->urls.v[u]);
        strcat(b, restore_token);
        m->id = sha1_prefix(b, strlen(b));
        free(b);
        if (m->id == 0)
            restore_fail("cannot use 0 as member id");
    }
    qsort(rs.m, rs.n, sizeof rs.m[0], member_cmp);
    uint8_t *ids = calloc(rs.n, 8);
    if (!ids)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    for (size_t i = 0; i < rs.n; i++) {
        if (i > 0 && rs.m[i].id == rs.m[i - 1].id)
            restore_fail("member exists with identical ID %llx",
                         (unsigned long long)rs.m[i].id);
        for (int k = 0; k < 8; k++)
            ids[8 * i + (size_t)k] = (uint8_t)(rs.m[i].id >> (56 - 8 * k));
    }
    rs.cluster_id = sha1_prefix(ids, 8 * rs.n);
    free(ids);
}

/* ---- the v2 store etcd's restore saves (Go's encoding/json) ---- */

static FILE *mem_open(char **buf, size_t *len)
{
    FILE *f = open_memstream(buf, len);
    if (!f)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    return f;
}

static void json_urls(FILE *f, const struct url_list *l)
{
    fputc('[', f);
    for (size_t i = 0; i < l->n; i++) {
        if (i)
            fputc(',', f);
        ctl_json_string(f, l->v[i], strlen(l->v[i]));
    }
    fputc(']', f);
}

/* raft_attrs is json.Marshal(member.RaftAttributes). */
static char *raft_attrs(const struct member *m)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = mem_open(&buf, &len);
    fputs("{\"peerURLs\":", f);
    json_urls(f, &m->urls);
    fputc('}', f);
    fclose(f);
    return buf;
}

/* member_json is json.Marshal(member): the ConfChange's context. */
static char *member_json(const struct member *m, size_t *len)
{
    char *buf = NULL;
    FILE *f = mem_open(&buf, len);
    fprintf(f, "{\"id\":%llu,\"peerURLs\":", (unsigned long long)m->id);
    json_urls(f, &m->urls);
    if (m->name[0]) {
        fputs(",\"name\":", f);
        ctl_json_string(f, m->name, strlen(m->name));
    }
    fputc('}', f);
    fclose(f);
    return buf;
}

#define ZERO_TIME "\"ExpireTime\":\"0001-01-01T00:00:00Z\""

/* store_node writes one v2 node: a dir (children follow, then "}}")
 * when value is NULL, else a leaf. */
static void store_node(FILE *f, const char *path, size_t index,
                       const char *value)
{
    fprintf(f, "{\"Path\":\"%s\",\"CreatedIndex\":%zu,\"ModifiedIndex\":%zu,"
               ZERO_TIME ",\"Value\":",
            path, index, index);
    if (value == NULL) {
        fputs("\"\",\"Children\":{", f);
        return;
    }
    ctl_json_string(f, value, strlen(value));
    fputs(",\"Children\":null}", f);
}

static int hex_cmp(const void *a, const void *b)
{
    char x[CTL_ID_MAX], y[CTL_ID_MAX];
    ctl_id_hex(x, sizeof x, (*(const struct member *const *)a)->id);
    ctl_id_hex(y, sizeof y, (*(const struct member *const *)b)->id);
    return strcmp(x, y);
}

/* store_members writes /0/members: Go writes a map's keys sorted, so
 * the members by their hex ids as text; member k (by id) was created at
 * index k + 1. */
static void store_members(FILE *f)
{
    const struct member *by_hex[MEMBERS_MAX];
    for (size_t i = 0; i < rs.n; i++)
        by_hex[i] = &rs.m[i];
    qsort(by_hex, rs.n, sizeof by_hex[0], hex_cmp);
    store_node(f, "/0/members", 1, NULL);
    for (size_t i = 0; i < rs.n; i++) {
        char id[CTL_ID_MAX], path[64];
        ctl_id_hex(id, sizeof id, by_hex[i]->id);
        size_t index = (size_t)(by_hex[i] - rs.m) + 1;
        fprintf(f, "%s\"%s\":", i ? "," : "", id);
        snprintf(path, sizeof path, "/0/members/%s", id);
        store_node(f, path, index, NULL);
        fputs("\"raftAttributes\":", f);
        snprintf(path, sizeof path, "/0/members/%s/raftAttributes", id);
        char *attrs = raft_attrs(by_hex[i]);
        store_node(f, path, index, attrs);
        free(attrs);
        fputs("}}", f);
    }
    fputs("}}", f);
}

/* store_history writes the watcher hub: the create events, in a ring of
 * 1000. */
static void store_history(FILE *f)
{
    fputs("\"WatcherHub\":{\"EventHistory\":{\"Queue\":{\"Events\":[", f);
    for (size_t i = 0; i < 1000; i++) {
        if (i)
            fputc(',', f);
        if (i >= rs.n) {
            fputs("null", f);
            continue;
        }
        char id[CTL_ID_MAX];
        ctl_id_hex(id, sizeof id, rs.m[i].id);
        fprintf(f, "{\"action\":\"create\",\"node\":{\"key\":\"/0/members/"
                   "%s/raftAttributes\",\"value\":",
                id);
        char *attrs = raft_attrs(&rs.m[i]);
        ctl_json_string(f, attrs, strlen(attrs));
        free(attrs);
        fprintf(f, ",\"modifiedIndex\":%zu,\"createdIndex\":%zu}}", i + 1,
                i + 1);
    }
    fprintf(f, "],\"Size\":%zu,\"Front\":0,\"Back\":%zu,\"Capacity\":1000},"
               "\"StartIndex\":1,\"LastIndex\":%zu}},",
            rs.n, rs.n, rs.n);
}

/* store_json returns the v2 store's JSON (malloc'd, *len bytes). */
static char *store_json(size_t *len)
{
    char *buf = NULL;
    FILE *f = mem_open(&buf, len);
    fputs("{\"Root\":", f);
    store_node(f, "/", 0, NULL);
    fputs("\"0\":", f);
    store_node(f, "/0", 0, NULL);
    fputs("\"members\":", f);
    store_members(f);
    fputs("}},\"1\":", f);
    store_node(f, "/1", 0, NULL);
    fputs("}}}},", f);
    store_history(f);
    fprintf(f, "\"CurrentIndex\":%zu,\"Stats\":{\"getsSuccess\":0,"
               "\"getsFail\":0,\"setsSuccess\":0,\"setsFail\":0,"
               "\"deleteSuccess\":0,\"deleteFail\":0,\"updateSuccess\":0,"
               "\"updateFail\":0,\"createSuccess\":%zu,\"createFail\":0,"
               "\"compareAndSwapSuccess\":0,\"compareAndSwapFail\":0,"
               "\"compareAndDeleteSuccess\":0,\"compareAndDeleteFail\":0,"
               "\"expireCount\":0,\"watchers\":0},\"CurrentVersion\":2}",
            rs.n, rs.n);
    fclose(f);
    return buf;
}

/* ---- protobuf bytes (gogo's Marshal of etcd's proto2 structs: every
 * non-nullable field written, zeros too, in field order) ---- */

struct pbuf {
    uint8_t *p; /* bytes */
    size_t n;   /* used */
    size_t cap; /* allocated */
};

static void pb_raw(struct pbuf *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = (b->n + n) * 2 + 64;
        uint8_t *g = realloc(b->p, cap);
        if (!g)
            ctl_exit(CTL_EXIT_ERROR, "out of memory");
        b->p = g;
        b->cap = cap;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void pb_varint(struct pbuf *b, uint64_t v)
{
    uint8_t t[10];
    size_t n = 0;
    do {
        t[n++] = (uint8_t)((v & 0x7F) | (v > 0x7F ? 0x80 : 0));
        v >>= 7;
    } while (v);
    pb_raw(b, t, n);
}

/* pb_u64 writes field f as a varint; pb_bytes as length-delimited. */
static void pb_u64(struct pbuf *b, unsigned f, uint64_t v)
{
    pb_varint(b, f << 3);
    pb_varint(b, v);
}

static void pb_bytes(struct pbuf *b, unsigned f, const void *p, size_t n)
{
    pb_varint(b, f << 3 | 2);
    pb_varint(b, n);
    pb_raw(b, p, n);
}

/* ---- etcd's WAL (wal/encoder.go; etcdwal.h documents the format) ---- */

#define WAL_SEGMENT_BYTES 64000000 /* etcd's SegmentSizeBytes */

struct wal_enc {
    struct pbuf out; /* the file's bytes so far */
    uint32_t crc;    /* the chain over every record's data */
};

/* wal_record frames walpb.Record{type, crc, data}; the crc record
 * carries the chain without data. */
static void wal_record(struct wal_enc *w, int type, const struct pbuf *d)
{
    struct pbuf r = {0};
    if (d)
        w->crc = crc32c_extend(w->crc, d->p, d->n);
    pb_u64(&r, 1, (uint64_t)type);
    pb_u64(&r, 2, w->crc);
    if (d)
        pb_bytes(&r, 3, d->p, d->n);
    uint64_t pad = (8 - r.n % 8) % 8, field = r.n;
    if (pad)
        field |= (0x80 | pad) << 56;
    uint8_t le[8] = {0};
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)(field >> (8 * i));
    pb_raw(&w->out, le, 8);
    pb_raw(&w->out, r.p, r.n);
    pb_raw(&w->out, (uint8_t[8]){0}, pad);
    free(r.p);
}

static void wal_snapshot(struct wal_enc *w, uint64_t index, uint64_t term)
{
    struct pbuf d = {0};
    pb_u64(&d, 1, index);
    pb_u64(&d, 2, term);
    wal_record(w, 5, &d);
    free(d.p);
}

/* wal_entries adds one ConfChange AddNode entry per member (index k,
 * term 1) and the hard state that commits them. */
static void wal_entries(struct wal_enc *w)
{
    for (size_t i = 0; i < rs.n; i++) {
        struct pbuf cc = {0}, e = {0};
        size_t len = 0;
        char *ctx = member_json(&rs.m[i], &len);
        pb_u64(&cc, 1, 0);              /* ID */
        pb_u64(&cc, 2, 0);              /* ConfChangeAddNode */
        pb_u64(&cc, 3, rs.m[i].id);     /* NodeID */
        pb_bytes(&cc, 4, ctx, len);     /* Context */
        pb_u64(&e, 1, 1);               /* EntryConfChange */
        pb_u64(&e, 2, 1);               /* Term */
        pb_u64(&e, 3, i + 1);           /* Index */
        pb_bytes(&e, 4, cc.p, cc.n);    /* Data */
        wal_record(w, 2, &e);
        free(ctx), free(cc.p), free(e.p);
    }
    struct pbuf hs = {0};
    pb_u64(&hs, 1, 1);         /* Term */
    pb_u64(&hs, 2, rs.m[0].id); /* Vote */
    pb_u64(&hs, 3, rs.n);      /* Commit */
    wal_record(w, 3, &hs);
    free(hs.p);
}

/* write_file writes n bytes to a new file (mode before the umask),
 * fsynced; size_bytes > n preallocates the rest (zeros). */
static void write_file(const char *path, const void *p, size_t n,
                       mode_t mode, off_t size_bytes)
{
    char eb[128];
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0)
        restore_fail("open %s: %s", path,
                     ctl_snapshot_go_errno(errno, eb, sizeof eb));
    int e = ctl_snapshot_write_all(fd, p, n);
    if (e == 0 && size_bytes > (off_t)n &&
        posix_fallocate(fd, 0, size_bytes) != 0 &&
        ftruncate(fd, size_bytes) != 0)
        e = errno;
    if (e == 0 && fsync(fd) != 0)
        e = errno;
    close(fd);
    if (e != 0)
        restore_fail("write %s: %s", path,
                     ctl_snapshot_go_errno(e, eb, sizeof eb));
}

static void make_dirs(const char *path)
{
    char *p = strdup(path), eb[128];
    if (!p)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    for (char *s = p + 1;; s++) {
        char c = *s;
        if (c != '/' && c != '\0')
            continue;
        *s = '\0';
        if (mkdir(p, 0700) != 0 && errno != EEXIST)
            restore_fail("mkdir %s: %s", p,
                         ctl_snapshot_go_errno(errno, eb, sizeof eb));
        *s = c;
        if (c == '\0')
            break;
    }
    free(p);
}

/* save_wal writes the WAL as etcd's wal.Create and Save do: in
 * <wal>.tmp, renamed to <wal>. */
static void save_wal(void)
{
    struct wal_enc w = {0};
    struct pbuf md = {0};
    pb_u64(&md, 1, member_find(restore_name)->id); /* NodeID */
    pb_u64(&md, 2, rs.cluster_id);                 /* ClusterID */
    wal_record(&w, 4, NULL);
    wal_record(&w, 1, &md);
    wal_snapshot(&w, 0, 0);
    wal_entries(&w);
    wal_snapshot(&w, rs.n, 1);
    free(md.p);
    make_dirs(rs.wal_dir);
    char *clean = go_clean(rs.wal_dir), tmp[4200], file[4300], eb[128];
    snprintf(tmp, sizeof tmp, "%s.tmp", clean);
    nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    make_dirs(tmp);
    snprintf(file, sizeof file, "%s/%016x-%016x.wal", tmp, 0, 0);
    write_file(file, w.out.p, w.out.n, 0600, WAL_SEGMENT_BYTES);
    free(w.out.p);
    if (rmdir(rs.wal_dir) != 0 || rename(tmp, rs.wal_dir) != 0)
        restore_fail("rename %s %s: %s", tmp, rs.wal_dir,
                     ctl_snapshot_go_errno(errno, eb, sizeof eb));
    ctl_fsync_dir(clean);
    free(clean);
}

/* save_snap writes member/snap/<term>-<index>.snap: snappb.Snapshot{crc,
 * raftpb.Snapshot{the v2 store, metadata: voters, index N, term 1}}. */
static void save_snap(void)
{
    size_t jl = 0;
    char *json = store_json(&jl);
    struct pbuf cs = {0}, md = {0}, sn = {0}, file = {0};
    for (size_t i = 0; i < rs.n; i++)
        pb_u64(&cs, 1, rs.m[i].id); /* voters, not packed (proto2) */
    pb_u64(&cs, 5, 0);              /* auto_leave */
    pb_bytes(&md, 1, cs.p, cs.n);
    pb_u64(&md, 2, rs.n);
    pb_u64(&md, 3, 1);
    pb_bytes(&sn, 1, json, jl);
    pb_bytes(&sn, 2, md.p, md.n);
    pb_u64(&file, 1, crc32c_extend(0, sn.p, sn.n));
    pb_bytes(&file, 2, sn.p, sn.n);
    char path[4200];
    snprintf(path, sizeof path, "%s/%016x-%016zx.snap", rs.snap_dir, 1,
             rs.n);
    write_file(path, file.p, file.n, 0666, 0);
    ctl_fsync_dir(path);
    free(json), free(cs.p), free(md.p), free(sn.p), free(file.p);
}

/* go_bytes writes Go's %v of a []byte: [1 2 3]. */
static void go_bytes(char *out, size_t cap, const uint8_t *p, size_t n)
{
    size_t w = (size_t)snprintf(out, cap, "[");
    for (size_t i = 0; i < n && w < cap; i++)
        w += (size_t)snprintf(out + w, cap - w, "%s%u", i ? " " : "", p[i]);
    if (w < cap)
        snprintf(out + w, cap - w, "]");
}

/* copy_snapshot copies the snapshot file to member/snap/db and checks
 * and removes its trailer, as etcd's saveDB does before it opens it. */
static void copy_snapshot(const char *src, const char *db)
{
    char eb[128];
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        restore_fail("open %s: %s", src,
                     ctl_snapshot_go_errno(errno, eb, sizeof eb));
    struct stat st;
    uint8_t want[CTL_SNAPSHOT_SHA256_LEN];
    if (fstat(in, &st) != 0 || st.st_size < CTL_SNAPSHOT_SHA256_LEN)
        restore_fail("seek %s: invalid argument", src);
    if (pread(in, want, CTL_SNAPSHOT_SHA256_LEN,
              st.st_size - CTL_SNAPSHOT_SHA256_LEN) != CTL_SNAPSHOT_SHA256_LEN)
        restore_fail("read %s: %s", src,
                     ctl_snapshot_go_errno(errno, eb, sizeof eb));
    make_dirs(rs.snap_dir);
    int out = open(db, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out < 0)
        restore_fail("open %s: %s", db,
                     ctl_snapshot_go_errno(errno, eb, sizeof eb));
    bool has_hash = st.st_size % 512 == CTL_SNAPSHOT_SHA256_LEN;
    off_t keep = has_hash ? st.st_size - CTL_SNAPSHOT_SHA256_LEN : st.st_size;
    EVP_MD_CTX *sha = EVP_MD_CTX_new();
    if (!sha || !EVP_DigestInit_ex(sha, EVP_sha256(), NULL))
        restore_fail("out of memory");
    static uint8_t buf[1 << 16];
    for (off_t off = 0; off < keep;) {
        size_t want_n = keep - off < (off_t)sizeof buf ? (size_t)(keep - off)
                                                       : sizeof buf;
        ssize_t r = pread(in, buf, want_n, off);
        if (r <= 0)
            restore_fail("read %s: %s", src,
                         r < 0 ? ctl_snapshot_go_errno(errno, eb, sizeof eb)
                               : "EOF");
        int e = ctl_snapshot_write_all(out, buf, (size_t)r);
        if (e != 0)
            restore_fail("write %s: %s", db,
                         ctl_snapshot_go_errno(e, eb, sizeof eb));
        EVP_DigestUpdate(sha, buf, (size_t)r);
        off += r;
    }
    close(in);
    close(out);
    if (!has_hash && !skip_hash_check)
        restore_fail("snapshot missing hash but --skip-hash-check=false");
    uint8_t got[EVP_MAX_MD_SIZE];
    unsigned int gl = 0;
    EVP_DigestFinal_ex(sha, got, &gl);
    EVP_MD_CTX_free(sha);
    if (has_hash && !skip_hash_check &&
        memcmp(want, got, CTL_SNAPSHOT_SHA256_LEN) != 0) {
        char w[200], g[200];
        go_bytes(w, sizeof w, want, CTL_SNAPSHOT_SHA256_LEN);
        go_bytes(g, sizeof g, got, CTL_SNAPSHOT_SHA256_LEN);
        restore_fail("expected sha256 %s, got %s", w, g);
    }
}

/* The compaction marks etcd's mvcc store reads when restore opens it. */
struct marks {
    int64_t finished;  /* meta/finishedCompactRev, or -1 */
    int64_t scheduled; /* meta/scheduledCompactRev, or -1 */
};

static int marks_entry(void *arg, const struct bbolt_entry *e)
{
    struct marks *m = arg;
    if (e->depth != 1 || e->is_bucket || e->path_len[0] != 4 ||
        memcmp(e->path[0], "meta", 4) != 0 || e->value_len < 8)
        return 0;
    int64_t *to = NULL;
    if (e->key_len == 18 && memcmp(e->key, "finishedCompactRev", 18) == 0)
        to = &m->finished;
    if (e->key_len == 19 && memcmp(e->key, "scheduledCompactRev", 19) == 0)
        to = &m->scheduled;
    if (to) {
        uint64_t v = 0;
        for (int i = 0; i < 8; i++)
            v = v << 8 | e->value[i];
        *to = (int64_t)v;
    }
    return 0;
}

/* log_marks writes the lines etcd's mvcc store logs when restore opens
 * the db.  A compaction that was scheduled and not finished is left for
 * the server, which resumes it at its start (etcd's restore starts it in
 * the background and closes the store at once, so how far it gets is
 * luck). */
static void log_marks(struct bbolt_reader *r)
{
    struct marks m = {-1, -1};
    (void)bbolt_reader_walk(r, marks_entry, &m);
    if (m.finished >= 0) {
        char rev[24];
        ctl_snapshot_zap_begin("info", false, "mvcc/kvstore.go:388",
                  "restored last compact revision");
        ctl_snapshot_zap_field("meta-bucket-name", "meta");
        ctl_snapshot_zap_field("meta-bucket-name-key", "finishedCompactRev");
        snprintf(rev, sizeof rev, "%lld", (long long)m.finished);
        fprintf(stderr, ",\"restored-compact-revision\":%s", rev);
        ctl_snapshot_zap_end();
    }
    if (m.scheduled > (m.finished > 0 ? m.finished : 0)) {
        ctl_snapshot_zap_begin("info", false, "mvcc/kvstore.go:468",
                  "resume scheduled compaction");
        ctl_snapshot_zap_field("meta-bucket-name", "meta");
        ctl_snapshot_zap_field("meta-bucket-name-key", "scheduledCompactRev");
        fprintf(stderr, ",\"scheduled-compact-revision\":%lld",
                (long long)m.scheduled);
        ctl_snapshot_zap_end();
    }
}

/* save_db makes member/snap/db (see RESTORE above). */
static void save_db(const char *src)
{
    char db[4200], tmp[4300], why[600], eb[128];
    snprintf(db, sizeof db, "%s/db", rs.snap_dir);
    snprintf(tmp, sizeof tmp, "%s.restore", db);
    copy_snapshot(src, db);
    struct bbolt_reader *r = NULL;
    int rc = bbolt_reader_open_file(db, &r);
    if (rc != 0)
        restore_fail("%s", rc == ERR_BBOLT_CORRUPT ? bbolt_reader_error(r)
                                                   : err_str(rc));
    log_marks(r);
    bbolt_reader_free(r);
    if (ctl_bbolt_copy(db, tmp, (int64_t)rs.n, why, sizeof why) != 0) {
        unlink(tmp);
        restore_fail("%s", why);
    }
    if (rename(tmp, db) != 0)
        restore_fail("rename %s %s: %s", tmp, db,
                     ctl_snapshot_go_errno(errno, eb, sizeof eb));
}

static void log_restore(const char *msg, const char *caller)
{
    ctl_snapshot_zap_begin("info", false, caller, msg);
    ctl_snapshot_zap_field("path", rs.src);
    ctl_snapshot_zap_field("wal-dir", rs.wal_dir);
    ctl_snapshot_zap_field("data-dir", rs.data_dir);
    ctl_snapshot_zap_field("snap-dir", rs.snap_dir);
    ctl_snapshot_zap_end();
}

/* log_members writes the line etcd's cluster writes per member it adds
 * to the v2 store (no local member yet: "0"). */
static void log_members(void)
{
    for (size_t i = 0; i < rs.n; i++) {
        char cid[CTL_ID_MAX], id[CTL_ID_MAX];
        ctl_snapshot_zap_begin("info", false, "membership/cluster.go:392",
                  "added member");
        ctl_snapshot_zap_field("cluster-id",
                               ctl_id_hex(cid, sizeof cid, rs.cluster_id));
        ctl_snapshot_zap_field("local-member-id", "0");
        ctl_snapshot_zap_field("added-peer-id",
                               ctl_id_hex(id, sizeof id, rs.m[i].id));
        fputs(",\"added-peer-peer-urls\":[", stderr);
        for (size_t u = 0; u < rs.m[i].urls.n; u++) {
            if (u)
                fputc(',', stderr);
            ctl_snapshot_zap_str(rs.m[i].urls.v[u]);
        }
        fputc(']', stderr);
        ctl_snapshot_zap_end();
    }
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static int restore_run(int argc, char **argv)
{
    if (argc != 1)
        ctl_exit(CTL_EXIT_BAD_ARGS,
                 "snapshot restore requires exactly one argument");
    rs.src = argv[0];
    if (restore_data_dir[0])
        rs.data_dir = strdup(restore_data_dir);
    else if (asprintf(&rs.data_dir, "%s.etcd", restore_name) < 0)
        rs.data_dir = NULL;
    if (!rs.data_dir)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    rs.wal_dir = restore_wal_dir[0]
                     ? strdup(restore_wal_dir)
                     : go_join3(rs.data_dir, "member", "wal");
    static struct url_list ap;
    urls_parse(restore_peer_urls, &ap);
    cluster_parse(restore_cluster);
    verify_bootstrap(&ap);
    members_make();
    rs.snap_dir = go_join3(rs.data_dir, "member", "snap");
    if (exists(rs.data_dir))
        restore_fail("data-dir %s exists", go_quoted(rs.data_dir));
    if (exists(rs.wal_dir))
        restore_fail("wal-dir %s exists", go_quoted(rs.wal_dir));
    log_restore("restoring snapshot", "snapshot/v3_snapshot.go:296");
    rs.made_data = true;
    rs.made_wal = restore_wal_dir[0] != '\0';
    save_db(rs.src);
    make_dirs(rs.wal_dir);
    log_members();
    save_wal();
    save_snap();
    log_restore("restored snapshot", "snapshot/v3_snapshot.go:309");
    return CTL_EXIT_SUCCESS;
}

/* ------------------------------------------------------------------------
 * The command
 * ---------------------------------------------------------------------- */

static struct ctl_flag restore_flags[] = {
    {"data-dir", 0, CTL_FLAG_STRING, &restore_data_dir, "",
     "Path to the data directory", false},
    {"wal-dir", 0, CTL_FLAG_STRING, &restore_wal_dir, "",
     "Path to the WAL directory (use --data-dir if none given)", false},
    {"initial-cluster", 0, CTL_FLAG_STRING, &restore_cluster,
     "default=http://localhost:2380",
     "Initial cluster configuration for restore bootstrap", false},
    {"initial-cluster-token", 0, CTL_FLAG_STRING, &restore_token,
     "etcd-cluster",
     "Initial cluster token for the etcd cluster during restore bootstrap",
     false},
    {"initial-advertise-peer-urls", 0, CTL_FLAG_STRING, &restore_peer_urls,
     "http://localhost:2380",
     "List of this member's peer URLs to advertise to the rest of the "
     "cluster",
     false},
    {"name", 0, CTL_FLAG_STRING, &restore_name, "default",
     "Human-readable name for this member", false},
    {"skip-hash-check", 0, CTL_FLAG_BOOL, &skip_hash_check, "false",
     "Ignore snapshot integrity hash value (required if copied from data "
     "directory)",
     false},
    CTL_FLAG_END,
};

const struct ctl_cmd ctl_snapshot_restore_cmd = {
    .use = "restore <filename> [options]",
    .short_desc = "Restores an etcd member snapshot to an etcd directory",
    .flags = restore_flags,
    .run = restore_run,
};
