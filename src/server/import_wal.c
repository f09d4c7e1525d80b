/*
 * import_wal.c - etcd's WAL and snap files for the import (import_int.h):
 * the log read whole (entries, hard state, snapshot markers, the member
 * and cluster ids), the members' changes replayed, and each entry after
 * the db's consistent index made an entry of cetcd's log.
 *
 * etcd applies the entries after its db's consistent index again when it
 * restarts (the index is stored only with a KV write, so auth, lease and
 * membership entries may already be in the db: applying them again gets
 * "already exists" answers, harmlessly, as in etcd).  cetcd does the same
 * with their translations: etcd's InternalRaftRequest and cetcd's
 * InternalRequest carry the same etcdserverpb messages under other field
 * numbers (TRANSLATE below), and etcd's RequestHeader becomes auth_user /
 * auth_revision.  Entries that only change members (conf changes, etcd
 * 3.4's v2 publish of a member's attributes, 3.5's member attributes) are
 * applied to the members table here, up to the commit index, and become
 * empty entries; the table is the raft configuration cetcd starts from.
 */
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "server/import_int.h"
#include "server/server_int.h"
#include "util/check.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/varint.h"

#define LOG_MOD "etcdserver"

/* --- reading the log ------------------------------------------------------ */

static bool is_v2(const uint8_t *p, size_t len);

/* Does a normal entry change a member's attributes (a v2 publish, 3.5's
 * ClusterMemberAttrSet)?  Those before the consistent index are kept too:
 * the members are replayed from the snapshot's (or the log's start). */
static bool member_related(const uint8_t *p, size_t len)
{
    struct etcdwal_field f;
    size_t pos = 0;
    if (len == 0)
        return false;
    if (is_v2(p, len))
        return true;
    while (etcdwal_field_next(p, len, &pos, &f) == 0)
        if ((f.num == 2 || f.num == 1301) && f.wt == 2)
            return true;
    return false;
}

/* Drops the kept entries from index on (etcd's log overwrites them). */
static void ents_truncate(struct import *im, uint64_t index)
{
    while (im->n_ents > 0 && im->ents[im->n_ents - 1].index >= index)
        mem_free(im->ents[--im->n_ents].data);
}

static int ents_push(struct import *im, const struct etcdwal_entry *e)
{
    if (im->n_ents == im->cap_ents) {
        size_t cap = im->cap_ents ? im->cap_ents * 2 : 256;
        void *p = mem_realloc(im->ents, cap * sizeof *im->ents);
        if (p == NULL)
            return ERR_NOMEM;
        im->ents = p;
        im->cap_ents = cap;
    }
    uint8_t *d = e->len > 0 ? mem_malloc(e->len) : NULL;
    if (e->len > 0 && d == NULL)
        return ERR_NOMEM;
    if (d != NULL)
        memcpy(d, e->data, e->len);
    im->ents[im->n_ents++] = (struct import_ent){e->index, e->term, e->type,
                                                 d, e->len};
    return 0;
}

static int on_entry(struct import *im, const struct etcdwal_record *r)
{
    struct etcdwal_entry e;
    if (etcdwal_entry_decode(r->data, r->len, &e) != 0 || e.index == 0) {
        log_error(LOG_MOD, "%s: entry record at offset %" PRIu64
                  " does not decode", im->path, r->off);
        return ERR_CORRUPT;
    }
    if (im->last_index != 0 && e.index > im->last_index + 1) {
        log_error(LOG_MOD, "%s: entry %" PRIu64 " at offset %" PRIu64
                  " follows entry %" PRIu64 ": the log has a gap", im->path,
                  e.index, r->off, im->last_index);
        return ERR_CORRUPT;
    }
    ents_truncate(im, e.index);
    if (im->first_index == 0 || e.index < im->first_index)
        im->first_index = e.index;
    im->last_index = e.index;
    if (e.type != 0 || e.index >= im->ci || member_related(e.data, e.len))
        return ents_push(im, &e);
    return 0;
}

