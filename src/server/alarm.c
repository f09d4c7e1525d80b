/*
 * alarm.c - the alarm list (see alarm.h): its key codec, its load from the
 * store, the applier of AlarmRequest (GET, ACTIVATE, DEACTIVATE, as etcd
 * 3.4's applierV3backend.Alarm), which also swaps the appliers an alarm
 * puts in front of the apply chain (applier.h), and the NOSPACE raise of
 * the API.
 */
#include "util/check.h"
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "mvcc/mvcc.h"
#include "server/alarm.h"
#include "server/applier.h"
#include "server/server_int.h"
#include "util/err.h"
#include "util/log.h"

/* Between two ACTIVATE proposals of this member (the API may refuse many
 * writes a second; one alarm is enough, a lost one is raised again). */
#define RAISE_EVERY_MS 1000

static bool type_known(uint32_t t)
{
    return t == ETCDSERVERPB__ALARM_TYPE__NOSPACE ||
           t == ETCDSERVERPB__ALARM_TYPE__CORRUPT;
}

static const char *type_name(uint32_t t)
{
    return t == ETCDSERVERPB__ALARM_TYPE__NOSPACE ? "NOSPACE" : "CORRUPT";
}

void server__alarm_key_encode(uint8_t out[SERVER_ALARM_KEY_BYTES],
                              const struct server_alarm *a)
{
    CHECK(type_known(a->type));
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)(a->member_id >> (56 - 8 * i));
    for (int i = 0; i < 4; i++)
        out[8 + i] = (uint8_t)(a->type >> (24 - 8 * i));
}

int server__alarm_key_decode(const void *key, size_t len,
                             struct server_alarm *out)
{
    const uint8_t *p = key;
    if (len != SERVER_ALARM_KEY_BYTES)
        return ERR_CORRUPT;
    uint64_t id = 0;
    uint32_t type = 0;
    for (int i = 0; i < 8; i++)
        id = id << 8 | p[i];
    for (int i = 0; i < 4; i++)
        type = type << 8 | p[8 + i];
    if (!type_known(type))
        return ERR_CORRUPT;
    *out = (struct server_alarm){id, type};
    return 0;
}

/* The alarms of type t (NONE: all). */
static size_t count_type(const struct server_alarms *al, uint32_t t)
{
    size_t c = 0;
    for (size_t i = 0; i < al->n; i++)
        c += t == ETCDSERVERPB__ALARM_TYPE__NONE || al->v[i].type == t;
    return c;
}

/* The list changed (or was read): the API's NOSPACE flag and the apply
 * chain follow it.  An alarm's applier goes in front when its first alarm
 * is raised and leaves when its last is disarmed (applier.h). */
static void list_changed(struct server *s)
{
    struct server_alarms *al = &s->alarms;
    bool nospace = count_type(al, ETCDSERVERPB__ALARM_TYPE__NOSPACE) > 0;
    bool corrupt = count_type(al, ETCDSERVERPB__ALARM_TYPE__CORRUPT) > 0;
    atomic_store(&al->nospace, nospace);
    atomic_store(&al->corrupt, corrupt);
    CHECK(al->n <= SERVER_ALARMS_MAX);
    pthread_mutex_lock(&al->pub_mu);
    memcpy(al->pub, al->v, al->n * sizeof *al->v);
    al->pub_n = al->n;
    pthread_mutex_unlock(&al->pub_mu);
    server__appliers_link(s, nospace, corrupt);
}

/* read_all fills al from the bucket, in key order. */
static int read_all(struct backend *be, struct server_alarms *al)
{
    struct backend_txn *t;
    struct backend_cursor *c = NULL;
    int rc = backend_read_begin(be, &t);
    if (rc != 0)
        return rc;
    rc = backend_cursor_open(t, al->bucket, &c);
    size_t n = 0;
    struct backend_val k;
    if (rc == 0)
        rc = backend_cursor_first(c, &k, NULL);
    while (rc == 0) {
        rc = n < SERVER_ALARMS_MAX
                 ? server__alarm_key_decode(k.data, k.len, &al->v[n])
                 : ERR_CORRUPT;
        if (rc == 0) {
            n++;
            rc = backend_cursor_next(c, &k, NULL);
        }
    }
    backend_cursor_close(c);
    backend_read_end(t);
    if (rc != ERR_NOTFOUND)
        return rc;
    al->n = n;
    return 0;
}

