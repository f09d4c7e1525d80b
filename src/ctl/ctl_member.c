/*
 * ctl_member.c - "member add|remove|update|list|promote": etcdctl 3.4's
 * membership commands, with clientv3's own check of the peer URLs (Go's
 * net/url.Parse and types.NewURLs: etcdctl refuses a bad URL before it
 * asks the server, with Go's error text).
 *
 * Also the two helpers the cluster commands share (commands.h):
 * ctl_cluster_id_parse (strconv.ParseUint(s, 16, 64) and its errors) and
 * ctl_cluster_print_rpc (etcdctl's printerRPC for -w json / protobuf).
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/commands.h"
#include "ctl/print.h"
#include "etcdserverpb/rpc.pb-c.h"

/* ------------------------------------------------------------------------
 * Shared helpers
 * ---------------------------------------------------------------------- */

/* quote_to writes Go's %q of n bytes of s into buf (cut if short). */
static void quote_to(char *buf, size_t cap, const char *s, size_t n)
{
    assert(cap > 0);
    buf[0] = '\0';
    FILE *f = fmemopen(buf, cap, "w");
    if (!f)
        return;
    ctl_quote(f, s, n);
    fclose(f);
    buf[cap - 1] = '\0';
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int ctl_cluster_id_parse(const char *s, uint64_t *id_out, char *err,
                         size_t cap)
{
    assert(s && id_out && err);
    /* base 16 given: no "0x" prefix, no sign, no underscores; Go reports
     * the first problem met from the left (a bad digit, or overflow) */
    const char *why = *s ? NULL : "invalid syntax";
    uint64_t v = 0;
    for (const char *p = s; !why && *p; p++) {
        int d = hex_digit(*p);
        if (d < 0)
            why = "invalid syntax";
        else if (v > UINT64_MAX >> 4)
            why = "value out of range";
        else
            v = v << 4 | (uint64_t)d;
    }
    if (!why) {
        *id_out = v;
        return 0;
    }
    char q[512];
    quote_to(q, sizeof q, s, strlen(s));
    snprintf(err, cap, "strconv.ParseUint: parsing %s: %s", q, why);
    return -1;
}

void ctl_cluster_print_rpc(enum ctl_output o, const ProtobufCMessage *m)
{
    assert(m);
    if (o == CTL_OUT_JSON) {
        ctl_json_message(stdout, m);
    } else if (o == CTL_OUT_PROTOBUF) {
        ctl_pb_message(stdout, m);
    } else {
        assert(o != CTL_OUT_SIMPLE);
        ctl_exit(CTL_EXIT_BAD_FEATURE, "%s not supported as output format",
                 ctl_g.write_out);
    }
}

/* member_id parses the one <memberID> argument as etcdctl does for
 * remove, update and promote. */
static uint64_t member_id(int argc, char **argv)
{
    if (argc != 1)
        ctl_exit(CTL_EXIT_BAD_ARGS, "member ID is not provided");
    uint64_t id;
    char err[700];
    if (ctl_cluster_id_parse(argv[0], &id, err, sizeof err) != 0)
        ctl_exit(CTL_EXIT_BAD_ARGS,
                 "bad member ID arg (%s), expecting ID in Hex", err);
    return id;
}

/* ------------------------------------------------------------------------
 * Peer URLs: Go's url.Parse and types.NewURLs, for their errors only
 * ---------------------------------------------------------------------- */

enum url_mode { URL_HOST, URL_ZONE, URL_OTHER };

/* host_ok: a byte Go's url allows unescaped in a host (shouldEscape). */
static bool host_ok(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
        (c >= '0' && c <= '9'))
        return true;
    return c != '\0' && strchr("!$&'()*+,;=:[]<>\"-_.~", c) != NULL;
}

/* unescape_check finds the first error Go's unescape reports for s in
 * mode; writes its text and returns -1, or returns 0. */
