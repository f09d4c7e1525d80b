/*
 * password.c - bcrypt hashes through libcrypt (auth.h): never written by
 * hand.  crypt_r's output is compared in constant time.
 */
#include "auth/auth.h"

#include <crypt.h>
#include <string.h>
#include <sys/random.h>

#include "util/err.h"
#include "util/mem.h"

/* bcrypt reads at most 72 bytes of the password, and none past a NUL: a
 * copy NUL-terminated at min(len, 72) (Go's bcrypt cuts at 72 too; a
 * password with a NUL inside hashes as its part before the NUL here). */
static void pw_copy(const char *pw, size_t len, char out[73])
{
    if (len > 72)
        len = 72;
    memcpy(out, pw, len);
    out[len] = '\0';
}

int auth_password_hash(const char *password, size_t len, int cost,
                       char out[AUTH_HASH_MAX])
{
    if (cost < AUTH_BCRYPT_COST_MIN || cost > AUTH_BCRYPT_COST_MAX)
        return ERR_INVAL;
    char rnd[16];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        return ERR_IO;
    char salt[CRYPT_GENSALT_OUTPUT_SIZE];
    if (crypt_gensalt_rn("$2b$", (unsigned long)cost, rnd, sizeof rnd, salt,
                         sizeof salt) == NULL)
        return ERR_IO;
    struct crypt_data *cd = mem_calloc(1, sizeof *cd);
    if (cd == NULL)
        return ERR_NOMEM;
    char pw[73];
    pw_copy(password, len, pw);
    const char *h = crypt_r(pw, salt, cd);
    int rc = 0;
    if (h == NULL || h[0] == '*' || strlen(h) >= AUTH_HASH_MAX)
        rc = ERR_IO;
    else
        memcpy(out, h, strlen(h) + 1);
    memset(pw, 0, sizeof pw);
    memset(cd, 0, sizeof *cd);
    mem_free(cd);
    return rc;
}

bool auth_password_check(const char *password, size_t len, const char *hash)
{
    if (hash == NULL || hash[0] != '$')
        return false;
    struct crypt_data *cd = mem_calloc(1, sizeof *cd);
    if (cd == NULL)
        return false;
    char pw[73];
    pw_copy(password, len, pw);
    const char *h = crypt_r(pw, hash, cd);
    bool ok = false;
    if (h != NULL && h[0] != '*') {
        size_t n = strlen(hash);
        if (strlen(h) == n) {
            unsigned char diff = 0;
            for (size_t i = 0; i < n; i++)
                diff |= (unsigned char)(h[i] ^ hash[i]);
            ok = diff == 0;
        }
    }
    memset(pw, 0, sizeof pw);
    memset(cd, 0, sizeof *cd);
    mem_free(cd);
    return ok;
}