int server__alarms_load(struct server *s)
{
    CHECK(s != NULL && s->be != NULL);
    struct server_alarms *al = &s->alarms;
    int rc = backend_bucket_open(s->be, "alarm", 0, &al->bucket);
    if (rc == 0)
        rc = read_all(s->be, al);
    if (rc == 0)
        list_changed(s);
    if (rc == ERR_CORRUPT)
        log_error("etcdserver", "the store's alarm list does not decode");
    for (size_t i = 0; rc == 0 && i < al->n; i++)
        log_warn("etcdserver", "alarm %s of member %016" PRIx64 " is active "
                 "(etcdctl alarm disarm ends it)", type_name(al->v[i].type),
                 al->v[i].member_id);
    return rc;
}

void server__alarms_reload(struct server *s)
{
    if (read_all(s->be, &s->alarms) != 0)
        log_error("etcdserver", "cannot read the alarm list again");
    else
        list_changed(s);
}

void server_alarms_active(struct server *s, bool *nospace_out,
                          bool *corrupt_out)
{
    *nospace_out = atomic_load(&s->alarms.nospace);
    *corrupt_out = atomic_load(&s->alarms.corrupt);
}

size_t server_alarms_list(struct server *s, struct server_alarm *out,
                          size_t max)
{
    CHECK(s != NULL && (out != NULL || max == 0));
    struct server_alarms *al = &s->alarms;
    pthread_mutex_lock(&al->pub_mu);
    size_t n = al->pub_n < max ? al->pub_n : max;
    memcpy(out, al->pub, n * sizeof *out);
    pthread_mutex_unlock(&al->pub_mu);
    CHECK(n <= SERVER_ALARMS_MAX);
    return n;
}

const char *server_alarm_text(const struct server_alarm *a, char *buf,
                              size_t cap)
{
    CHECK(a != NULL && buf != NULL && cap > 0);
    CHECK(a->type == ETCDSERVERPB__ALARM_TYPE__NOSPACE ||
          a->type == ETCDSERVERPB__ALARM_TYPE__CORRUPT);
    const char *type =
        a->type == ETCDSERVERPB__ALARM_TYPE__NOSPACE ? "NOSPACE" : "CORRUPT";
    if (a->member_id != 0)
        snprintf(buf, cap, "memberID:%" PRIu64 " alarm:%s ", a->member_id,
                 type);
    else
        snprintf(buf, cap, "alarm:%s ", type);
    return buf;
}

bool server__alarm_nospace(struct server *s)
{
    return atomic_load(&s->alarms.nospace);
}

static ssize_t find(const struct server_alarms *al, uint64_t id, uint32_t t)
{
    for (size_t i = 0; i < al->n; i++)
        if (al->v[i].member_id == id && al->v[i].type == t)
            return (ssize_t)i;
    return -1;
}

/* answer fills resp with the alarms of type t (NONE: all), or with the
 * one alarm *only when it is not NULL. */
static int answer(struct arena *a, const struct server_alarms *al, uint32_t t,
                  const struct server_alarm *only,
                  Etcdserverpb__AlarmResponse *resp)
{
    size_t n = only != NULL ? 1 : count_type(al, t);
    if (n == 0)
        return 0;
    resp->alarms = arena_alloc(a, n * sizeof *resp->alarms);
    Etcdserverpb__AlarmMember *m = arena_alloc(a, n * sizeof *m);
    if (resp->alarms == NULL || m == NULL)
        return ERR_NOMEM;
    size_t k = 0;
    for (size_t i = 0; i < (only != NULL ? 1 : al->n); i++) {
        const struct server_alarm *x = only != NULL ? only : &al->v[i];
        if (only == NULL && t != ETCDSERVERPB__ALARM_TYPE__NONE &&
            x->type != t)
            continue;
        etcdserverpb__alarm_member__init(&m[k]);
        m[k].memberid = x->member_id;
        m[k].alarm = (Etcdserverpb__AlarmType)x->type;
        resp->alarms[k] = &m[k];
        k++;
    }
    CHECK(k == n);
    resp->n_alarms = n;
    return 0;
}

static int activate(struct server *s, struct backend_txn *t,
                    const struct server_alarm *x)
{
    struct server_alarms *al = &s->alarms;
    if (find(al, x->member_id, x->type) >= 0)
        return 0;
    if (al->n == SERVER_ALARMS_MAX)
        return ERR_FULL;
    uint8_t key[SERVER_ALARM_KEY_BYTES];
    server__alarm_key_encode(key, x);
    int rc = backend_put(t, al->bucket, key, sizeof key, "", 0);
    if (rc != 0)
        return rc;
    if (count_type(al, x->type) == 0)
        log_warn("etcdserver", "alarm %s raised by member %016" PRIx64,
                 type_name(x->type), x->member_id);
    al->v[al->n++] = *x;
    return 0;
}