static int on_record(void *arg, const struct etcdwal_record *r)
{
    struct import *im = arg;
    int rc = 0;
    switch (r->type) {
    case ETCDWAL_ENTRY:
        return on_entry(im, r);
    case ETCDWAL_STATE: {
        struct etcdwal_state hs;
        rc = etcdwal_state_decode(r->data, r->len, &hs);
        if (rc == 0 && (hs.term | hs.vote | hs.commit) != 0)
            im->hs = hs;
        break;
    }
    case ETCDWAL_METADATA: {
        struct etcdwal_metadata md;
        rc = etcdwal_metadata_decode(r->data, r->len, &md);
        if (rc == 0) {
            im->node_id = md.node_id;
            im->cluster_id = md.cluster_id;
        }
        break;
    }
    case ETCDWAL_SNAPSHOT: {
        struct etcdwal_snapshot sn;
        rc = etcdwal_snapshot_decode(r->data, r->len, &sn);
        if (rc == 0 && im->n_snaps == IMPORT_SNAPS_MAX) {
            memmove(im->snaps, im->snaps + 1,
                    (IMPORT_SNAPS_MAX - 1) * sizeof im->snaps[0]);
            im->n_snaps--;
        }
        if (rc == 0)
            im->snaps[im->n_snaps++] = sn;
        break;
    }
    default:
        break;
    }
    if (rc != 0)
        log_error(LOG_MOD, "%s: record of type %" PRId64 " at offset %" PRIu64
                  " does not decode", im->path, r->type, r->off);
    return rc;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The newest snap file, checked (etcd would load it); its metadata joins
 * the snapshot markers.  A dir without one is fine. */
static int snap_read(struct import *im)
{
    char dir[4300], *names[4096];
    size_t n = 0;
    snprintf(dir, sizeof dir, "%s/snap", im->src);
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && n < 4096) {
        size_t l = strlen(de->d_name);
        if (l > 5 && strcmp(de->d_name + l - 5, ".snap") == 0)
            names[n++] = strdup(de->d_name);
    }
    closedir(d);
    if (n == 0)
        return 0;
    qsort(names, n, sizeof names[0], name_cmp);
    snprintf(im->path, sizeof im->path, "%s/%s", dir, names[n - 1]);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    FILE *f = fopen(im->path, "rb");
    if (f == NULL)
        return ERR_IO;
    struct stat st;
    int rc = fstat(fileno(f), &st) != 0 ? ERR_IO : 0;
    size_t len = rc == 0 ? (size_t)st.st_size : 0;
    uint8_t *buf = rc == 0 ? mem_malloc(len > 0 ? len : 1) : NULL;
    if (rc == 0 && buf == NULL)
        rc = ERR_NOMEM;
    if (rc == 0 && fread(buf, 1, len, f) != len)
        rc = ERR_IO;
    fclose(f);
    struct etcdwal_snap sn;
    char why[256] = "";
    if (rc == 0 && etcdwal_snap_decode(buf, len, &sn, why, sizeof why) != 0) {
        log_error(LOG_MOD, "%s: %s", im->path, why);
        rc = ERR_CORRUPT;
    }
    if (rc == 0 && im->n_snaps < IMPORT_SNAPS_MAX)
        im->snaps[im->n_snaps++] = (struct etcdwal_snapshot){sn.index,
                                                             sn.term};
    if (rc == 0) {
        im->snap_index = sn.index;
        rc = import__v2_members(im, sn.store, sn.store_len);
    }
    mem_free(buf);
    return rc;
}

int import__wal_read(struct import *im)
{
    CHECK(im != NULL && im->n_ents == 0);
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/wal", im->src);
    snprintf(im->path, sizeof im->path, "%s", dir);
    struct etcdwal_reader r;
    memset(&r, 0, sizeof r);
    int rc = etcdwal_read_dir(&r, dir, on_record, im);
    if (rc != 0 && r.err[0] != '\0')
        log_error(LOG_MOD, "%s", r.err);
    else if (rc == ERR_NOTFOUND)
        log_error(LOG_MOD, "%s holds no .wal file", dir);
    if (rc == 0 && r.torn)
        log_warn(LOG_MOD, "%s: the last file ends in a torn record at offset "
                 "%" PRIu64 " (a write cut short; etcd drops it too)", dir,
                 r.torn_off);
    if (rc == 0 && (im->node_id == 0 || im->cluster_id == 0)) {
        log_error(LOG_MOD, "%s: no metadata record names the member and "
                  "cluster ids", dir);
        rc = ERR_CORRUPT;
    }
    if (rc == 0)
        rc = snap_read(im);
    CHECK(rc <= 0);
    return rc;
}

