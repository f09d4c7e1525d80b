/*
 * dial.h - the client end of gRPC channels, shared by libcetcd
 * (src/client) and the peer transport (src/peer), and its manual.
 *
 * PURPOSE
 * Both dial other processes over the gRPC C core: libcetcd its endpoints,
 * the peer transport (and a member joining a cluster, through libcetcd)
 * the other members.  They take the same URLs, build TLS credentials from
 * the same kind of material and want the same channel behaviour, so that
 * is written once, here:
 * - dial_url_parse turns "http[s]://host:port", "unix[s]://path" or a
 *   bare "host:port" into a gRPC target and says whether the scheme asks
 *   for TLS (pure; no gRPC object is touched);
 * - dial_creds_create builds channel credentials from PEM material, as
 *   the client end of an etcd 3.4 tls.Config (transport.TLSInfo) behaves;
 * - dial_channel_create opens a channel with the arguments every caller
 *   wants: its own subchannel pool (its own TCP connection, even to an
 *   address another channel of the process already dials), no core
 *   retries (the callers retry and fail over themselves), a reconnect
 *   back-off on the caller's scale, a connect timeout and a receive
 *   limit;
 * - dial_tls_probe tells why a TLS connection fails (gRPC does not);
 *   dial_exchange makes a one-shot request, over TLS with the same
 *   material and checks or in plain text (the grpc-proxy's /metrics);
 * - dial_unary_ops and dial_reply_ops build the ops of a client call's
 *   batch: the whole of a unary call, or the receiving half that waits
 *   for the server's reply and status (a client-streaming call sends its
 *   messages in batches of its own); struct dial_reply holds what they
 *   receive.
 *
 * THREADS AND LIFETIME
 * Every function may run on any thread.  dial_creds_create and
 * dial_channel_create need gRPC initialised (grpc_init) by the caller for
 * as long as their results live.  Credentials are released with
 * grpc_channel_credentials_release, channels with grpc_channel_destroy;
 * a channel holds its own reference to its credentials.
 *
 * A struct dial_reply belongs to its call's owner: dial_reply_init it
 * before the batch starts and dial_reply_release it once the batch has
 * completed (or never started).
 *
 * ERRORS
 * dial_url_parse returns 0 or ERR_INVAL (util/err.h), dial_tls_probe and
 * dial_exchange a negative ERR_* code.  The constructors return NULL
 * when gRPC refuses.
 */
#ifndef CETCD_DIAL_DIAL_H
#define CETCD_DIAL_DIAL_H

#include <stdbool.h>
#include <stddef.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

/* What a URL's scheme says about encryption. */
enum dial_security {
    DIAL_SECURITY_DEFAULT = 0, /* no scheme ("host:port"): caller decides */
    DIAL_SECURITY_PLAIN = 1,   /* http://, unix:// */
    DIAL_SECURITY_TLS = 2,     /* https://, unixs:// */
};

/*
 * dial_url_parse reads the url of len bytes (not necessarily
 * NUL-terminated) and writes its gRPC target into target_out (cap bytes,
 * NUL-terminated): "host:port" for http://, https:// and a bare
 * "host:port", "unix:path" for unix:// and unixs://.  *sec_out gets what
 * the scheme says.  A host:port may end in one "/" but have no path; its
 * port is the digits after the last ':' (an IPv6 host needs brackets:
 * "[::1]:2379").  Errors: ERR_INVAL (empty, unknown scheme, no or bad
 * port, a path, an empty socket path, target longer than cap - 1).
 */
int dial_url_parse(const char *url, size_t len, char *target_out,
                   size_t cap, enum dial_security *sec_out);

/* TLS material of the dialling side.  Strings are NUL-terminated PEM,
 * borrowed for the call of dial_creds_create only (gRPC copies them). */