static int deactivate(struct server *s, struct backend_txn *t,
                      const struct server_alarm *x, bool *found)
{
    struct server_alarms *al = &s->alarms;
    ssize_t i = find(al, x->member_id, x->type);
    *found = i >= 0;
    if (i < 0)
        return 0;
    uint8_t key[SERVER_ALARM_KEY_BYTES];
    server__alarm_key_encode(key, x);
    int rc = backend_del(t, al->bucket, key, sizeof key);
    if (rc != 0 && rc != ERR_NOTFOUND)
        return rc;
    memmove(&al->v[i], &al->v[i + 1], (al->n - (size_t)i - 1) * sizeof *al->v);
    al->n--;
    if (count_type(al, x->type) == 0)
        log_info("etcdserver", "alarm %s disarmed", type_name(x->type));
    /* The next refusal raises it again at once, as etcd's quota check
     * does on every refusal: the once-a-second limit is for a raise that
     * is still on its way, not for one that was disarmed. */
    if (x->type == ETCDSERVERPB__ALARM_TYPE__NOSPACE)
        atomic_store(&al->raised_ms, 0);
    return 0;
}

int server__alarm_apply(struct server *s, struct mvcc_batch *b,
                        const Etcdserverpb__AlarmRequest *r, struct arena *a,
                        ProtobufCMessage **msg_out)
{
    CHECK(s != NULL && b != NULL && r != NULL);
    Etcdserverpb__AlarmResponse *resp = arena_alloc(a, sizeof *resp);
    Etcdserverpb__ResponseHeader *h = arena_alloc(a, sizeof *h);
    if (resp == NULL || h == NULL)
        return ERR_NOMEM;
    etcdserverpb__alarm_response__init(resp);
    etcdserverpb__response_header__init(h);
    resp->header = h;
    struct server_alarm x = {r->memberid, (uint32_t)r->alarm};
    struct backend_txn *t = mvcc_batch_backend_txn(b);
    int rc = 0;
    bool found = true;
    switch (r->action) {
    case ETCDSERVERPB__ALARM_REQUEST__ALARM_ACTION__GET:
        rc = answer(a, &s->alarms, x.type, NULL, resp);
        break;
    case ETCDSERVERPB__ALARM_REQUEST__ALARM_ACTION__ACTIVATE:
        rc = type_known(x.type) ? activate(s, t, &x) : ERR_INVAL;
        if (rc == 0)
            rc = answer(a, &s->alarms, x.type, &x, resp);
        break;
    case ETCDSERVERPB__ALARM_REQUEST__ALARM_ACTION__DEACTIVATE:
        if (type_known(x.type))
            rc = deactivate(s, t, &x, &found);
        if (rc == 0 && type_known(x.type) && found)
            rc = answer(a, &s->alarms, x.type, &x, resp);
        break;
    default:
        rc = ERR_INVAL;
        break;
    }
    list_changed(s);
    *msg_out = &resp->base;
    return rc;
}

/* The raise's answer: nothing waits for it. */
static void raised(void *arg, const struct server_response *r)
{
    (void)arg;
    if (r->err != 0)
        log_warn("etcdserver", "cannot raise the NOSPACE alarm: %s",
                 err_str(r->err));
}

void server__alarm_raise_nospace(struct server *s)
{
    CHECK(s != NULL);
    if (server__alarm_nospace(s))
        return;
    uint64_t now = server__clock_ms(s);
    uint64_t last = atomic_load(&s->alarms.raised_ms);
    if ((last != 0 && now < last + RAISE_EVERY_MS) ||
        !atomic_compare_exchange_strong(&s->alarms.raised_ms, &last, now))
        return;
    Etcdserverpb__AlarmRequest ar = ETCDSERVERPB__ALARM_REQUEST__INIT;
    ar.action = ETCDSERVERPB__ALARM_REQUEST__ALARM_ACTION__ACTIVATE;
    ar.memberid = s->member_id;
    ar.alarm = ETCDSERVERPB__ALARM_TYPE__NOSPACE;
    Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
    ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_ALARM;
    ir.alarm = &ar;
    server_propose(s, &ir, raised, NULL);
}