uint64_t import__term_at(const struct import *im, uint64_t index)
{
    for (size_t i = im->n_ents; i > 0; i--)
        if (im->ents[i - 1].index == index)
            return im->ents[i - 1].term;
    for (size_t i = im->n_snaps; i > 0; i--)
        if (im->snaps[i - 1].index == index)
            return im->snaps[i - 1].term;
    return 0;
}

/* --- members -------------------------------------------------------------- */

struct server_member_info *import__member_slot(struct import *im,
                                               uint64_t id)
{
    size_t i = 0;
    while (i < im->n_m && im->m[i].id < id)
        i++;
    if (i < im->n_m && im->m[i].id == id)
        return &im->m[i];
    if (im->n_m == SERVER_MEMBERS_MAX)
        return NULL;
    memmove(&im->m[i + 1], &im->m[i], (im->n_m - i) * sizeof im->m[0]);
    memset(&im->m[i], 0, sizeof im->m[0]);
    im->m[i].id = id;
    im->n_m++;
    return &im->m[i];
}

void import__member_remove(struct import *im, uint64_t id)
{
    for (size_t i = 0; i < im->n_m; i++) {
        if (im->m[i].id != id)
            continue;
        memmove(&im->m[i], &im->m[i + 1],
                (im->n_m - i - 1) * sizeof im->m[0]);
        im->n_m--;
        break;
    }
    if (im->n_removed < sizeof im->removed / sizeof im->removed[0])
        im->removed[im->n_removed++] = id;
}

/* A JSON array of strings as a comma list into out (cap bytes). */
static void urls_join(json_object *arr, char *out, size_t cap)
{
    size_t used = 0;
    out[0] = '\0';
    if (arr == NULL || !json_object_is_type(arr, json_type_array))
        return;
    for (size_t i = 0; i < json_object_array_length(arr); i++) {
        const char *u = json_object_get_string(
            json_object_array_get_idx(arr, i));
        int n = snprintf(out + used, cap - used, "%s%s", used ? "," : "",
                         u != NULL ? u : "");
        if (n < 0 || (size_t)n >= cap - used)
            break;
        used += (size_t)n;
    }
}

/* Parses a JSON object (len bytes at p); NULL when it is not one. */
static json_object *json_parse(const uint8_t *p, size_t len)
{
    json_tokener *tok = json_tokener_new();
    if (tok == NULL)
        return NULL;
    json_object *o = json_tokener_parse_ex(tok, (const char *)p, (int)len);
    json_tokener_free(tok);
    if (o != NULL && !json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        o = NULL;
    }
    return o;
}

int import__member_json(const uint8_t *p, size_t len, uint64_t id,
                        struct server_member_info *m)
{
    json_object *o = len < (1u << 20) ? json_parse(p, len) : NULL, *v;
    if (o == NULL)
        return ERR_CORRUPT;
    m->id = id;
    if (json_object_object_get_ex(o, "peerURLs", &v))
        urls_join(v, m->peer_urls, sizeof m->peer_urls);
    if (json_object_object_get_ex(o, "clientURLs", &v))
        urls_join(v, m->client_urls, sizeof m->client_urls);
    if (json_object_object_get_ex(o, "name", &v))
        snprintf(m->name, sizeof m->name, "%s", json_object_get_string(v));
    if (json_object_object_get_ex(o, "isLearner", &v))
        m->is_learner = json_object_get_boolean(v);
    json_object_put(o);
    return 0;
}

