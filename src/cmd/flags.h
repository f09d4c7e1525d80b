/*
 * flags.h - etcd's member flags and ETCD_* environment variables for cetcd.
 *
 * The table in flags.c lists every flag etcd 3.4 takes, with its default and
 * help text, and whether cetcd has built the feature behind it.  A flag whose
 * feature is not built is refused when given a value other than its default
 * (never silently ignored).  A flag given on the command line shadows its
 * environment variable (logged, as etcd does).  With --config-file (or
 * ETCD_CONFIG_FILE) the YAML file (config.h) sets the options and every
 * other flag and ETCD_* variable is ignored, as etcd 3.4 does; a key whose
 * feature is not built is refused as its flag is, naming the key.
 * Single-threaded: called once from main().
 */
#ifndef CETCD_CMD_FLAGS_H
#define CETCD_CMD_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* flags_result: what flags_parse decided. */
enum flags_action {
    FLAGS_RUN,      /* start the member */
    FLAGS_HELP,     /* print help, exit 0 */
    FLAGS_VERSION,  /* print version, exit 0 */
    FLAGS_ERROR,    /* message already printed; exit with code 1 or 2 */
};

/* flags_parse parses argv and the environment.  On FLAGS_ERROR,
 * *exit_code_out is the code to exit with. */
enum flags_action flags_parse(int argc, char **argv, int *exit_code_out);

/* flags_get returns the final string value of a flag by name (without the
 * dashes), never NULL for a flag in the table; NULL for an unknown name. */
const char *flags_get(const char *name);
bool flags_get_bool(const char *name);
/* flags_get_u64 parses an integer flag (validated by flags_parse). */
uint64_t flags_get_u64(const char *name);
/* flags_get_i64 parses a signed integer flag (validated by flags_parse). */
int64_t flags_get_i64(const char *name);
/* flags_get_dur_ns parses a duration flag (Go's time.ParseDuration syntax,
 * validated by flags_parse) to nanoseconds; negative ones are kept. */
int64_t flags_get_dur_ns(const char *name);
/* flags_parse_duration: Go's time.ParseDuration of s (false: invalid). */
bool flags_parse_duration(const char *s, int64_t *ns_out);
/* flags_duration_error writes the error Go's time.ParseDuration gives
 * for s, which flags_parse_duration refused (etcd's messages quote it). */
void flags_duration_error(const char *s, char *buf, size_t cap);
/* flags_was_set: given on the command line or in the environment. */
bool flags_was_set(const char *name);

void flags_print_help(void);
void flags_print_version(void);

#endif
