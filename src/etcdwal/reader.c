/*
 * reader.c - etcd's WAL (etcdwal.h): frames, the CRC chain, records and
 * their payloads.  Every length and offset from the file is checked
 * against the bytes there before use; nothing asserts on file input.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "etcdwal/etcdwal.h"
#include "etcdwal/etcdwal_int.h"
#include "util/check.h"
#include "util/crc32c.h"
#include "util/err.h"
#include "util/mem.h"

static int corrupt(struct etcdwal_reader *r, const char *name, uint64_t off,
                   const char *fmt, ...)
{
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(r->err, sizeof r->err, "etcd wal %.120s: %s (offset %llu)",
             name, what, (unsigned long long)off);
    return ERR_CORRUPT;
}

/* --- protobuf fields ------------------------------------------------------ */

int etcdwal__varint(const uint8_t *p, size_t len, size_t *pos, uint64_t *out)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (*pos >= len)
            return ERR_CORRUPT;
        uint8_t c = p[(*pos)++];
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return ERR_CORRUPT;
}

/* The next field at *pos; 1 at the end, 0, or ERR_CORRUPT. */
int etcdwal_field_next(const uint8_t *p, size_t len, size_t *pos,
                        struct etcdwal_field *f)
{
    if (*pos >= len)
        return 1;
    uint64_t tag;
    if (etcdwal__varint(p, len, pos, &tag) != 0 || tag >> 3 == 0)
        return ERR_CORRUPT;
    f->num = tag >> 3;
    f->wt = tag & 7;
    switch (f->wt) {
    case 0:
        return etcdwal__varint(p, len, pos, &f->v);
    case 1:
    case 5: {
        size_t n = f->wt == 1 ? 8 : 4;
        if (len - *pos < n)
            return ERR_CORRUPT;
        f->v = 0;
        for (size_t i = n; i > 0; i--)
            f->v = f->v << 8 | p[*pos + i - 1];
        *pos += n;
        return 0;
    }
    case 2:
        if (etcdwal__varint(p, len, pos, &f->v) != 0 || f->v > len - *pos)
            return ERR_CORRUPT;
        f->b = p + *pos;
        f->blen = (size_t)f->v;
        *pos += f->blen;
        return 0;
    default:
        return ERR_CORRUPT;
    }
}

/* Decodes varint fields 1..n into v[0..n) (others skipped). */
static int varints(const uint8_t *p, size_t len, uint64_t *v, unsigned n)
{
    size_t pos = 0;
    struct etcdwal_field f;
    int rc;
    memset(v, 0, n * sizeof *v);
    while ((rc = etcdwal_field_next(p, len, &pos, &f)) == 0) {
        if (f.num >= 1 && f.num <= n) {
            if (f.wt != 0)
                return ERR_CORRUPT;
            v[f.num - 1] = f.v;
        }
    }
    return rc == 1 ? 0 : rc;
}

int etcdwal_entry_decode(const uint8_t *p, size_t len,
                         struct etcdwal_entry *out)
{
    CHECK(out != NULL && (p != NULL || len == 0));
    memset(out, 0, sizeof *out);
    size_t pos = 0;
    struct etcdwal_field f;
    int rc;
    while ((rc = etcdwal_field_next(p, len, &pos, &f)) == 0) {
        if (f.num == 4) {
            if (f.wt != 2)
                return ERR_CORRUPT;
            out->data = f.b;
            out->len = f.blen;
        } else if (f.num >= 1 && f.num <= 3) {
            if (f.wt != 0)
                return ERR_CORRUPT;
            uint64_t *dst[] = {&out->type, &out->term, &out->index};
            *dst[f.num - 1] = f.v;
        }
    }
    return rc == 1 ? 0 : rc;
}

int etcdwal_state_decode(const uint8_t *p, size_t len,
                         struct etcdwal_state *out)
{
    CHECK(out != NULL);
    uint64_t v[3];
    int rc = varints(p, len, v, 3);
    *out = (struct etcdwal_state){v[0], v[1], v[2]};
    return rc;
}

int etcdwal_snapshot_decode(const uint8_t *p, size_t len,
                            struct etcdwal_snapshot *out)
{
    CHECK(out != NULL);
    uint64_t v[2];
    int rc = varints(p, len, v, 2);
    *out = (struct etcdwal_snapshot){v[0], v[1]};
    return rc;
}

int etcdwal_metadata_decode(const uint8_t *p, size_t len,
                            struct etcdwal_metadata *out)
{
    CHECK(out != NULL);
    uint64_t v[2];
    int rc = varints(p, len, v, 2);
    *out = (struct etcdwal_metadata){v[0], v[1]};
    return rc;
}

/* walpb.Record. */
static int record_decode(const uint8_t *p, size_t len,
                         struct etcdwal_record *out)
{
    size_t pos = 0;
    struct etcdwal_field f = {0};
    int rc;
    out->type = 0;
    out->crc = 0;
    out->data = NULL;
    out->len = 0;
    while ((rc = etcdwal_field_next(p, len, &pos, &f)) == 0) {
        if (f.num == 1 && f.wt == 0)
            out->type = (int64_t)f.v;
        else if (f.num == 2 && f.wt == 0 && f.v <= UINT32_MAX)
            out->crc = (uint32_t)f.v;
        else if (f.num == 3 && f.wt == 2) {
            out->data = f.b;
            out->len = f.blen;
        } else if (f.num <= 3)
            return ERR_CORRUPT;
    }
    return rc == 1 ? 0 : rc;
}