/* raftpb.ConfChange: 2 type, 3 node id, 4 context (etcd's Member JSON). */
static int conf_change(struct import *im, const struct import_ent *e)
{
    struct etcdwal_field f;
    size_t pos = 0;
    uint64_t type = 0, id = 0;
    const uint8_t *ctx = NULL;
    size_t ctx_len = 0;
    int rc;
    while ((rc = etcdwal_field_next(e->data, e->len, &pos, &f)) == 0) {
        if (f.num == 2 && f.wt == 0)
            type = f.v;
        else if (f.num == 3 && f.wt == 0)
            id = f.v;
        else if (f.num == 4 && f.wt == 2)
            ctx = f.b, ctx_len = f.blen;
    }
    if (rc != 1 || id == 0 || type > 3)
        return ERR_CORRUPT;
    if (type == 1) {
        import__member_remove(im, id);
        return 0;
    }
    struct server_member_info tmp, *m = import__member_slot(im, id);
    if (m == NULL)
        return ERR_TOO_LARGE;
    tmp = *m;
    if (ctx_len > 0 && import__member_json(ctx, ctx_len, id, &tmp) != 0)
        return ERR_CORRUPT;
    if (type == 2) { /* an update changes the peer URLs only */
        snprintf(m->peer_urls, sizeof m->peer_urls, "%s", tmp.peer_urls);
        return 0;
    }
    *m = tmp;
    m->is_learner = m->is_learner || type == 3;
    return 0;
}

/* The member attributes of etcd 3.4's v2 publish: Request {2 Method "PUT",
 * 3 Path "/0/members/<hex id>/attributes", 4 Val {"name", "clientURLs"}};
 * other v2 requests (the cluster version) change nothing cetcd keeps. */
static int v2_request(struct import *im, const uint8_t *p, size_t len)
{
    struct etcdwal_field f;
    size_t pos = 0;
    char path[128] = "";
    const uint8_t *val = NULL;
    size_t val_len = 0;
    int rc;
    while ((rc = etcdwal_field_next(p, len, &pos, &f)) == 0) {
        if (f.num == 3 && f.wt == 2 && f.blen < sizeof path) {
            memcpy(path, f.b, f.blen);
            path[f.blen] = '\0';
        } else if (f.num == 4 && f.wt == 2) {
            val = f.b, val_len = f.blen;
        }
    }
    if (rc != 1)
        return ERR_CORRUPT;
    char hex[32];
    if (sscanf(path, "/0/members/%31[0-9a-f]/attributes", hex) != 1)
        return 0;
    uint64_t id = strtoull(hex, NULL, 16);
    struct server_member_info tmp, *m = NULL;
    for (size_t i = 0; i < im->n_m; i++)
        if (im->m[i].id == id)
            m = &im->m[i];
    if (m == NULL) /* a member removed since: etcd ignores it too */
        return 0;
    tmp = *m;
    if (import__member_json(val, val_len, id, &tmp) != 0)
        return ERR_CORRUPT;
    snprintf(m->name, sizeof m->name, "%s", tmp.name);
    snprintf(m->client_urls, sizeof m->client_urls, "%s", tmp.client_urls);
    return 0;
}

/* etcd 3.5's ClusterMemberAttrSetRequest {1 member_ID, 2 Attributes {1
 * name, 2 client_urls}}. */
static int member_attr_35(struct import *im, const uint8_t *p, size_t len)
{
    struct etcdwal_field f, g;
    size_t pos = 0, gp;
    uint64_t id = 0;
    char name[64] = "", urls[1024] = "";
    size_t used = 0;
    int rc, rc2 = 1;
    while ((rc = etcdwal_field_next(p, len, &pos, &f)) == 0) {
        if (f.num == 1 && f.wt == 0)
            id = f.v;
        if (f.num != 2 || f.wt != 2)
            continue;
        gp = 0;
        while ((rc2 = etcdwal_field_next(f.b, f.blen, &gp, &g)) == 0) {
            if (g.num == 1 && g.wt == 2)
                snprintf(name, sizeof name, "%.*s", (int)g.blen, g.b);
            else if (g.num == 2 && g.wt == 2 && used + g.blen + 2 < sizeof urls)
                used += (size_t)snprintf(urls + used, sizeof urls - used,
                                         "%s%.*s", used ? "," : "",
                                         (int)g.blen, g.b);
        }
        if (rc2 != 1)
            return ERR_CORRUPT;
    }
    if (rc != 1)
        return ERR_CORRUPT;
    for (size_t i = 0; i < im->n_m; i++) {
        if (im->m[i].id != id)
            continue;
        snprintf(im->m[i].name, sizeof im->m[i].name, "%s", name);
        snprintf(im->m[i].client_urls, sizeof im->m[i].client_urls, "%s",
                 urls);
    }
    return 0;
}

