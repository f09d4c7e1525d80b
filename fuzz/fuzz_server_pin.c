/*
 * fuzz_server_pin.c - goal: what a member reads back of its store pins
 * (src/server/snap_pin.c: the <member>/snap/<index>.pin files, whose
 * saved meta pages a power-loss rebuild writes over the head of
 * data.mdb) never crashes it, leaks or trips a sanitizer, whatever the
 * bytes; bad bytes are an error (ERR_CORRUPT, the result zeroed), never
 * an assert; and a pin it accepts is exactly what the layout in
 * snap_pin.c's header says: 48 header bytes, meta_len bytes of meta
 * pages, a CRC-32C of all before it, nothing more; the fields returned
 * are the header's, the meta bytes the file's; meta_len is two pages of
 * a size LMDB has (a power of two, 512..64 KiB) and the newer valid meta
 * page is the pinned txn id's and says that page size.  Re-encoding an
 * accepted pin by that layout gives the input back (one encoding per
 * pin), and the directory reader server__pin_file_read takes the same
 * pin under its own index's name and none under another's (an error).
 * And the real encoder (server__pin_locked, on a real store) writes a
 * pin the decoder gives back as the pin it took: decode(encode(x)) == x.
 *
 * Method: each input is written as a pin file in a scratch member dir
 * (in /dev/shm when there is one, see fuzz_dir.h), named after the index
 * its header holds, and read with the real server__pin_decode; the
 * checks above use their own CRC-32C and field readers, not the
 * decoder's.  Then the same again with the input's last 4 bytes replaced
 * by the CRC of the others (when that changes them), so that mutations
 * reach what the decoder checks behind the CRC.  At start-up a real LMDB
 * store with a few committed batches is pinned by server__pin_locked for
 * a struct server with the few fields it uses (store, mvcc, member dir,
 * the snapshot mutex), and its pin file decoded and compared with the
 * pin held and the store's file.
 *
 * Input: the pin file's bytes.  Seeds: fuzz/corpus/server_pin:
 * real-7-puts, written by this target run with CETCD_FUZZ_PIN_SEED=<file>
 * (the real encoder's pin of that store, 4 KiB pages), and
 * small-512-pages, the same cut to two 512-byte pages that say so.
 * (This target found that backend_meta_check took pages of any even
 * size and a meta page whose own mm_psize disagreed: fixed; the
 * reproducers are in the corpus, page-size-1000 and psize-field-mismatch.)
 */
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/backend.h"
#include "fuzz_dir.h"
#include "mvcc/mvcc.h"
#include "server/server_int.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"

/* The layout (snap_pin.c's header) and LMDB 0.9's meta page (lmdb.h's
 * MDB_meta after the 16-byte page header; backend_snap.c). */
#define HDR 48u
#define META_MAX (2u * 65536u)
#define PAGE_MIN 512u
#define LMDB_MAGIC 0xBEEFC0DEu
#define OFF_MAGIC 16u
#define OFF_PSIZE 40u /* mm_dbs[FREE_DBI].md_pad: mm_psize */
#define OFF_TXNID 144u

static void check(int cond)
{
    if (!cond)
        abort();
}

static char dir[128], member_dir[160], snap_dir[192];
static struct server *srv; /* member_dir only, for server__pin_file_read */

static uint64_t le(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;)
        v = v << 8 | p[i];
    return v;
}

static void put_le(uint8_t *p, uint64_t v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* CRC-32C, reflected polynomial 0x82F63B78, table-driven (not util's). */
static uint32_t crc_tab[256];

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? c >> 1 ^ 0x82F63B78u : c >> 1;
        crc_tab[i] = c;
    }
    check(crc_tab[1] == 0xF26B8303u);
}

static uint32_t crc(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++)
        c = crc_tab[(c ^ p[i]) & 0xff] ^ c >> 8;
    return c ^ 0xFFFFFFFFu;
}

/* encode: pf as the layout has it, into a malloc'd *out (*n bytes). */
static void encode(const struct server_pin_file *pf, uint8_t **out, size_t *n)
{
    *n = HDR + pf->meta_len + 4;
    uint8_t *b = malloc(*n);
    check(b != NULL);
    memcpy(b, "CETCDPIN", 8);
    put_le(b + 8, 1, 4);
    put_le(b + 12, pf->meta_len, 4);
    put_le(b + 16, pf->index, 8);
    put_le(b + 24, pf->txnid, 8);
    put_le(b + 32, pf->dev, 8);
    put_le(b + 40, pf->ino, 8);
    memcpy(b + HDR, pf->meta, pf->meta_len);
    put_le(b + HDR + pf->meta_len, crc(b, HDR + pf->meta_len), 4);
    *out = b;
}