static int unescape_check(const char *s, size_t n, enum url_mode mode,
                          char *err, size_t cap)
{
    char q[64];
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c != '%') {
            if (mode != URL_OTHER && c < 0x80 && !host_ok(c)) {
                quote_to(q, sizeof q, s + i, 1);
                snprintf(err, cap, "invalid character %s in host name", q);
                return -1;
            }
            continue;
        }
        bool bad = i + 2 >= n || hex_digit(s[i + 1]) < 0 ||
                   hex_digit(s[i + 2]) < 0;
        bool pct25 = !bad && s[i + 1] == '2' && s[i + 2] == '5';
        unsigned v = bad ? 0u : (unsigned)(hex_digit(s[i + 1]) << 4 |
                                           hex_digit(s[i + 2]));
        if (!bad && mode == URL_HOST)
            bad = v < 0x80 && !pct25;
        if (!bad && mode == URL_ZONE)
            bad = !pct25 && v != ' ' && !host_ok((unsigned char)v);
        if (bad) {
            quote_to(q, sizeof q, s + i, n - i < 3 ? n - i : 3);
            snprintf(err, cap, "invalid URL escape %s", q);
            return -1;
        }
        i += 2;
    }
    return 0;
}

/* port_ok is Go's validOptionalPort. */
static bool port_ok(const char *p, size_t n)
{
    if (n == 0)
        return true;
    if (p[0] != ':')
        return false;
    for (size_t i = 1; i < n; i++)
        if (p[i] < '0' || p[i] > '9')
            return false;
    return true;
}

static const char *rmemchr(const char *s, int c, size_t n)
{
    while (n-- > 0)
        if (s[n] == c)
            return s + n;
    return NULL;
}

/* parse_host checks host[:port] as Go's parseHost does. */
static int parse_host(const char *h, size_t n, char *err, size_t cap)
{
    const char *colon = NULL;
    if (n > 0 && h[0] == '[') {
        const char *rb = rmemchr(h, ']', n);
        if (!rb) {
            snprintf(err, cap, "missing ']' in host");
            return -1;
        }
        colon = rb + 1;
    } else {
        colon = rmemchr(h, ':', n);
    }
    size_t cl = colon ? n - (size_t)(colon - h) : 0;
    if (colon && !port_ok(colon, cl)) {
        char q[256];
        quote_to(q, sizeof q, colon, cl);
        snprintf(err, cap, "invalid port %s after host", q);
        return -1;
    }
    const char *zone = NULL;
    if (n > 0 && h[0] == '[') /* "%25" before the ']' starts a zone */
        for (const char *p = h; p + 3 <= colon - 1 && !zone; p++)
            if (memcmp(p, "%25", 3) == 0)
                zone = p;
    if (!zone)
        return unescape_check(h, n, URL_HOST, err, cap);
    const char *rb = colon - 1;
    if (unescape_check(h, (size_t)(zone - h), URL_HOST, err, cap) ||
        unescape_check(zone, (size_t)(rb - zone), URL_ZONE, err, cap))
        return -1;
    return unescape_check(rb, n - (size_t)(rb - h), URL_HOST, err, cap);
}

/* userinfo_ok is Go's validUserinfo (bytes >= 0x80 are runes it
 * refuses too). */
static bool userinfo_ok(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') ||
              (c && strchr("-._:~!$&'()*+,;=%@", c))))
            return false;
    }
    return true;
}

/* userinfo_unescape checks the user and the password apart, as Go
 * unescapes them (an escape cut short at the ':' names its own bytes). */
static int userinfo_unescape(const char *s, size_t n, char *err, size_t cap)
{
    const char *colon = memchr(s, ':', n);
    size_t ul = colon ? (size_t)(colon - s) : n;
    if (unescape_check(s, ul, URL_OTHER, err, cap) != 0)
        return -1;
    return colon ? unescape_check(colon + 1, n - ul - 1, URL_OTHER, err, cap)
                 : 0;
}

/* A URL as far as types.NewURLs looks at it. */
struct peer_url {
    char scheme[8];   /* lower-cased scheme, cut ("" if none) */
    bool scheme_long; /* longer than scheme holds: not a valid one */
    const char *host; /* the host[:port] of the authority, or NULL */
    size_t host_len;  /* its length */
    bool path;        /* a path follows the authority */
};

/* get_scheme is Go's getScheme; returns the scheme's length (0: none),
 * or -1 for "missing protocol scheme". */
