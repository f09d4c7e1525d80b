/*
 * discovery_srv.h - a new member's --initial-cluster from DNS SRV records
 * (--discovery-srv, --discovery-srv-name), as etcd bootstraps with them:
 * the records of _etcd-server-ssl[-<name>]._tcp.<domain> (https peers)
 * and _etcd-server[-<name>]._tcp.<domain> (http peers); a record whose
 * target:port resolves to the address of one of this member's
 * --initial-advertise-peer-urls is this member (its --name), the others
 * are named "0", "1", ... per service, as etcd names them; the peer URL
 * is the target without its trailing dot.  Only a member without data
 * asks (etcd: isMemberInitialized); one with data keeps its membership.
 *
 * Better than etcd 3.4.23: the http records are used (3.4.23 keeps them
 * only when its http lookup FAILED, so a cluster of plain-http peers
 * cannot bootstrap from SRV at all; etcd 3.5 fixed it the same way), and
 * one service answering is enough.  Not done: etcd's peer TLS
 * ServerName = the domain when https records are found and no peer CA is
 * given (cetcd's peer TLS verifies as configured).
 */
#ifndef CETCD_CMD_DISCOVERY_SRV_H
#define CETCD_CMD_DISCOVERY_SRV_H

#include <stddef.h>

/* discovery_srv_cluster writes "name=url,name=url,..." into out (cap
 * bytes) and logs etcd's lines ("got bootstrap from DNS for etcd-server
 * at ..." / zap's "get cluster for etcd-server[-ssl] SRV").  Returns 0,
 * or -1 with etcd's reason in why: "error querying DNS SRV records for
 * _etcd-server-ssl <lookup error>", "cannot find local etcd member
 * \"<name>\" in SRV records", an advertised peer URL that does not
 * resolve. */
int discovery_srv_cluster(const char *name, const char *domain,
                          const char *service_name, const char *apurls,
                          char *out, size_t cap, char *why, size_t why_cap);

#endif
