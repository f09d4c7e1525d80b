/*
 * print_rows.c - the tables etcdctl builds for member list, endpoint
 * health/status/hashkv and snapshot status (printer.go make*Table), and
 * their two renderings: -w table (ctl_table_print) and the simple
 * printer's one line per row, cells joined by ", ".
 *
 * A grid owns every cell string (mem_ allocations), so one free serves.
 */
#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

#include "ctl/print.h"
#include "util/err.h"
#include "util/mem.h"

/* The cells of a table being built, row by row. */
struct grid {
    size_t ncols; /* cells per row */
    size_t nrows; /* rows the cells array has room for */
    size_t n;     /* cells filled */
    char **cells; /* nrows * ncols owned strings; NULL where it failed */
    bool nomem;   /* an allocation failed */
};

static int grid_init(struct grid *g, size_t ncols, size_t nrows)
{
    memset(g, 0, sizeof *g);
    g->ncols = ncols;
    g->nrows = nrows;
    g->cells =
        mem_calloc(ncols * nrows > 0 ? ncols * nrows : 1, sizeof *g->cells);
    return g->cells != NULL ? 0 : ERR_NOMEM;
}

static void grid_free(struct grid *g)
{
    for (size_t i = 0; i < g->n; i++)
        mem_free(g->cells[i]);
    mem_free(g->cells);
}

/* add appends a cell formatted as printf does. */
__attribute__((format(printf, 2, 3))) static void add(struct grid *g,
                                                      const char *fmt, ...)
{
    va_list ap;
    char small[1];
    assert(g->n < g->ncols * g->nrows);
    va_start(ap, fmt);
    int len = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    char *s = len >= 0 ? mem_malloc((size_t)len + 1) : NULL;
    if (s != NULL) {
        va_start(ap, fmt);
        vsnprintf(s, (size_t)len + 1, fmt, ap);
        va_end(ap);
    }
    g->nomem |= s == NULL;
    g->cells[g->n++] = s;
}

/* add_join appends the n strings of v joined by sep (strings.Join). */
static void add_join(struct grid *g, char *const *v, size_t n, const char *sep)
{
    size_t len = 1, at = 0, seplen = strlen(sep);
    assert(g->n < g->ncols * g->nrows);
    for (size_t i = 0; i < n; i++)
        len += strlen(v[i]) + seplen;
    char *s = mem_malloc(len);
    for (size_t i = 0; s != NULL && i < n; i++) {
        size_t k = strlen(v[i]);
        if (i > 0) {
            memcpy(s + at, sep, seplen);
            at += seplen;
        }
        memcpy(s + at, v[i], k);
        at += k;
    }
    if (s != NULL)
        s[at] = '\0';
    g->nomem |= s == NULL;
    g->cells[g->n++] = s;
}

/* grid_print writes the grid as a table under hdr, or as simple lines. */
static int grid_print(FILE *f, struct grid *g, const char *const *hdr,
                      bool table)
{
    int rc = 0;
    assert(g->n == g->ncols * g->nrows || g->nomem);
    if (g->nomem) {
        rc = ERR_NOMEM;
    } else if (table) {
        rc = ctl_table_print(f, hdr, g->ncols, (const char *const *)g->cells,
                             g->nrows);
    } else {
        for (size_t r = 0; r < g->nrows; r++) {
            for (size_t c = 0; c < g->ncols; c++)
                fprintf(f, "%s%s", c > 0 ? ", " : "",
                        g->cells[r * g->ncols + c]);
            fputc('\n', f);
        }
        rc = ferror(f) ? ERR_IO : 0;
    }
    grid_free(g);
    return rc;
}

static const char *tf(bool b)
{
    return b ? "true" : "false";
}