struct dial_tls {
    /* This end's certificate chain and key, presented when the server
     * asks for a client certificate.  Both or neither. */
    const char *cert_pem;
    const char *key_pem;
    /* CAs that sign the server's certificate, or NULL for the system's.
     * The certificate must also be valid for the host of the target. */
    const char *ca_pem;
    /* Accept any server certificate, unverified (still encrypted): etcd's
     * peer auto-TLS (no member can know another's self-signed
     * certificate) and etcdctl --insecure-skip-tls-verify.  ca_pem is
     * then ignored. */
    bool skip_verify;
    /* The files the PEM strings came from, or NULL: when cert_file and
     * key_file are set, the credentials read the files themselves and
     * read them again when they change (checked every
     * DIAL_TLS_REFRESH_S seconds; the CA file too when set and verified),
     * so new connections present a rotated certificate, as etcd's
     * transport re-reads its files on every handshake. */
    const char *cert_file;
    const char *key_file;
    const char *ca_file;
    /* etcd's --peer-cert-allowed-cn / --peer-cert-allowed-hostname on the
     * dialling side (etcd 3.4 installs the check in both ends of a peer
     * tls.Config, transport.TLSInfo.baseConfig): the server's leaf
     * certificate must carry this common name, or be valid for this
     * hostname (an IP or a DNS name, SANs only, as Go), or the connection
     * is refused: the dialler logs "client certificate authentication
     * failed" (Go's words, though the certificate is the server's) and
     * the server is told with a "bad certificate" alert (see verify.c).
     * With skip_verify every server is refused, as etcd's check finds no
     * verified chain then.  At most one of the two; NULL: no check. */
    const char *allowed_cn;
    const char *allowed_hostname;
    /* The "host:port" the credentials' channel dials, where that alert
     * is sent; NULL: none is sent (gRPC tells the verifier the host
     * only, so credentials shared by channels to several ports cannot
     * know it).  Only read with allowed_cn or allowed_hostname. */
    const char *alert_target;
};

/* dial_tls_copy returns a copy of tls and of every string it points to,
 * in one block that the caller frees with mem_free (util/mem.h); NULL
 * when out of memory. */
struct dial_tls *dial_tls_copy(const struct dial_tls *tls);

#define DIAL_TLS_REFRESH_S 1

/*
 * dial_exchange connects to target ("host:port" or "unix:path") within
 * timeout_ms (each connect, read and write), with tls (NULL: plain text)
 * makes a TLS handshake with its material and checks (as dial_tls_probe)
 * offering the ALPN protocols alpn (wire format, e.g. "\x08http/1.1"),
 * writes the req_len bytes of req and reads until the server closes: what
 * it read, at most max bytes, in *resp_out (NUL-terminated; mem_free it)
 * and *len_out.  For one-shot requests such as an HTTP/1.0 GET.  Returns
 * 0, or ERR_INVAL (unusable material), ERR_IO (connect, handshake, read
 * or write failed), ERR_TOO_LARGE (more than max), ERR_NOMEM, with why
 * written.  Any thread.
 */
int dial_exchange(const char *target, const struct dial_tls *tls,
                  const char *alpn, const void *req, size_t req_len,
                  int timeout_ms, size_t max, char **resp_out,
                  size_t *len_out, char *why, size_t cap);

/* dial_creds_create returns channel credentials for tls, or insecure
 * (plain text) ones when tls is NULL; the caller releases them.  NULL when
 * gRPC refuses the material.  tls->cert_pem and tls->key_pem must be both
 * set or both NULL (asserted). */
grpc_channel_credentials *dial_creds_create(const struct dial_tls *tls);

/*
 * dial_log_install routes the gRPC core's log lines (gpr_log) through
 * util/log, category "grpc"; a line naming a TLS alert that the other end
 * sent ("sslv3 alert bad certificate") is logged in Go's words instead:
 * "TLS handshake failed: remote error: tls: bad certificate", as etcd
 * says it.  Process-wide; call once before grpc_init.
 */
void dial_log_install(void);