static int get_scheme(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
            continue;
        if ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.') {
            if (i == 0)
                return 0;
            continue;
        }
        if (c == ':')
            return i == 0 ? -1 : (int)i;
        return 0;
    }
    return 0;
}

/* authority splits "//user@host:port/path" and checks it. */
static int authority(const char *r, size_t n, struct peer_url *u, char *err,
                     size_t cap)
{
    const char *a = r + 2;
    const char *slash = memchr(a, '/', n - 2);
    size_t al = slash ? (size_t)(slash - a) : n - 2;
    const char *at = rmemchr(a, '@', al);
    u->host = at ? at + 1 : a;
    u->host_len = al - (size_t)(u->host - a);
    if (parse_host(u->host, u->host_len, err, cap) != 0)
        return -1;
    if (at && !userinfo_ok(a, (size_t)(at - a))) {
        snprintf(err, cap, "net/url: invalid userinfo");
        return -1;
    }
    if (at && userinfo_unescape(a, (size_t)(at - a), err, cap) != 0)
        return -1;
    u->path = slash != NULL;
    return slash ? unescape_check(slash, n - 2 - al, URL_OTHER, err, cap)
                 : 0;
}

/* url_parse checks s[0..n) (no fragment) as Go's url.parse. */
static int url_parse(const char *s, size_t n, struct peer_url *u, char *err,
                     size_t cap)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) {
            snprintf(err, cap, "net/url: invalid control character in URL");
            return -1;
        }
    if (n == 1 && s[0] == '*') {
        u->path = true;
        return 0;
    }
    int sl = get_scheme(s, n);
    if (sl < 0) {
        snprintf(err, cap, "missing protocol scheme");
        return -1;
    }
    u->scheme_long = (size_t)sl >= sizeof u->scheme;
    for (int i = 0; i < sl && i + 1 < (int)sizeof u->scheme; i++)
        u->scheme[i] = (char)(s[i] | (s[i] >= 'A' && s[i] <= 'Z' ? 0x20 : 0));
    const char *r = s + (sl ? sl + 1 : 0);
    size_t rl = n - (size_t)(r - s);
    const char *qm = memchr(r, '?', rl);
    if (qm)
        rl = (size_t)(qm - r); /* the query is not checked */
    if (rl == 0 || r[0] != '/') {
        if (sl > 0)
            return 0; /* opaque: no host, no path */
        const char *slash = memchr(r, '/', rl);
        if (memchr(r, ':', slash ? (size_t)(slash - r) : rl)) {
            snprintf(err, cap, "first path segment in URL cannot contain "
                               "colon");
            return -1;
        }
    }
    bool triple = rl >= 3 && memcmp(r, "///", 3) == 0;
    if ((sl > 0 || !triple) && rl >= 2 && memcmp(r, "//", 2) == 0)
        return authority(r, rl, u, err, cap);
    u->path = rl > 0;
    return unescape_check(r, rl, URL_OTHER, err, cap);
}

/* split_host_port_ok says whether Go's net.SplitHostPort takes h. */
static bool split_host_port_ok(const char *h, size_t n)
{
    const char *last = rmemchr(h, ':', n);
    if (!last)
        return false;
    size_t i = (size_t)(last - h), j = 0, k = 0;
    if (h[0] == '[') {
        const char *end = memchr(h, ']', n);
        if (!end || (size_t)(end - h) + 1 != i)
            return false;
        j = 1, k = (size_t)(end - h) + 1;
    } else if (memchr(h, ':', i)) {
        return false;
    }
    return !memchr(h + j, '[', n - j) && !memchr(h + k, ']', n - k);
}

/* trim_space gives Go's strings.TrimSpace of s as [*b, *b + *n). */
static void trim_space(const char *s, const char **b, size_t *n)
{
    size_t len = strlen(s), l;
    while (len > 0 && (l = ctl_go_space_len(s, len)) > 0)
        s += l, len -= l;
    for (bool cut = true; cut && len > 0;) {
        cut = false;
        for (size_t back = 1; back <= 3 && back <= len; back++)
            if (ctl_go_space_len(s + len - back, back) == back) {
                len -= back, cut = true;
                break;
            }
    }
    *b = s;
    *n = len;
}