static void file_write(const char *path, const uint8_t *p, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    check(fd >= 0);
    check(n == 0 || write(fd, p, n) == (ssize_t)n);
    check(close(fd) == 0);
}

static void pin_name(uint64_t index, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/%016" PRIx64 ".pin", snap_dir, index);
}

static bool zeroed(const struct server_pin_file *pf)
{
    return pf->index == 0 && pf->txnid == 0 && pf->dev == 0 &&
           pf->ino == 0 && pf->meta == NULL && pf->meta_len == 0;
}

static bool same_pin(const struct server_pin_file *a,
                     const struct server_pin_file *b)
{
    return a->index == b->index && a->txnid == b->txnid &&
           a->dev == b->dev && a->ino == b->ino &&
           a->meta_len == b->meta_len &&
           memcmp(a->meta, b->meta, a->meta_len) == 0;
}

/* accepted_check: pf, which server__pin_decode gave for the n bytes at p,
 * is what the layout says of them. */
static void accepted_check(const struct server_pin_file *pf, const uint8_t *p,
                           size_t n)
{
    /* Sizes: the header, meta_len bytes, the CRC, nothing after. */
    check(n >= HDR + 4 && n <= HDR + META_MAX + 4);
    check(pf->meta != NULL && pf->meta_len == n - HDR - 4);
    check(memcmp(p, "CETCDPIN", 8) == 0 && le(p + 8, 4) == 1);
    check(le(p + 12, 4) == pf->meta_len);
    check(le(p + 16, 8) == pf->index && le(p + 24, 8) == pf->txnid);
    check(le(p + 32, 8) == pf->dev && le(p + 40, 8) == pf->ino);
    check(memcmp(pf->meta, p + HDR, pf->meta_len) == 0);
    check(le(p + n - 4, 4) == crc(p, n - 4));
    /* Two meta pages of a size LMDB has. */
    size_t ps = pf->meta_len / 2;
    check(pf->meta_len % 2 == 0 && ps >= PAGE_MIN && ps <= 65536);
    check((ps & (ps - 1)) == 0);
    /* The newer page with LMDB's magic is the pinned txn's. */
    const uint8_t *newer = NULL;
    for (size_t i = 0; i < 2; i++) {
        const uint8_t *m = pf->meta + i * ps;
        if (le(m + OFF_MAGIC, 4) != LMDB_MAGIC)
            continue;
        if (newer == NULL || le(m + OFF_TXNID, 8) > le(newer + OFF_TXNID, 8))
            newer = m;
    }
    check(newer != NULL && le(newer + OFF_TXNID, 8) == pf->txnid);
    check(le(newer + OFF_PSIZE, 4) == ps);
    /* One encoding per pin: the layout's bytes of pf are the input. */
    uint8_t *again;
    size_t n_again;
    encode(pf, &again, &n_again);
    check(n_again == n && memcmp(again, p, n) == 0);
    free(again);
}

/* --- the real encoder's round trip (start-up) ---------------------------- */

static struct server *member_new(void)
{
    struct server *s = calloc(1, sizeof *s);
    check(s != NULL);
    snprintf(s->member_dir, sizeof s->member_dir, "%s", member_dir);
    check(pthread_mutex_init(&s->snap.mu, NULL) == 0);
    return s;
}

static void member_free(struct server *s)
{
    pthread_mutex_destroy(&s->snap.mu);
    free(s);
}

/* A real store with a few committed batches up to consistent index 7,
 * pinned by server__pin_locked; its pin file is decoded and compared with
 * the pin held.  seed_path: the pin file is also copied there. */
