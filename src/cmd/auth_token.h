/*
 * auth_token.h - etcd's --auth-token value at start-up: "simple" or
 * "jwt,pub-key=F,priv-key=F,sign-method=M,ttl=D" (etcd 3.4's
 * auth.NewTokenProvider and jwtOptions: the same splitting, defaults,
 * and refusals with etcd's messages).  The JWT keys are read and parsed
 * here, so a bad key stops the member before it starts.
 */
#ifndef CETCD_CMD_AUTH_TOKEN_H
#define CETCD_CMD_AUTH_TOKEN_H

#include <stdbool.h>
#include <stddef.h>

#include "auth/auth.h"

/* What --auth-token asked for; zero it before the parse. */
struct cmd_auth_token {
    bool jwt;                   /* "jwt": cfg is filled */
    struct auth_jwt_config cfg; /* the key bytes are owned (free below) */
};

/* cmd_auth_token_parse parses opt into t.  On a refusal it returns 1 and
 * writes etcd's error into why (cap bytes): "auth: invalid auth options"
 * (an option not "k=v", a repeated one, an unknown type, a ttl Go cannot
 * parse, a file that cannot be read, an unknown sign-method), "auth:
 * missing key data", golang-jwt's key messages (auth_jwt_create), and
 * into detail (cap bytes, may be "") the reason etcd logs before it
 * ("problem loading JWT options: open f: no such file or directory").
 * Unknown JWT options are ignored with etcd's warning.  Free t with
 * cmd_auth_token_free after any return. */
int cmd_auth_token_parse(const char *opt, struct cmd_auth_token *t,
                         char *why, char *detail, size_t cap);
void cmd_auth_token_free(struct cmd_auth_token *t);

#endif