/* url_check is one URL of types.NewURLs: -1 with Go's error text. */
static int url_check(const char *raw, char *err, size_t cap)
{
    const char *s;
    size_t n;
    trim_space(raw, &s, &n);
    const char *hash = memchr(s, '#', n);
    size_t un = hash ? (size_t)(hash - s) : n;
    struct peer_url u = {0};
    char why[600] = "", q[1024];
    bool bad = url_parse(s, un, &u, why, sizeof why) != 0;
    if (!bad && hash && n - un > 1) { /* the fragment: escapes only */
        bad = unescape_check(hash + 1, n - un - 1, URL_OTHER, why,
                             sizeof why) != 0;
        un = n; /* Go names the whole URL then */
    }
    if (bad) {
        quote_to(q, sizeof q, s, un);
        snprintf(err, cap, "parse %s: %s", q, why);
        return -1;
    }
    const char *sc = u.scheme;
    if (u.scheme_long || (strcmp(sc, "http") && strcmp(sc, "https") &&
                          strcmp(sc, "unix") && strcmp(sc, "unixs")))
        snprintf(err, cap, "URL scheme must be http, https, unix, or unixs: "
                           "%.*s", (int)n, s);
    else if (!u.host || !split_host_port_ok(u.host, u.host_len))
        snprintf(err, cap, "URL address does not have the form "
                           "\"host:port\": %.*s", (int)n, s);
    else if (u.path)
        snprintf(err, cap, "URL must not contain a path: %.*s", (int)n, s);
    else
        return 0;
    return -1;
}

/* peer_urls splits --peer-urls on commas (the strings are sent as given)
 * and checks them as clientv3 does before MemberAdd / MemberUpdate;
 * exits with the first error. */
static void peer_urls(const char *flag, struct ctl_strings *out)
{
    const char *p = flag;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char *one = strndup(p, len);
        if (!one)
            ctl_exit(CTL_EXIT_ERROR, "out of memory");
        ctl_strings_add(out, one);
        free(one);
        if (!comma)
            break;
        p = comma + 1;
    }
    char err[2048];
    for (size_t i = 0; i < out->n; i++)
        if (url_check(out->v[i], err, sizeof err) != 0)
            ctl_exit(CTL_EXIT_ERROR, "%s", err);
}

/* ------------------------------------------------------------------------
 * member add
 * ---------------------------------------------------------------------- */

static const char *add_peer_urls;
static bool add_learner;

static struct ctl_flag add_flags[] = {
    {"peer-urls", 0, CTL_FLAG_STRING, &add_peer_urls, "",
     "comma separated peer URLs for the new member.", false},
    {"learner", 0, CTL_FLAG_BOOL, &add_learner, "false",
     "indicates if the new member is raft learner", false},
    CTL_FLAG_END,
};

/* add_args checks the arguments as etcdctl's member add does. */
static void add_args(int argc, char **argv)
{
    if (argc < 1)
        ctl_exit(CTL_EXIT_BAD_ARGS, "member name not provided");
    if (argc > 1) {
        char *msg = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&msg, &len);
        if (!f)
            ctl_exit(CTL_EXIT_ERROR, "out of memory");
        fputs("too many arguments", f);
        for (int i = 0; i < argc; i++)
            if (strncasecmp(argv[i], "http", 4) == 0)
                fprintf(f, ", did you mean --peer-urls=%s", argv[i]);
        fclose(f);
        ctl_exit(CTL_EXIT_BAD_ARGS, "%s", msg);
    }
    if (!add_peer_urls[0])
        ctl_exit(CTL_EXIT_BAD_ARGS, "member peer urls not provided");
}

