/*
 * fuzz_server_import.c - the import's decoders of etcd's records
 * (server/import_wal.c) on arbitrary bytes: a log entry translated into
 * cetcd's (etcd's InternalRaftRequest and v2 Request; the re-tagged bytes
 * must then unpack as cetcd's InternalRequest), the members replayed from
 * a conf change or a normal entry (etcd's Member JSON, the v2 publish,
 * 3.5's member attributes), a snap file's v2 store JSON, a member JSON.
 * Each answers 0 or an error, never crashes or reads past the input, and
 * the members table stays sorted and within its bound.  The first byte
 * picks the decoder.  Seeds: fuzz/corpus/server_import/ (entries and
 * stores a real etcd 3.4.23 wrote).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cetcdpb/internal.pb-c.h"
#include "server/import_int.h"
#include "server/server_int.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"

static void check_members(const struct import *im)
{
    if (im->n_m > SERVER_MEMBERS_MAX)
        abort();
    for (size_t i = 1; i < im->n_m; i++)
        if (im->m[i - 1].id >= im->m[i].id)
            abort();
}

static void translate(struct import *im, struct import_ent *e)
{
    uint8_t *out;
    size_t len;
    int rc = import__translate(im, e, &out, &len);
    if (rc != 0 && rc != ERR_CORRUPT && rc != ERR_IMPORT_UNSUPPORTED &&
        rc != ERR_NOMEM)
        abort();
    if (rc == 0 && out != NULL) {
        Cetcdpb__InternalRequest *r =
            cetcdpb__internal_request__unpack(NULL, len, out);
        /* the messages are etcd's bytes, unchecked: they may not unpack,
         * which the applier refuses ("cannot decode entry"); the framing
         * itself must be sound */
        if (r != NULL)
            cetcdpb__internal_request__free_unpacked(r, NULL);
    }
    mem_free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    log_set_level(LOG_FATAL);
    if (size < 2)
        return 0;
    static struct server_member_info m[SERVER_MEMBERS_MAX];
    struct import im;
    memset(&im, 0, sizeof im);
    memset(m, 0, sizeof m);
    im.m = m;
    im.hs.commit = UINT64_MAX;
    im.first_index = 1;
    uint8_t *buf = malloc(size - 2 + 1);
    if (buf == NULL)
        return 0;
    memcpy(buf, data + 2, size - 2);
    struct import_ent e = {.index = 1, .term = 1, .type = data[1] & 1,
                           .data = buf, .len = size - 2};
    struct server_member_info one;
    switch (data[0] & 3) {
    case 0:
        e.type = 0;
        translate(&im, &e);
        break;
    case 1:
        im.ents = &e;
        im.n_ents = 1;
        (void)import__members_replay(&im);
        break;
    case 2:
        (void)import__v2_members(&im, buf, size - 2);
        break;
    default:
        memset(&one, 0, sizeof one);
        (void)import__member_json(buf, size - 2, 1, &one);
        break;
    }
    check_members(&im);
    free(buf);
    return 0;
}