static void real_round_trip(const char *seed_path)
{
    char db[192];
    snprintf(db, sizeof db, "%s/db", dir);
    struct server *s = member_new();
    struct backend_options o = {.map_size_bytes = 64 << 20, .no_fsync = true};
    check(backend_open(db, &o, &s->be) == 0);
    check(mvcc_store_open(s->be, NULL, &s->mvcc) == 0);
    for (uint64_t i = 1; i <= 7; i++) {
        struct mvcc_batch *b;
        char key[16], val[32];
        snprintf(key, sizeof key, "k%" PRIu64, i);
        snprintf(val, sizeof val, "value %" PRIu64, i);
        check(mvcc_batch_begin(s->mvcc, &b) == 0);
        struct mvcc_txn *t = mvcc_txn_begin(b);
        check(mvcc_txn_put(t, key, strlen(key), val, strlen(val), 0, 0,
                           NULL) == 0);
        mvcc_txn_end(t);
        check(mvcc_batch_commit(b, i) == 0);
    }
    check(server__pin_locked(s) == 0);
    const struct backend_pin *held = &s->snap.pin;
    check(s->snap.pin_index == 7 && held->txn != NULL);
    uint64_t dev, ino;
    check(backend_file_id(s->be, &dev, &ino) == 0);
    check(backend_txnid(s->be) == held->txnid);

    char path[256];
    pin_name(7, path, sizeof path);
    struct server_pin_file pf, listed;
    check(server__pin_decode(path, &pf) == 0);
    check(pf.index == 7 && pf.txnid == held->txnid);
    check(pf.dev == dev && pf.ino == ino);
    check(pf.meta_len == held->meta_len &&
          memcmp(pf.meta, held->meta, pf.meta_len) == 0);
    check(server__pin_file_read(srv, &listed) == 0 && same_pin(&pf, &listed));
    mem_free(listed.meta);

    /* The file is the layout's bytes of it, and passes every check. */
    FILE *f = fopen(path, "rb");
    check(f != NULL);
    static uint8_t buf[HDR + META_MAX + 8];
    size_t n = fread(buf, 1, sizeof buf, f);
    check(fclose(f) == 0);
    accepted_check(&pf, buf, n);
    mem_free(pf.meta);
    if (seed_path != NULL) {
        FILE *o2 = fopen(seed_path, "wb");
        check(o2 != NULL && fwrite(buf, 1, n, o2) == n && fclose(o2) == 0);
    }

    check(server__pin_forget(s) == 0); /* ends the read txn, removes it */
    check(access(path, F_OK) != 0);
    mvcc_store_close(s->mvcc);
    backend_close(s->be);
    member_free(s);
}

static void init(void)
{
    log_set_level(LOG_FATAL);
    crc_init();
    check(fuzz_dir_make("server_pin", dir, sizeof dir));
    snprintf(member_dir, sizeof member_dir, "%s/member", dir);
    snprintf(snap_dir, sizeof snap_dir, "%s/snap", member_dir);
    check(mkdir(member_dir, 0700) == 0 && mkdir(snap_dir, 0700) == 0);
    srv = member_new();
    /* A missing file is an I/O error, not a crash. */
    struct server_pin_file pf;
    char path[256];
    pin_name(0, path, sizeof path);
    check(server__pin_decode(path, &pf) != 0 && zeroed(&pf));
    check(server__pin_file_read(srv, &pf) == ERR_NOTFOUND);
    const char *seed = getenv("CETCD_FUZZ_PIN_SEED");
    real_round_trip(seed != NULL && *seed != '\0' ? seed : NULL);
    if (seed != NULL && *seed != '\0') {
        fuzz_dir_rm(dir);
        _exit(0); /* libFuzzer takes exit() for a crash */
    }
}

/* pin_one: the checks of the n bytes at data as a pin file. */
static void pin_one(const uint8_t *data, size_t size)
{
    /* Named after the index it holds, as the writer names it. */
    uint64_t index = size >= 24 ? le(data + 16, 8) : 0;
    char path[256], other[256];
    pin_name(index, path, sizeof path);
    file_write(path, data, size);

    struct server_pin_file pf, listed;
    int rc = server__pin_decode(path, &pf);
    if (rc != 0) {
        check(rc == ERR_CORRUPT || rc == ERR_NOMEM);
        check(zeroed(&pf));
    } else {
        accepted_check(&pf, data, size);
    }
    /* The dir reader takes it under its own name, and only there.  With
     * no valid pin it gives the last file's error (ERR_CORRUPT for one
     * under another index's name), not the ERR_NOTFOUND server_int.h
     * says; its one caller, server__pin_restore, takes any error so. */
    int lrc = server__pin_file_read(srv, &listed);
    check(rc == 0 ? lrc == 0 : lrc == rc);
    if (lrc == 0)
        check(same_pin(&pf, &listed));
    else
        check(zeroed(&listed));
    mem_free(listed.meta);
    pin_name(index ^ 1, other, sizeof other);
    check(rename(path, other) == 0);
    lrc = server__pin_file_read(srv, &listed);
    check(lrc == (rc == 0 ? ERR_CORRUPT : rc) && zeroed(&listed));
    check(unlink(other) == 0);
    mem_free(pf.meta);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (srv == NULL)
        init();
    pin_one(data, size);
    /* And the input with its last 4 bytes the CRC of the others: mutated
     * bytes reach the checks behind the CRC. */
    if (size >= HDR + 4 && size <= HDR + META_MAX + 4) {
        static uint8_t fixed[HDR + META_MAX + 4];
        memcpy(fixed, data, size);
        put_le(fixed + size - 4, crc(fixed, size - 4), 4);
        if (memcmp(fixed + size - 4, data + size - 4, 4) != 0)
            pin_one(fixed, size);
    }
    return 0;
}