int ctl_rows_member_list(FILE *f, const Etcdserverpb__MemberListResponse *r,
                         bool table)
{
    static const char *const hdr[] = {
        "ID", "Status", "Name", "Peer Addrs", "Client Addrs", "Is Learner"};
    size_t n = r != NULL ? r->n_members : 0;
    struct grid g;
    if (grid_init(&g, 6, n) != 0)
        return ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        const Etcdserverpb__Member *m = r->members[i];
        const char *name = m->name != NULL ? m->name : "";
        add(&g, "%" PRIx64, m->id);
        add(&g, "%s", name[0] != '\0' ? "started" : "unstarted");
        add(&g, "%s", name);
        add_join(&g, m->peerurls, m->n_peerurls, ",");
        add_join(&g, m->clienturls, m->n_clienturls, ",");
        add(&g, "%s", tf(m->islearner));
    }
    return grid_print(f, &g, hdr, table);
}

int ctl_rows_endpoint_health(FILE *f, const struct ctl_ep_health *v, size_t n,
                             bool table)
{
    static const char *const hdr[] = {"endpoint", "health", "took", "error"};
    struct grid g;
    assert(v != NULL || n == 0);
    if (grid_init(&g, 4, n) != 0)
        return ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        add(&g, "%s", v[i].ep != NULL ? v[i].ep : "");
        add(&g, "%s", tf(v[i].health));
        add(&g, "%s", v[i].took != NULL ? v[i].took : "");
        add(&g, "%s", v[i].error != NULL ? v[i].error : "");
    }
    return grid_print(f, &g, hdr, table);
}

static void status_row(struct grid *g, const char *ep,
                       const Etcdserverpb__StatusResponse *s)
{
    static const Etcdserverpb__StatusResponse zero =
        ETCDSERVERPB__STATUS_RESPONSE__INIT;
    char size[CTL_HUMAN_MAX];
    uint64_t id;
    if (s == NULL)
        s = &zero; /* etcdctl would crash on a nil answer */
    id = s->header != NULL ? s->header->member_id : 0;
    add(g, "%s", ep != NULL ? ep : "");
    add(g, "%" PRIx64, id);
    add(g, "%s", s->version != NULL ? s->version : "");
    add(g, "%s", ctl_humanize_bytes(size, sizeof size, (uint64_t)s->dbsize));
    add(g, "%s", tf(s->leader == id));
    add(g, "%s", tf(s->islearner));
    add(g, "%" PRIu64, s->raftterm);
    add(g, "%" PRIu64, s->raftindex);
    add(g, "%" PRIu64, s->raftappliedindex);
    add_join(g, s->errors, s->n_errors, ", ");
}

int ctl_rows_endpoint_status(FILE *f, const struct ctl_ep_status *v, size_t n,
                             bool table)
{
    static const char *const hdr[] = {
        "endpoint",           "ID",         "version",   "db size",
        "is leader",          "is learner", "raft term", "raft index",
        "raft applied index", "errors"};
    struct grid g;
    assert(v != NULL || n == 0);
    if (grid_init(&g, 10, n) != 0)
        return ERR_NOMEM;
    for (size_t i = 0; i < n; i++)
        status_row(&g, v[i].ep, v[i].resp);
    return grid_print(f, &g, hdr, table);
}

int ctl_rows_endpoint_hashkv(FILE *f, const struct ctl_ep_hashkv *v, size_t n,
                             bool table)
{
    static const char *const hdr[] = {"endpoint", "hash"};
    struct grid g;
    assert(v != NULL || n == 0);
    if (grid_init(&g, 2, n) != 0)
        return ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        add(&g, "%s", v[i].ep != NULL ? v[i].ep : "");
        add(&g, "%" PRIu32, v[i].resp != NULL ? v[i].resp->hash : 0);
    }
    return grid_print(f, &g, hdr, table);
}

int ctl_rows_db_status(FILE *f, const struct ctl_db_status *s, bool table)
{
    static const char *const hdr[] = {"hash", "revision", "total keys",
                                      "total size"};
    static const struct ctl_db_status zero;
    char size[CTL_HUMAN_MAX];
    struct grid g;
    if (s == NULL)
        s = &zero;
    if (grid_init(&g, 4, 1) != 0)
        return ERR_NOMEM;
    add(&g, "%" PRIx32, s->hash);
    add(&g, "%" PRId64, s->revision);
    add(&g, "%" PRId64, s->total_key);
    add(&g, "%s",
        ctl_humanize_bytes(size, sizeof size, (uint64_t)s->total_size));
    return grid_print(f, &g, hdr, table);
}