/* add_env prints the ETCD_* lines a new member starts with. */
static void add_env(const Etcdserverpb__MemberAddResponse *r,
                    const char *name)
{
    uint64_t new_id = r->member ? r->member->id : 0;
    char *conf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&conf, &len);
    if (!f)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    bool first = true;
    for (size_t i = 0; i < r->n_members; i++) {
        const Etcdserverpb__Member *m = r->members[i];
        for (size_t k = 0; k < m->n_peerurls; k++, first = false)
            fprintf(f, "%s%s=%s", first ? "" : ",",
                    m->id == new_id ? name : m->name, m->peerurls[k]);
    }
    fclose(f);
    fputs("\nETCD_NAME=", stdout);
    ctl_quote(stdout, name, strlen(name));
    fputs("\nETCD_INITIAL_CLUSTER=", stdout);
    ctl_quote(stdout, conf, len);
    fputs("\nETCD_INITIAL_ADVERTISE_PEER_URLS=", stdout);
    ctl_quote(stdout, add_peer_urls, strlen(add_peer_urls));
    fputs("\nETCD_INITIAL_CLUSTER_STATE=\"existing\"\n", stdout);
    free(conf);
}

static uint64_t cluster_id(const Etcdserverpb__ResponseHeader *h)
{
    return h ? h->cluster_id : 0;
}

static int add_run(int argc, char **argv)
{
    add_args(argc, argv);
    enum ctl_output o = ctl_output_format();
    (void)ctl_client();
    struct ctl_strings urls = {0};
    peer_urls(add_peer_urls, &urls);
    Etcdserverpb__MemberAddRequest req = ETCDSERVERPB__MEMBER_ADD_REQUEST__INIT;
    req.n_peerurls = urls.n;
    req.peerurls = urls.v;
    req.islearner = add_learner;
    Etcdserverpb__MemberAddResponse *r =
        (Etcdserverpb__MemberAddResponse *)ctl_call(
            "/etcdserverpb.Cluster/MemberAdd", &req.base,
            &etcdserverpb__member_add_response__descriptor);
    if (o != CTL_OUT_SIMPLE) {
        ctl_cluster_print_rpc(o, &r->base);
    } else {
        printf("Member %16llx added to cluster %16llx\n",
               (unsigned long long)(r->member ? r->member->id : 0),
               (unsigned long long)cluster_id(r->header));
        add_env(r, argv[0]);
    }
    protobuf_c_message_free_unpacked(&r->base, NULL);
    ctl_strings_clear(&urls);
    return CTL_EXIT_SUCCESS;
}

static const struct ctl_cmd add_cmd = {
    .use = "add <memberName> [options]",
    .short_desc = "Adds a member into the cluster",
    .flags = add_flags,
    .run = add_run,
};

/* ------------------------------------------------------------------------
 * member remove, update, promote
 * ---------------------------------------------------------------------- */

/* changed prints what etcdctl prints once a member was changed: "Member
 * <id> <verb> cluster <cid>" or the response in json / protobuf. */
static void changed(enum ctl_output o, const ProtobufCMessage *m,
                    const Etcdserverpb__ResponseHeader *h, uint64_t id,
                    const char *verb)
{
    if (o != CTL_OUT_SIMPLE) {
        ctl_cluster_print_rpc(o, m);
        return;
    }
    printf("Member %16llx %s cluster %16llx\n", (unsigned long long)id,
           verb, (unsigned long long)cluster_id(h));
}

static int remove_run(int argc, char **argv)
{
    uint64_t id = member_id(argc, argv);
    enum ctl_output o = ctl_output_format();
    Etcdserverpb__MemberRemoveRequest req =
        ETCDSERVERPB__MEMBER_REMOVE_REQUEST__INIT;
    req.id = id;
    Etcdserverpb__MemberRemoveResponse *r =
        (Etcdserverpb__MemberRemoveResponse *)ctl_call(
            "/etcdserverpb.Cluster/MemberRemove", &req.base,
            &etcdserverpb__member_remove_response__descriptor);
    changed(o, &r->base, r->header, id, "removed from");
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return CTL_EXIT_SUCCESS;
}

static const char *update_peer_urls;

static struct ctl_flag update_flags[] = {
    {"peer-urls", 0, CTL_FLAG_STRING, &update_peer_urls, "",
     "comma separated peer URLs for the updated member.", false},
    CTL_FLAG_END,
};