/* The per-caller channel arguments; every field must be > 0. */
struct dial_channel_opts {
    int max_recv_bytes; /* largest message received */
    int backoff_min_ms; /* first and least reconnect delay */
    int backoff_max_ms; /* reconnect delay ceiling */
    /* The least time one connection attempt gets: TCP connect, TLS
     * handshake and the server's first SETTINGS frame.  Not a delay: an
     * attempt that succeeds or fails sooner ends sooner.  It must cover a
     * TLS handshake on a loaded machine (hundreds of ms under ASan on two
     * busy cores), so seconds, not the back-off's milliseconds. */
    int connect_timeout_ms;
    /* Keepalive PINGs (grpc-go's ClientParameters, which etcd's clients
     * set): after keepalive_time_ms without activity on a connection with
     * a call open, a PING; no answer within keepalive_timeout_ms closes
     * the connection.  0 = no keepalive PINGs (the C core's default). */
    int keepalive_time_ms;
    int keepalive_timeout_ms;
    /* The most a stream's server may send ahead of what the caller takes
     * (the HTTP/2 stream window, without the C core's bandwidth probing
     * that grows it to megabytes): a caller that stops reading a stream
     * then holds at most this, plus the message it asked for.  0 = the
     * core's defaults (probing on). */
    int stream_window_bytes;
};

/* dial_channel_create opens a channel to target (a dial_url_parse output)
 * with creds (borrowed; the channel takes its own reference) and the
 * arguments described at the top.  It does not connect yet.  NULL on
 * failure. */
grpc_channel *dial_channel_create(const char *target,
                                  grpc_channel_credentials *creds,
                                  const struct dial_channel_opts *o);

/*
 * dial_tls_probe explains why TLS connections to target (a dial_url_parse
 * output) fail, for messages: gRPC only says UNAVAILABLE.  It connects
 * within timeout_ms, makes one TLS handshake with tls (as
 * dial_creds_create would, host name check included), then waits up to
 * timeout_ms for the server's first bytes, since a TLS 1.3 server refuses
 * a client certificate only after the handshake.  Returns 0 when all of
 * that went well (the failure lies elsewhere), else writes the reason
 * into why (cap bytes, e.g. "TLS handshake failed: the server
 * certificate: unable to get local issuer certificate"; or, with an
 * allowed CN or hostname the server's certificate does not carry,
 * "TLS handshake failed: client certificate authentication failed (...)")
 * and returns
 * ERR_IO (connect, handshake or refusal), ERR_INVAL (material OpenSSL
 * cannot use) or ERR_NOMEM.  Blocks the calling thread.
 */
int dial_tls_probe(const char *target, const struct dial_tls *tls,
                   int timeout_ms, char *why, size_t cap);

/* What the server sends back on a client call: the receiving ops' outputs.
 * Owned by the call's owner, who reads it after the batch completed. */
struct dial_reply {
    grpc_metadata_array init_md;  /* initial metadata */
    grpc_byte_buffer *msg;        /* the reply message; NULL if none */
    grpc_metadata_array trail_md; /* trailing metadata */
    grpc_status_code status;      /* the call's final status */
    grpc_slice details;           /* the status message */
    const char *error_string;     /* the core's debug string, or NULL */
};

/* The number of ops dial_reply_ops and dial_unary_ops fill. */
#define DIAL_REPLY_OPS 3
#define DIAL_UNARY_OPS 6

/* dial_reply_init readies r for a batch: empty metadata, details and
 * message, status 0. */
void dial_reply_init(struct dial_reply *r);

/* dial_reply_ops fills ops with RECV_INITIAL_METADATA, RECV_MESSAGE and
 * RECV_STATUS_ON_CLIENT, all received into r. */
void dial_reply_ops(grpc_op ops[DIAL_REPLY_OPS], struct dial_reply *r);

/* dial_unary_ops fills ops with a whole unary call: SEND_INITIAL_METADATA
 * (md_len entries of md; md may be NULL when md_len is 0), SEND_MESSAGE
 * (req), SEND_CLOSE_FROM_CLIENT, then dial_reply_ops into r.  md and req
 * stay the caller's and must live until the batch completed. */
void dial_unary_ops(grpc_op ops[DIAL_UNARY_OPS], grpc_metadata *md,
                    size_t md_len, grpc_byte_buffer *req, struct dial_reply *r);

/* dial_reply_release frees what r received and leaves it empty (another
 * dial_reply_init is needed before the next batch). */
void dial_reply_release(struct dial_reply *r);

#endif
