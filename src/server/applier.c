/*
 * applier.c - the apply step's dispatch (see applier.h): a request's kind
 * picks its slot, the active chain picks who answers it; also the chain's
 * linking and the chain's names for tests (the auth applier is
 * auth_apply.c).
 */
#include "util/check.h"
#include <pthread.h>

#include "server/applier.h"
#include "server/server_int.h"
#include "util/err.h"

void server__appliers_link(struct server *s, bool nospace, bool corrupt)
{
    CHECK(s != NULL);
    struct server_appliers *ap = &s->appliers;
    ap->store = (struct applier){&server__applier_store_ops, NULL};
    ap->quota = (struct applier){&server__applier_quota_ops, &ap->store};
    ap->auth = (struct applier){&server__applier_auth_ops, &ap->quota};
    ap->capped = (struct applier){&server__applier_capped_ops, &ap->auth};
    const struct applier *front = nospace ? &ap->capped : &ap->auth;
    ap->corrupt = (struct applier){&server__applier_corrupt_ops, front};
    ap->front = corrupt ? &ap->corrupt : front;
    for (int i = 0; i < APPLIER_SLOTS; i++)
        CHECK(ap->store.ops->fn[i] != NULL); /* the chain's end answers */
}

enum applier_slot server__applier_slot(const Cetcdpb__InternalRequest *req)
{
    switch (req->request_case) {
    case CETCDPB__INTERNAL_REQUEST__REQUEST_RANGE:
        return APPLIER_RANGE;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_PUT:
        return APPLIER_PUT;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_DELETE_RANGE:
        return APPLIER_DELETE_RANGE;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_TXN:
        return APPLIER_TXN;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_COMPACTION:
        return APPLIER_COMPACTION;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_LEASE_GRANT:
        return APPLIER_LEASE_GRANT;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_LEASE_REVOKE:
        return APPLIER_LEASE_REVOKE;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_LEASE_CHECKPOINT:
        return APPLIER_LEASE_CHECKPOINT;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_ALARM:
        return APPLIER_ALARM;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_MEMBER_ATTR:
    case CETCDPB__INTERNAL_REQUEST__REQUEST_MEMBER_CHANGE:
        return APPLIER_MEMBERS;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_AUTHENTICATE:
        return APPLIER_AUTHENTICATE;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_ENABLE:
        return APPLIER_AUTH_ENABLE;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_DISABLE:
        return APPLIER_AUTH_DISABLE;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_USER_ADD:
        return APPLIER_USER_ADD;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_USER_DELETE:
        return APPLIER_USER_DELETE;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_USER_CHANGE_PASSWORD:
        return APPLIER_USER_CHANGE_PASSWORD;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_USER_GRANT_ROLE:
        return APPLIER_USER_GRANT_ROLE;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_USER_GET:
        return APPLIER_USER_GET;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_USER_REVOKE_ROLE:
        return APPLIER_USER_REVOKE_ROLE;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_USER_LIST:
        return APPLIER_USER_LIST;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_ROLE_ADD:
        return APPLIER_ROLE_ADD;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_ROLE_GRANT_PERMISSION:
        return APPLIER_ROLE_GRANT_PERMISSION;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_ROLE_GET:
        return APPLIER_ROLE_GET;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_ROLE_REVOKE_PERMISSION:
        return APPLIER_ROLE_REVOKE_PERMISSION;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_ROLE_DELETE:
        return APPLIER_ROLE_DELETE;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_ROLE_LIST:
        return APPLIER_ROLE_LIST;
    default:
        return APPLIER_NONE; /* not set, or a kind this build lacks */
    }
}

/* The first applier from a on that handles slot. */
static const struct applier *handler_of(const struct applier *a,
                                        enum applier_slot slot)
{
    while (a->ops->fn[slot] == NULL) {
        a = a->next;
        CHECK(a != NULL); /* the store handles every slot */
    }
    return a;
}

int server__applier_next(const struct applier *self, struct applier_call *c)
{
    CHECK(self != NULL && self->next != NULL);
    CHECK(c->slot < APPLIER_SLOTS);
    const struct applier *a = handler_of(self->next, c->slot);
    return a->ops->fn[c->slot](a, c);
}

int server__apply_request(struct server *s, struct mvcc_batch *b,
                          const Cetcdpb__InternalRequest *req,
                          struct arena *a, ProtobufCMessage **msg_out)
{
    CHECK(s->appliers.front != NULL); /* linked at the store's open */
    struct applier_call c = {
        .s = s, .b = b, .req = req, .a = a, .msg_out = msg_out,
        .slot = server__applier_slot(req)};
    const struct applier *h = handler_of(s->appliers.front, c.slot);
    return h->ops->fn[c.slot](h, &c);
}

const char *server__applier_answering(struct server *s,
                                      enum applier_slot slot)
{
    CHECK(slot < APPLIER_SLOTS);
    pthread_mutex_lock(&s->apply_mu);
    const char *name = handler_of(s->appliers.front, slot)->ops->name;
    pthread_mutex_unlock(&s->apply_mu);
    return name;
}

size_t server__applier_chain(struct server *s, const char **names_out,
                             size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&s->apply_mu);
    for (const struct applier *a = s->appliers.front; a != NULL; a = a->next)
        if (n < max)
            names_out[n++] = a->ops->name;
    pthread_mutex_unlock(&s->apply_mu);
    CHECK(n <= max);
    return n;
}
