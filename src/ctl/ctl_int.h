/*
 * ctl_int.h - declarations shared by the frame's files (flags.c, cmd.c,
 * help.c, global.c); commands use ctl.h only.
 */
#ifndef CETCD_CTL_INT_H
#define CETCD_CTL_INT_H

#include <stdio.h>

#include "ctl/ctl.h"

/* The global (persistent) flags of the root command, and cobra's help
 * flag (one per command: "help for <name>"). */
extern struct ctl_flag ctl__global_flags[];

/* ctl__flags_defaults sets every flag of the array from its default text
 * and clears changed. */
void ctl__flags_defaults(struct ctl_flag *fs);

/* ctl__flags_parse parses args[0..n) against the flag arrays sets (looked
 * up in order); positional arguments go to pos (room for n), their count
 * to *npos.  On error returns -1 with pflag's text in err. */
int ctl__flags_parse(struct ctl_flag *const *sets, size_t nsets, char **args,
                     int n, char **pos, int *npos, char *err, size_t cap);

/* ctl__flag_find looks up a flag by long name (name, len) or, when
 * shorthand is not 0, by its one letter. */
struct ctl_flag *ctl__flag_find(struct ctl_flag *const *sets, size_t nsets,
                                const char *name, size_t len, char shorthand);

/* ctl__flag_apply sets f from v as the command line does (marks it
 * changed); -1 with pflag's "invalid argument ..." text in err. */
int ctl__flag_apply(struct ctl_flag *f, const char *v, char *err,
                    size_t cap);

/* ctl__usage_write writes cmd's help (etcdctl's template, before the
 * tabwriter) to f; path is the command's names from the root's child
 * ("member list"), NULL for the root. */
void ctl__usage_write(FILE *f, const struct ctl_cmd *root,
                      const struct ctl_cmd *cmd, const char *path,
                      struct ctl_flag *help_flag);

/* ctl__help_cmd is cobra's "help [command]" command, listed at the root. */
const struct ctl_cmd *ctl__help_cmd(void);

/* ctl__cmd_parent returns the group (a command below root) c is a
 * sub-command of, or NULL (root NULL: the running root).  A group's flags
 * are cobra's persistent flags: its sub-commands take them too, and list
 * them with the global ones (etcdctl's "endpoint --cluster"). */
const struct ctl_cmd *ctl__cmd_parent(const struct ctl_cmd *root,
                                      const struct ctl_cmd *c);

/* ctl__tabwriter formats text as Go's text/tabwriter with minwidth 0,
 * tabwidth 8, padding 1, padchar '\t' and writes it to out. */
void ctl__tabwriter(const char *text, size_t len, FILE *out);

/* ctl__env_apply sets the global flags not given on the command line from
 * ETCDCTL_* variables, as etcd's pkg/flags SetPflagsFromEnv: a bad value
 * is ignored (etcdctl ignores the error), and variables that name no flag
 * are reported on stderr as capnslog warnings. */
void ctl__env_apply(void);

/* ctl__program_set takes the program's name from argv[0]. */
void ctl__program_set(const char *argv0);

/* ctl__debug_dump prints the ETCDCTL_*=value lines --debug prints. */
void ctl__debug_dump(void);

#endif /* CETCD_CTL_INT_H */