/* Is p a v2 Request (field 2 a method name) rather than an
 * InternalRaftRequest (whose field 2 is a nested v2 Request)? */
static bool is_v2(const uint8_t *p, size_t len)
{
    static const char *const methods[] = {"PUT", "POST", "DELETE", "GET",
                                          "QGET", "SYNC", "HEAD"};
    struct etcdwal_field f;
    size_t pos = 0;
    while (etcdwal_field_next(p, len, &pos, &f) == 0) {
        if (f.num != 2 || f.wt != 2)
            continue;
        for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
            if (f.blen == strlen(methods[i]) &&
                memcmp(f.b, methods[i], f.blen) == 0)
                return true;
    }
    return false;
}

/* The member changes of a normal entry (a v2 publish, 3.5's attributes). */
static int member_entry(struct import *im, const struct import_ent *e)
{
    if (is_v2(e->data, e->len))
        return v2_request(im, e->data, e->len);
    struct etcdwal_field f;
    size_t pos = 0;
    int rc;
    while ((rc = etcdwal_field_next(e->data, e->len, &pos, &f)) == 0) {
        if (f.num == 2 && f.wt == 2)
            rc = v2_request(im, f.b, f.blen);
        else if (f.num == 1301 && f.wt == 2)
            rc = member_attr_35(im, f.b, f.blen);
        if (rc != 0)
            return rc;
    }
    return rc == 1 ? 0 : rc;
}

int import__members_replay(struct import *im)
{
    CHECK(im != NULL && im->m != NULL);
    if (im->snap_index == 0 && im->first_index > 1) {
        log_error(LOG_MOD, "%s: no snap file and the log starts at entry %"
                  PRIu64 ": the members cannot be told", im->path,
                  im->first_index);
        return ERR_IMPORT_UNSUPPORTED;
    }
    for (size_t i = 0; i < im->n_ents; i++) {
        const struct import_ent *e = &im->ents[i];
        if (e->index > im->hs.commit || e->index <= im->snap_index)
            continue;
        int rc = 0;
        if (e->type == 1)
            rc = conf_change(im, e);
        else if (e->type == 0 && e->len > 0)
            rc = member_entry(im, e);
        if (rc == ERR_TOO_LARGE)
            log_error(LOG_MOD, "%s: entry %" PRIu64 " adds a member past "
                      "cetcd's %d", im->path, e->index, SERVER_MEMBERS_MAX);
        else if (rc != 0)
            log_error(LOG_MOD, "%s: entry %" PRIu64 " (a membership change) "
                      "does not decode", im->path, e->index);
        if (rc != 0)
            return rc == ERR_TOO_LARGE ? ERR_IMPORT_UNSUPPORTED : rc;
    }
    return 0;
}

/* --- entries after the consistent index ----------------------------------- */

/* etcd's InternalRaftRequest field -> cetcd's InternalRequest field (the
 * same etcdserverpb message).  0: the entry becomes empty (nothing cetcd
 * keeps: tokens, versions, member attributes applied above; 3.5's
 * AuthStatus (1013), a read it sends through raft, and its cluster version
 * (1300) and downgrade (1302) records). */
