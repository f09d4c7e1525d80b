/* svc_int.h - what the service files share. */
#ifndef CETCD_SVC_SVC_INT_H
#define CETCD_SVC_SVC_INT_H

#include "svc/svc.h"

/* svc__done_dup copies done to the heap for a request answered later
 * through a server callback that carries one pointer (free it with
 * mem_free once fn was called), or NULL (out of memory). */
struct svc_done *svc__done_dup(struct svc_done done);

/* svc__done_take calls the held completion with err and reply and frees
 * it: the end of an answer that came through svc__done_dup. */
void svc__done_take(struct svc_done *held, int err,
                    const ProtobufCMessage *reply);

#endif
