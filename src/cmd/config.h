/*
 * config.h - etcd's YAML configuration file (--config-file,
 * ETCD_CONFIG_FILE) for cetcd.
 *
 * etcd 3.4 reads the file with sigs.k8s.io/yaml: YAML 1.1 is converted to
 * JSON and decoded into embed.configYAML (and etcdmain.configProxy).  So:
 *   - the keys are the JSON tags of those structs (the flag names, plus the
 *     nested client-transport-security / peer-transport-security blocks
 *     with cert-file, key-file, client-cert-auth, trusted-ca-file and
 *     auto-tls); every other key is ignored (etcd ignores it silently;
 *     cetcd logs a warning naming it);
 *   - a key with no value (`data-dir:`) keeps the default;
 *   - values are typed as the Go fields are: durations are integers of
 *     nanoseconds (not "5s"), lists (log-outputs, cipher-suites) are YAML
 *     sequences, numbers given to string keys become strings;
 *   - a type mismatch is refused with the error Go's encoding/json gives
 *     (the alphabetically first key's, as etcd's sorted JSON decodes), and
 *     bad YAML with yaml.v2's message (libyaml's problem text and line).
 * Each key sets the flag of the same name (nested blocks: cert-file or
 * peer-cert-file, ...), as the flag would; flags.c then refuses what it
 * refuses for a flag, naming the key.  Single-threaded, no globals.
 */
#ifndef CETCD_CMD_CONFIG_H
#define CETCD_CMD_CONFIG_H

#include <stddef.h>

/* The largest file read (bytes); larger ones are refused. */
#define CONFIG_FILE_BYTES_MAX (4u << 20)

/* config_set_fn receives one key's value as a flag string: the flag's name
 * (without dashes) and its value, both valid only during the call.
 * Returns 0, or nonzero after writing an error into err (cap bytes), which
 * stops the parse.  key is the key as written in the file (for messages;
 * "client-transport-security.cert-file" for a nested one). */
typedef int (*config_set_fn)(void *ctx, const char *key, const char *flag,
                             const char *value, char *err, size_t cap);

/* config_warn_fn receives a warning (an ignored key); may be NULL. */
typedef void (*config_warn_fn)(void *ctx, const char *msg);

/* config_parse decodes the YAML document in buf[0..len) and calls set for
 * each key with a value, in file order, after the whole file was checked
 * (a bad file sets nothing).  Returns 0, or ERR_CONFIG_FILE with etcd's
 * message in err (cap bytes, always terminated). */
int config_parse(const char *buf, size_t len, config_set_fn set,
                 config_warn_fn warn, void *ctx, char *err, size_t cap);

/* config_load reads path (at most CONFIG_FILE_BYTES_MAX bytes) and
 * config_parse's it.  Errors: ERR_CONFIG_FILE (err says why: etcd's
 * "open <path>: no such file or directory", or the parse error). */
int config_load(const char *path, config_set_fn set, config_warn_fn warn,
                void *ctx, char *err, size_t cap);

#endif