static const struct {
    uint32_t etcd, cetcd;
} TRANSLATE[] = {
    {3, 2},       {4, 3},       {5, 4},       {6, 5},       {7, 6},
    {8, 7},       {9, 8},       {10, 9},      {11, 12},     {1000, 40},
    {1011, 41},   {1101, 44},   {1102, 47},   {1104, 46},   {1105, 48},
    {1106, 49},   {1107, 55},   {1200, 50},   {1201, 54},   {1202, 52},
    {1203, 51},   {1204, 53},   {2, 0},       {1012, 0},    {1013, 0},
    {1300, 0},    {1301, 0},    {1302, 0},
};

/* UserAdd and ChangePassword.  etcd 3.4 puts the password in the clear in
 * the log (cetcd's log carries bcrypt hashes only): such an entry is taken
 * as done when the db holds the user (etcd applied it before it stopped),
 * else refused.  etcd 3.5 hashes first and logs the hash
 * (AuthUserAddRequest.hashedPassword = 4, AuthUserChangePasswordRequest.
 * hashedPassword = 3): the entry becomes cetcd's AuthUserAddInternal
 * {1 name, 2 hashed_password, 3 options}, as does a user added without a
 * password (options.no_password; nothing secret) of either version.
 * Applying one again after the db already holds it answers "user name
 * already exists" (UserAdd) or sets the same hash (ChangePassword), as
 * etcd's replay does. */
struct user_req {
    const uint8_t *name, *hash, *opts; /* borrowed from the entry */
    size_t name_len, hash_len, opts_len;
    bool clear;                        /* a password in the clear */
};

static int user_req_decode(const struct etcdwal_field *f, struct user_req *u)
{
    struct etcdwal_field g;
    size_t pos = 0;
    unsigned hash_num = f->num == 1100 ? 4 : 3;
    int rc;
    memset(u, 0, sizeof *u);
    while ((rc = etcdwal_field_next(f->b, f->blen, &pos, &g)) == 0) {
        if (g.wt != 2)
            continue;
        if (g.num == 1)
            u->name = g.b, u->name_len = g.blen;
        else if (g.num == 2)
            u->clear = u->clear || g.blen > 0;
        else if (g.num == hash_num)
            u->hash = g.b, u->hash_len = g.blen;
        else if (g.num == 3 && f->num == 1100)
            u->opts = g.b, u->opts_len = g.blen;
    }
    return rc == 1 ? 0 : rc;
}

static size_t put_bytes(uint8_t *out, uint64_t num, const uint8_t *b,
                        size_t len)
{
    size_t n = varint_put(out, num << 3 | 2);
    n += varint_put(out + n, len);
    if (len > 0)
        memcpy(out + n, b, len);
    return n + len;
}

/* cetcd's field (43 auth_user_add, 45 auth_user_change_password) with
 * AuthUserAddInternal inside, at out: its size. */
static size_t user_internal(const struct etcdwal_field *f,
                            const struct user_req *u, uint8_t *out)
{
    size_t in = (u->name_len ? 1 + varint_len(u->name_len) + u->name_len
                             : 0) +
                (u->hash_len ? 1 + varint_len(u->hash_len) + u->hash_len
                             : 0) +
                (u->opts ? 1 + varint_len(u->opts_len) + u->opts_len : 0);
    size_t n = 0;
    n += varint_put(out + n, (uint64_t)(f->num == 1100 ? 43 : 45) << 3 | 2);
    n += varint_put(out + n, in);
    if (u->name_len)
        n += put_bytes(out + n, 1, u->name, u->name_len);
    if (u->hash_len)
        n += put_bytes(out + n, 2, u->hash, u->hash_len);
    if (u->opts)
        n += put_bytes(out + n, 3, u->opts, u->opts_len);
    return n;
}

