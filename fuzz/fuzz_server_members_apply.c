/*
 * fuzz_server_members_apply.c - goal: the membership records a member
 * applies from its log (src/server/members.c, server__members_apply: the
 * MemberChange and MemberAttr requests of committed entries, read back
 * from the WAL at every restart) never crash it, leak or trip a
 * sanitizer, whatever they hold; the table stays one the member can use
 * (at most SERVER_MEMBERS_MAX members sorted by distinct ids, bounded
 * strings); and what was applied is what the next start reads back from
 * the store (or, once this member was removed, the start refuses).
 *
 * Method: a fresh store opened by the real server__members_open for
 * member 1 of the initial cluster 1, 2, 3 (members_env.h, shared with
 * fuzz_server_members.c); each input record is decoded with the same
 * protobuf-c decoder the applier uses, and a MemberChange or MemberAttr
 * is applied in a write txn of its own, ended by
 * server__members_batch_end as the applier ends a batch.  server__members_apply only takes
 * the batch's backend txn from its mvcc_batch, so that call is wrapped
 * (--wrap=mvcc_batch_backend_txn): the "batch" here is the txn itself.
 *
 * Input: records of u16 LE length + an encoded cetcdpb.InternalRequest.
 * Seeds: fuzz/seeds.c (an add, update, promote, publish and removal, and
 * the removal of this member).
 */
#include "cetcdpb/internal.pb-c.h"
#include "members_env.h"
#include "mvcc/mvcc.h"
#include "server/server_int.h"

struct backend_txn *__wrap_mvcc_batch_backend_txn(struct mvcc_batch *b);
struct backend_txn *__wrap_mvcc_batch_backend_txn(struct mvcc_batch *b)
{
    return (struct backend_txn *)b;
}

/* The table after an apply: usable, and no member both in it and
 * removed. */
static void applied_check(const struct server *s)
{
    table_check(s->ms);
    for (size_t i = 0; i < s->ms->n; i++)
        check(!server__ms_is_removed(s->ms, s->ms->m[i].id));
}

/* apply_one decodes and applies one record; false when the member would
 * stop here (a store error aborts the apply thread, and the entry is
 * applied again at the next start). */
static bool apply_one(struct server *s, const uint8_t *p, size_t n)
{
    Cetcdpb__InternalRequest *req =
        cetcdpb__internal_request__unpack(NULL, n, p);
    if (req == NULL)
        return true; /* the applier skips it as ERR_CORRUPT */
    bool ours =
        req->request_case == CETCDPB__INTERNAL_REQUEST__REQUEST_MEMBER_CHANGE ||
        req->request_case == CETCDPB__INTERNAL_REQUEST__REQUEST_MEMBER_ATTR;
    int rc = 0;
    if (ours) {
        struct backend_txn *txn;
        check(backend_write_begin(be, &txn) == 0);
        rc = server__members_apply(s, (struct mvcc_batch *)txn, req);
        if (rc == 0)
            check(backend_write_commit(txn) == 0);
        else
            backend_write_abort(txn);
        /* The batch's fate: its staged effects run, or the table is
         * reloaded from the store. */
        server__members_batch_end(s, rc == 0);
    }
    cetcdpb__internal_request__free_unpacked(req, NULL);
    if (rc != 0)
        return false;
    applied_check(s);
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (be == NULL) {
        log_set_level(LOG_FATAL);
        env_build("server_members_apply");
    }
    ids_write(NULL, 0, false);
    store_write(NULL, 0);
    struct server *s = member_new(NULL);
    check(server__members_open(s) == 0);
    store_check(s);
    bool ok = true;
    while (ok && size >= 2) {
        size_t n = (size_t)data[0] | (size_t)data[1] << 8;
        data += 2;
        size -= 2;
        if (n > size)
            n = size;
        ok = apply_one(s, data, n);
        data += n;
        size -= n;
    }
    if (!ok) {
        member_free(s);
        return 0;
    }
    /* The next start reads back what was applied. */
    struct server *again = member_new(NULL);
    int rc = server__members_open(again);
    if (atomic_load(&s->ms->removed_self)) {
        check(rc == ERR_MEMBER_REMOVED);
        member_free(again);
    } else {
        check(rc == 0);
        store_check(again);
        same_store(s, again);
        member_free(again);
    }
    member_free(s);
    return 0;
}
