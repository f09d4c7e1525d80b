/*
 * grpc_floor.c - cetcd-grpc-floor: the cheapest server the gRPC C core
 * allows, for measuring what one unary call costs before any cetcd code
 * runs (bench/floor.sh).
 *
 * It serves /etcdserverpb.KV/Range and /etcdserverpb.Maintenance/Status
 * (cetcd-bench asks for the endpoint's status first) the way cetcd's API
 * layer does: registered methods with the payload read up front, request
 * slots pre-posted on one completion queue per thread, one batch per
 * answer (initial metadata, message, status, close), the "poll" poller
 * unless GRPC_POLL_STRATEGY says otherwise, Abseil's deadlock detection
 * off.  Every answer is an empty message, which decodes as an
 * empty RangeResponse or StatusResponse.  No storage, no raft, no threads
 * other than the pollers: whatever cetcd spends above this per call is
 * cetcd's own.
 *
 * usage: cetcd-grpc-floor HOST:PORT [THREADS]   (runs until killed)
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

#include "util/absl.h"

#define SLOTS_PER_THREAD 256
#define THREADS_MAX 16

/* One request slot; its address is the completion tag. */
struct slot {
    void *method;                /* registered method handle */
    bool answered;               /* second completion: the answer went */
    grpc_call *call;
    gpr_timespec deadline;
    grpc_metadata_array md;
    grpc_byte_buffer *payload;
    int cancelled;
};

static grpc_server *server;

static void post(grpc_completion_queue *cq, void *method)
{
    struct slot *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        fprintf(stderr, "cetcd-grpc-floor: out of memory\n");
        exit(1);
    }
    s->method = method;
    grpc_metadata_array_init(&s->md);
    if (grpc_server_request_registered_call(server, method, &s->call,
                                            &s->deadline, &s->md, &s->payload,
                                            cq, cq, s) != GRPC_CALL_OK) {
        fprintf(stderr, "cetcd-grpc-floor: request_registered_call failed\n");
        exit(1);
    }
}

static void answer(struct slot *s)
{
    grpc_slice empty = grpc_empty_slice();
    grpc_byte_buffer *msg = grpc_raw_byte_buffer_create(&empty, 0);
    grpc_op ops[4];

    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = msg;
    ops[2].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[2].data.send_status_from_server.status = GRPC_STATUS_OK;
    ops[3].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[3].data.recv_close_on_server.cancelled = &s->cancelled;
    s->answered = true;
    if (grpc_call_start_batch(s->call, ops, 4, s, NULL) != GRPC_CALL_OK) {
        fprintf(stderr, "cetcd-grpc-floor: start_batch failed\n");
        exit(1);
    }
    grpc_byte_buffer_destroy(msg);
}

static void slot_free(struct slot *s)
{
    if (s->payload != NULL)
        grpc_byte_buffer_destroy(s->payload);
    grpc_call_unref(s->call);
    grpc_metadata_array_destroy(&s->md);
    free(s);
}

struct worker {
    grpc_completion_queue *cq;
    void *methods[2];
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;

    for (int i = 0; i < SLOTS_PER_THREAD; i++)
        post(w->cq, w->methods[i % 8 == 0 ? 1 : 0]);
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(
            w->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        if (ev.type != GRPC_OP_COMPLETE)
            continue;
        struct slot *s = ev.tag;
        if (!s->answered && ev.success) {
            post(w->cq, s->method); /* a fresh slot in its place */
            answer(s);
        } else {
            slot_free(s);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    static struct worker workers[THREADS_MAX];
    pthread_t ids[THREADS_MAX];
    int n = argc > 2 ? atoi(argv[2]) : 2;

    if (argc < 2 || n < 1 || n > THREADS_MAX) {
        fprintf(stderr, "usage: cetcd-grpc-floor HOST:PORT [THREADS]\n");
        return 2;
    }
    setenv("GRPC_POLL_STRATEGY", "poll", 0); /* as cmd/cetcd.c */
    absl_deadlock_detection_off();           /* as cetcd; see util/absl.h */
    grpc_init();
    server = grpc_server_create(NULL, NULL);
    void *range = grpc_server_register_method(
        server, "/etcdserverpb.KV/Range", NULL,
        GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
    void *status = grpc_server_register_method(
        server, "/etcdserverpb.Maintenance/Status", NULL,
        GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
    grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
    int port = grpc_server_add_http2_port(server, argv[1], creds);
    grpc_server_credentials_release(creds);
    if (port == 0) {
        fprintf(stderr, "cetcd-grpc-floor: cannot listen on %s\n", argv[1]);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        workers[i].cq = grpc_completion_queue_create_for_next(NULL);
        workers[i].methods[0] = range;
        workers[i].methods[1] = status;
        grpc_server_register_completion_queue(server, workers[i].cq, NULL);
    }
    grpc_server_start(server);
    for (int i = 0; i < n; i++) {
        if (pthread_create(&ids[i], NULL, worker_main, &workers[i]) != 0) {
            fprintf(stderr, "cetcd-grpc-floor: cannot start a thread\n");
            return 1;
        }
    }
    fprintf(stderr, "cetcd-grpc-floor: serving on %s with %d threads\n",
            argv[1], n);
    pthread_join(ids[0], NULL);
    return 0;
}