static int user_entry(struct import *im, const struct import_ent *e,
                      const struct etcdwal_field *f, uint8_t *out, size_t *n,
                      bool *request, bool *empty)
{
    struct user_req u;
    if (user_req_decode(f, &u) != 0)
        return ERR_CORRUPT;
    if (!u.clear && (u.hash_len > 0 || f->num == 1100)) {
        *n += user_internal(f, &u, out + *n);
        *request = true;
        return 0;
    }
    *empty = true;
    char key[300] = "";
    if (u.name_len > 0 && u.name_len < 250)
        snprintf(key, sizeof key, "user/%.*s", (int)u.name_len, u.name);
    struct backend_txn *txn;
    struct backend_val v;
    int rc = key[0] != '\0' && im->be != NULL
                 ? backend_read_begin(im->be, &txn) : ERR_NOTFOUND;
    if (rc == 0) {
        rc = backend_get(txn, im->b_auth, key, strlen(key), &v);
        backend_read_end(txn);
    }
    if (rc == 0 && f->num == 1100)
        return 0;
    log_error(LOG_MOD, "%s: entry %" PRIu64 " (after the db's consistent "
              "index %" PRIu64 ") %s user \"%s\" with a password in the "
              "clear, which cetcd cannot replay: start etcd on the dir once "
              "more and stop it, then import", im->path, e->index, im->ci,
              f->num == 1100 ? "adds" : "changes the password of",
              key[0] ? key + 5 : "?");
    return ERR_IMPORT_UNSUPPORTED;
}

/* etcd's RequestHeader {2 username, 3 auth_revision} as cetcd's fields
 * 60 and 61. */
static size_t header(const struct etcdwal_field *f, uint8_t *out)
{
    struct etcdwal_field g;
    size_t pos = 0, n = 0;
    while (etcdwal_field_next(f->b, f->blen, &pos, &g) == 0) {
        if (g.num == 2 && g.wt == 2 && g.blen > 0) {
            n += varint_put(out + n, 60u << 3 | 2);
            n += varint_put(out + n, g.blen);
            memcpy(out + n, g.b, g.blen);
            n += g.blen;
        } else if (g.num == 3 && g.wt == 0 && g.v != 0) {
            n += varint_put(out + n, 61u << 3); /* a two-byte key */
            n += varint_put(out + n, g.v);
        }
    }
    return n;
}

static int field_translate(struct import *im, const struct import_ent *e,
                           const struct etcdwal_field *f, uint8_t *out,
                           size_t *n, bool *request, bool *empty)
{
    if (f->num == 1 && f->wt == 0)
        return 0; /* etcd's request id: no waiter here */
    if (f->num == 100 && f->wt == 2) {
        *n += header(f, out + *n);
        return 0;
    }
    if (f->wt == 2 && (f->num == 1100 || f->num == 1103))
        return user_entry(im, e, f, out, n, request, empty);
    for (size_t i = 0; i < sizeof TRANSLATE / sizeof TRANSLATE[0]; i++) {
        if (TRANSLATE[i].etcd != f->num || f->wt != 2)
            continue;
        if (TRANSLATE[i].cetcd == 0) {
            *empty = true;
            return 0;
        }
        *n += varint_put(out + *n, (uint64_t)TRANSLATE[i].cetcd << 3 | 2);
        *n += varint_put(out + *n, f->blen);
        memcpy(out + *n, f->b, f->blen);
        *n += f->blen;
        *request = true;
        return 0;
    }
    log_error(LOG_MOD, "%s: entry %" PRIu64 " holds a request (field %" PRIu64
              ") cetcd cannot import", im->path, e->index, f->num);
    return ERR_IMPORT_UNSUPPORTED;
}