/* --- frames --------------------------------------------------------------- */

/* Checks one decoded record against the chain; updates it. */
static int chain(struct etcdwal_reader *r, const struct etcdwal_record *rec)
{
    if (rec->type < ETCDWAL_METADATA || rec->type > ETCDWAL_SNAPSHOT)
        return ERR_CORRUPT;
    if (rec->type == ETCDWAL_CRC) {
        if (r->crc != 0 && rec->crc != r->crc)
            return ERR_CORRUPT;
        r->crc = rec->crc;
        return 0;
    }
    uint32_t c = crc32c_extend(r->crc, rec->data, rec->len);
    if (c != rec->crc)
        return ERR_CORRUPT;
    r->crc = c;
    return 0;
}

/* etcd's isTornEntry: the frame [from, to) of the file was torn by a
 * crash when one of its pieces between 512-byte sector boundaries is all
 * zeros (a sector the write never reached). */
static bool torn(const uint8_t *buf, uint64_t from, uint64_t to)
{
    for (uint64_t a = from; a < to;) {
        uint64_t b = (a / 512 + 1) * 512;
        if (b > to)
            b = to;
        bool zero = true;
        for (uint64_t i = a; i < b && zero; i++)
            zero = buf[i] == 0;
        if (zero)
            return true;
        a = b;
    }
    return false;
}

int etcdwal_read_mem(struct etcdwal_reader *r, const char *name,
                     const uint8_t *buf, size_t len, bool last, etcdwal_fn fn,
                     void *arg)
{
    CHECK(r != NULL && name != NULL && fn != NULL);
    CHECK(buf != NULL || len == 0);
    uint64_t off = 0;
    while (len - off >= 8) {
        uint64_t l = 0;
        for (int i = 7; i >= 0; i--)
            l = l << 8 | buf[off + i];
        if (l == 0)
            return 0; /* the preallocated tail */
        uint64_t n = l & ~((uint64_t)0xff << 56);
        uint64_t pad = (l >> 63) ? (l >> 56) & 7 : 0;
        if (n >= ETCDWAL_RECORD_MAX - pad)
            return corrupt(r, name, off, "record of %llu bytes",
                           (unsigned long long)n);
        struct etcdwal_record rec;
        bool cut = n + pad > len - off - 8;
        int rc = cut ? ERR_CORRUPT
                     : record_decode(buf + off + 8, (size_t)n, &rec);
        if (rc == 0)
            rc = chain(r, &rec);
        if (rc != 0 && last && (cut || torn(buf, off, off + 8 + n + pad))) {
            /* A torn write at the end of the log (etcd's isTornEntry): a
             * bit flip in a whole record is corruption, not a tear. */
            r->torn = true;
            r->torn_off = off;
            return 0;
        }
        if (rc != 0)
            return corrupt(r, name, off, cut ? "record cut short"
                                             : "bad record or crc");
        rec.off = off;
        if ((rc = fn(arg, &rec)) != 0)
            return rc;
        off += 8 + n + pad;
    }
    if (off != len && !last)
        return corrupt(r, name, off, "%llu stray bytes at the end",
                       (unsigned long long)(len - off));
    return 0;
}

/* --- a directory ---------------------------------------------------------- */

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The .wal names of dir, sorted (free each and the array). */
static int list(const char *dir, char ***out, size_t *n_out)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return errno == ENOENT ? ERR_NOTFOUND : ERR_IO;
    char **v = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 4, ".wal") != 0)
            continue;
        char **g = mem_grow(v, &cap, n, sizeof *v, 8);
        char *s = g != NULL ? mem_dup(e->d_name, l + 1) : NULL;
        if (g != NULL)
            v = g;
        if (s == NULL)
            rc = ERR_NOMEM;
        else
            v[n++] = s;
    }
    closedir(d);
    if (rc == 0 && n == 0)
        rc = ERR_NOTFOUND;
    if (rc == 0)
        qsort(v, n, sizeof *v, name_cmp);
    *out = v;
    *n_out = n;
    return rc;
}

static int read_file(struct etcdwal_reader *r, const char *dir,
                     const char *name, bool last, etcdwal_fn fn, void *arg)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ERR_IO;
    struct stat st;
    int rc = fstat(fd, &st) == 0 ? 0 : ERR_IO;
    void *map = NULL;
    size_t len = rc == 0 ? (size_t)st.st_size : 0;
    if (rc == 0 && len > 0) {
        map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        rc = map == MAP_FAILED ? ERR_IO : 0;
    }
    close(fd);
    if (rc == 0)
        rc = etcdwal_read_mem(r, path, len ? map : NULL, len, last, fn, arg);
    if (map != NULL && map != MAP_FAILED)
        munmap(map, len);
    return rc;
}

int etcdwal_read_dir(struct etcdwal_reader *r, const char *dir, etcdwal_fn fn,
                     void *arg)
{
    CHECK(r != NULL && dir != NULL && fn != NULL);
    char **names = NULL;
    size_t n = 0;
    int rc = list(dir, &names, &n);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = read_file(r, dir, names[i], i + 1 == n, fn, arg);
    for (size_t i = 0; i < n; i++)
        mem_free(names[i]);
    mem_free(names);
    return rc;
}
