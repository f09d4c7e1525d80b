/* done.c - completions held across an asynchronous answer. */
#include "svc/svc_int.h"

#include "util/check.h"
#include "util/mem.h"

struct svc_done *svc__done_dup(struct svc_done done)
{
    CHECK(done.fn != NULL);
    struct svc_done *held = mem_malloc(sizeof *held);
    if (held != NULL)
        *held = done;
    return held;
}

const char *svc__done_metadata(void *ctx, const char *key, size_t *len)
{
    const struct svc_done *held = ctx;
    return held->metadata != NULL ? held->metadata(held->ctx, key, len)
                                  : NULL;
}

void svc__done_take(struct svc_done *held, int err,
                    const ProtobufCMessage *reply)
{
    CHECK(held != NULL && held->fn != NULL);
    CHECK((err == 0) == (reply != NULL));
    struct svc_done done = *held;
    mem_free(held);
    done.fn(done.ctx, err, reply);
}