static int update_run(int argc, char **argv)
{
    uint64_t id = member_id(argc, argv);
    if (!update_peer_urls[0])
        ctl_exit(CTL_EXIT_BAD_ARGS, "member peer urls not provided");
    enum ctl_output o = ctl_output_format();
    (void)ctl_client();
    struct ctl_strings urls = {0};
    peer_urls(update_peer_urls, &urls);
    Etcdserverpb__MemberUpdateRequest req =
        ETCDSERVERPB__MEMBER_UPDATE_REQUEST__INIT;
    req.id = id;
    req.n_peerurls = urls.n;
    req.peerurls = urls.v;
    Etcdserverpb__MemberUpdateResponse *r =
        (Etcdserverpb__MemberUpdateResponse *)ctl_call(
            "/etcdserverpb.Cluster/MemberUpdate", &req.base,
            &etcdserverpb__member_update_response__descriptor);
    changed(o, &r->base, r->header, id, "updated in");
    protobuf_c_message_free_unpacked(&r->base, NULL);
    ctl_strings_clear(&urls);
    return CTL_EXIT_SUCCESS;
}

static int promote_run(int argc, char **argv)
{
    uint64_t id = member_id(argc, argv);
    enum ctl_output o = ctl_output_format();
    Etcdserverpb__MemberPromoteRequest req =
        ETCDSERVERPB__MEMBER_PROMOTE_REQUEST__INIT;
    req.id = id;
    Etcdserverpb__MemberPromoteResponse *r =
        (Etcdserverpb__MemberPromoteResponse *)ctl_call(
            "/etcdserverpb.Cluster/MemberPromote", &req.base,
            &etcdserverpb__member_promote_response__descriptor);
    /* etcdctl 3.4 panics here for every format but simple (its printers
     * lack MemberPromote: a nil pointer dereference, exit 2, after the
     * member was promoted).  We print as its other member commands do:
     * the response for json and protobuf, "not supported" for the rest. */
    changed(o, &r->base, r->header, id, "promoted in");
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return CTL_EXIT_SUCCESS;
}

static const struct ctl_cmd remove_cmd = {
    .use = "remove <memberID>",
    .short_desc = "Removes a member from the cluster",
    .run = remove_run,
};

static const struct ctl_cmd update_cmd = {
    .use = "update <memberID> [options]",
    .short_desc = "Updates a member in the cluster",
    .flags = update_flags,
    .run = update_run,
};

static const struct ctl_cmd promote_cmd = {
    .use = "promote <memberID>",
    .short_desc = "Promotes a non-voting member in the cluster",
    .long_desc = "Promotes a non-voting learner member to a voting one in "
                 "the cluster.\n",
    .run = promote_run,
};

/* ------------------------------------------------------------------------
 * member list
 * ---------------------------------------------------------------------- */

static int list_run(int argc, char **argv)
{
    (void)argc, (void)argv;
    enum ctl_output o = ctl_output_format();
    Etcdserverpb__MemberListRequest req =
        ETCDSERVERPB__MEMBER_LIST_REQUEST__INIT;
    Etcdserverpb__MemberListResponse *r =
        (Etcdserverpb__MemberListResponse *)ctl_call(
            "/etcdserverpb.Cluster/MemberList", &req.base,
            &etcdserverpb__member_list_response__descriptor);
    if (o == CTL_OUT_SIMPLE || o == CTL_OUT_TABLE)
        ctl_rows_member_list(stdout, r, o == CTL_OUT_TABLE);
    else if (o == CTL_OUT_FIELDS)
        ctl_fields_member_list(stdout, r);
    else
        ctl_cluster_print_rpc(o, &r->base);
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return CTL_EXIT_SUCCESS;
}

static const struct ctl_cmd list_cmd = {
    .use = "list",
    .short_desc = "Lists all members in the cluster",
    .long_desc = "When --write-out is set to simple, this command prints out "
                 "comma-separated member lists for each endpoint.\nThe items "
                 "in the lists are ID, Status, Name, Peer Addrs, Client "
                 "Addrs, Is Learner.\n",
    .run = list_run,
};

static const struct ctl_cmd *const member_subs[] = {
    &add_cmd, &remove_cmd, &update_cmd, &list_cmd, &promote_cmd, NULL,
};

const struct ctl_cmd ctl_cmd_member = {
    .use = "member <subcommand>",
    .short_desc = "Membership related commands",
    .subs = member_subs,
};
