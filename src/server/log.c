/*
 * log.c - the log thread: takes every queued proposal as one batch, gives
 * them log indexes, appends them to the WAL and makes the batch durable with
 * one fdatasync (group commit), then hands the batch to the apply thread.
 * With Raft this thread becomes the raft thread (Ready -> WAL -> send ->
 * apply); everything around it stays.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_int.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"
#include "wal/wal.h"

#define LOG_BATCH_MAX 4096 /* entries per WAL append */

static int write_batch(struct server *s, struct server_entry *head, size_t n,
                       struct wal_entry *ents)
{
    size_t i = 0;
    for (struct server_entry *e = head; e != NULL; e = e->next, i++) {
        assert(i < n);
        e->index = ++s->last_index;
        ents[i] = (struct wal_entry){.index = e->index,
                                     .term = atomic_load(&s->term),
                                     .type = 0,
                                     .data = e->data,
                                     .len = e->len};
    }
    assert(i == n);
    struct wal_hardstate hs = {.term = atomic_load(&s->term),
                               .vote = s->member_id,
                               .commit = s->last_index};
    int rc = wal_append(s->wal, &hs, ents, n);
    if (rc == 0)
        rc = wal_sync(s->wal);
    return rc;
}

void *server__log_main(void *arg)
{
    struct server *s = arg;
    struct wal_entry *ents = mem_malloc(sizeof *ents * LOG_BATCH_MAX);
    assert(ents != NULL);
    for (;;) {
        size_t n;
        struct server_entry *head = server_queue_pop_all(&s->proposals, &n);
        if (head == NULL)
            break;
        while (head != NULL) {
            /* Split very large bursts so one append stays bounded. */
            struct server_entry *tail = head;
            size_t k = 1;
            while (k < LOG_BATCH_MAX && tail->next != NULL) {
                tail = tail->next;
                k++;
            }
            struct server_entry *rest = tail->next;
            tail->next = NULL;
            int rc = write_batch(s, head, k, ents);
            if (rc != 0) {
                log_error("etcdserver", "failed to write WAL: %s; stopping",
                          err_str(rc));
                s->fatal = rc;
                abort();
            }
            atomic_fetch_add(&s->stat_wal_syncs, 1);
            atomic_store(&s->committed_index, s->last_index);
            server__apply_handoff(s, head, tail, k);
            head = rest;
        }
    }
    mem_free(ents);
    server_queue_close(&s->committed);
    return NULL;
}