int import__translate(struct import *im, const struct import_ent *e,
                      uint8_t **out, size_t *len_out)
{
    CHECK(im != NULL && e != NULL && e->index > im->ci);
    *out = NULL;
    *len_out = 0;
    if (e->type == 1 && e->index > im->hs.commit) {
        log_error(LOG_MOD, "%s: entry %" PRIu64 " is a membership change "
                  "past the commit index %" PRIu64 ": not importable",
                  im->path, e->index, im->hs.commit);
        return ERR_IMPORT_UNSUPPORTED;
    }
    if (e->type != 0 || e->len == 0 || is_v2(e->data, e->len))
        return e->type <= 1 ? 0 : ERR_IMPORT_UNSUPPORTED;
    /* The output may be longer than the entry: a header's fields get
     * two-byte keys (60, 61) where etcd's have one-byte keys (2, 3), and
     * a header may repeat them, so a two-byte auth_revision becomes three.
     * Every other translation keeps or shortens its field's size, so half
     * the entry again bounds the growth. */
    size_t cap = e->len + e->len / 2 + 64;
    uint8_t *buf = mem_malloc(cap);
    if (buf == NULL)
        return ERR_NOMEM;
    struct etcdwal_field f;
    size_t pos = 0, n = 0;
    bool request = false, empty = false;
    int rc;
    while ((rc = etcdwal_field_next(e->data, e->len, &pos, &f)) == 0) {
        rc = field_translate(im, e, &f, buf, &n, &request, &empty);
        if (rc != 0)
            break;
    }
    if (rc == ERR_CORRUPT)
        log_error(LOG_MOD, "%s: entry %" PRIu64 " does not decode", im->path,
                  e->index);
    CHECK(n <= cap);
    if (rc != 1 || empty || !request) {
        mem_free(buf);
        return rc == 1 ? 0 : rc;
    }
    *out = buf;
    *len_out = n;
    im->translated++;
    return 0;
}

/* --- the v2 store of a snap file ------------------------------------------
 * etcd 3.4 keeps the members in its v2 store, saved as JSON in the snap
 * file: {"Root": {"Children": {"0": {"Children": {"members": {"Children":
 * {"<hex id>": {"Children": {"raftAttributes": {"Value": "<JSON>"},
 * "attributes": {"Value": "<JSON>"}}}}}, "removed_members": {"Children":
 * {"<hex id>": ...}}}}}}}.  The members etcd starts from are these, then
 * the log's changes after the snapshot. */

static json_object *child(json_object *node, const char *name)
{
    json_object *c, *v;
    if (node == NULL || !json_object_object_get_ex(node, "Children", &c) ||
        !json_object_is_type(c, json_type_object) ||
        !json_object_object_get_ex(c, name, &v))
        return NULL;
    return v;
}

static int v2_member(struct import *im, const char *hex, json_object *node)
{
    char *end;
    uint64_t id = strtoull(hex, &end, 16);
    if (*end != '\0' || id == 0)
        return ERR_CORRUPT;
    struct server_member_info *m = import__member_slot(im, id);
    if (m == NULL)
        return ERR_TOO_LARGE;
    static const char *const parts[] = {"raftAttributes", "attributes"};
    for (size_t i = 0; i < 2; i++) {
        json_object *v, *a = child(node, parts[i]);
        if (a == NULL || !json_object_object_get_ex(a, "Value", &v))
            continue;
        const char *s = json_object_get_string(v);
        if (s != NULL && s[0] != '\0' &&
            import__member_json((const uint8_t *)s, strlen(s), id, m) != 0)
            return ERR_CORRUPT;
    }
    return 0;
}

int import__v2_members(struct import *im, const uint8_t *p, size_t len)
{
    CHECK(im != NULL && im->m != NULL);
    json_object *o = json_parse(p, len), *root;
    int rc = o != NULL && json_object_object_get_ex(o, "Root", &root)
                 ? 0 : ERR_CORRUPT;
    json_object *zero = rc == 0 ? child(root, "0") : NULL;
    json_object *ms = child(zero, "members"), *rm = child(zero,
                                                           "removed_members");
    json_object *c;
    if (rc == 0 && ms != NULL && json_object_object_get_ex(ms, "Children", &c)
        && json_object_is_type(c, json_type_object)) {
        json_object_object_foreach(c, k, v) {
            if (rc == 0)
                rc = v2_member(im, k, v);
        }
    }
    if (rc == 0 && rm != NULL && json_object_object_get_ex(rm, "Children", &c)
        && json_object_is_type(c, json_type_object)) {
        json_object_object_foreach(c, k, v) {
            (void)v;
            uint64_t id = strtoull(k, NULL, 16);
            if (id != 0 && im->n_removed < 256)
                im->removed[im->n_removed++] = id;
        }
    }
    if (o != NULL)
        json_object_put(o);
    if (rc != 0)
        log_error(LOG_MOD, "%s: the v2 store's members do not decode",
                  im->path);
    return rc;
}
