/*
 * cmd.c - cobra's command finding and execution as etcdctl 3.4.23 (built
 * with Debian's cobra) behaves: the command path from the words that are
 * not flags (a unique prefix of a name matches it), unknown commands with
 * Levenshtein suggestions, help flags and the help command, flag errors
 * with the usage, and etcdctl's own "Error: ..." line after cobra's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/ctl_int.h"

/* The running command, for help and ctl_flag_changed. */
static struct {
    const struct ctl_cmd *root; /* the root command */
    const struct ctl_cmd *cmd;  /* the command found */
    char path[128];             /* its names below the root, "" for root */
    struct ctl_flag help[2];    /* its -h/--help flag and the end mark */
    char help_usage[96];        /* "help for <name>" */
    bool help_on;               /* -h given */
} run;

/* cobra's built-in help command. */
static int help_run(int argc, char **argv);
static const struct ctl_cmd help_cmd = {
    .use = "help [command]",
    .short_desc = "Help about any command",
    .long_desc = "Help provides help for any command in the application.\n"
                 "Simply type etcdctl help [path to command] for full "
                 "details.",
    .run = help_run,
};

const struct ctl_cmd *ctl_cmd_running(void) { return run.cmd; }

const struct ctl_cmd *ctl__help_cmd(void) { return &help_cmd; }

/* cmd_name is the first word of the Use line. */
static size_t cmd_name(const struct ctl_cmd *c, const char **name)
{
    *name = c->use;
    return strcspn(c->use, " ");
}

static bool is_root(const struct ctl_cmd *c) { return c == run.root; }

const struct ctl_cmd *ctl__cmd_parent(const struct ctl_cmd *root,
                                      const struct ctl_cmd *c)
{
    if (!root)
        root = run.root;
    if (!root || !c)
        return NULL;
    for (size_t i = 0; root->subs && root->subs[i]; i++)
        for (size_t k = 0; root->subs[i]->subs && root->subs[i]->subs[k];
             k++)
            if (root->subs[i]->subs[k] == c)
                return root->subs[i];
    return NULL;
}

/* flag_sets fills sets (room for 4) with the flags seen by c: its own,
 * its group's (cobra's persistent flags of "endpoint"), its help flag and
 * the globals.  Returns how many. */
static size_t flag_sets(const struct ctl_cmd *c, struct ctl_flag **sets)
{
    size_t n = 0;
    const struct ctl_cmd *group = ctl__cmd_parent(run.root, c);
    if (c->flags && !is_root(c))
        sets[n++] = c->flags;
    if (group && group->flags)
        sets[n++] = group->flags;
    sets[n++] = run.help;
    sets[n++] = ctl__global_flags;
    return n;
}

/* has_no_opt_def: a known bool flag (pflag's NoOptDefVal). */
static bool bool_flag(struct ctl_flag **sets, size_t n, const char *name,
                      size_t len, char sh)
{
    struct ctl_flag *f = ctl__flag_find(sets, n, name, len, sh);
    return f && f->type == CTL_FLAG_BOOL;
}

/* strip_flags returns in out the words of args that cobra's stripFlags
 * takes for command names. */
static int strip_flags(const struct ctl_cmd *c, char **args, int n,
                       char **out)
{
    struct ctl_flag *sets[4];
    size_t ns = flag_sets(c, sets);
    int k = 0;
    for (int i = 0; i < n; i++) {
        const char *s = args[i];
        if (strcmp(s, "--") == 0)
            break;
        bool takes = false;
        if (strncmp(s, "--", 2) == 0 && !strchr(s, '=') &&
            !bool_flag(sets, ns, s + 2, strlen(s + 2), 0))
            takes = true;
        else if (s[0] == '-' && !strchr(s, '=') && strlen(s) == 2 &&
                 !bool_flag(sets, ns, NULL, 0, s[1]))
            takes = true;
        if (takes) {
            if (n - i - 1 <= 1)
                break;
            i++;
            continue;
        }
        if (s[0] != '\0' && s[0] != '-')
            out[k++] = args[i];
    }
    return k;
}

/* find_next: an exact name, else the only command the word prefixes. */
static const struct ctl_cmd *find_next(const struct ctl_cmd *c,
                                       const char *word)
{
    const struct ctl_cmd *match = NULL;
    int matches = 0;
    const struct ctl_cmd *const *subs = c->subs;
    size_t wl = strlen(word);
    for (size_t i = 0; subs && subs[i]; i++) {
        const char *name;
        size_t nl = cmd_name(subs[i], &name);
        if (nl == wl && memcmp(name, word, wl) == 0)
            return subs[i];
        if (nl >= wl && memcmp(name, word, wl) == 0)
            match = subs[i], matches++;
    }
    if (is_root(c) && strcmp(word, "help") == 0)
        return &help_cmd;
    if (is_root(c) && strncmp("help", word, wl) == 0)
        match = &help_cmd, matches++;
    return matches == 1 ? match : NULL;
}

/* remove_first drops the first argument equal to word. */
static int remove_first(char **args, int n, const char *word)
{
    for (int i = 0; i < n; i++) {
        if (strcmp(args[i], word) == 0) {
            memmove(args + i, args + i + 1, (size_t)(n - i - 1) * sizeof *args);
            return n - 1;
        }
    }
    return n;
}

/* find walks down from c; returns the command and leaves its arguments
 * in args[0..*n). */
static const struct ctl_cmd *find(const struct ctl_cmd *c, char **args,
                                  int *n, char *path, size_t cap)
{
    for (;;) {
        char *words[256];
        int k = strip_flags(c, args, *n < 256 ? *n : 256, words);
        if (k == 0)
            return c;
        const struct ctl_cmd *next = find_next(c, words[0]);
        if (!next)
            return c;
        *n = remove_first(args, *n, words[0]);
        const char *name;
        size_t nl = cmd_name(next, &name);
        size_t pl = strlen(path);
        snprintf(path + pl, cap - pl, "%s%.*s", pl ? " " : "", (int)nl,
                 name);
        c = next;
    }
}

/* Levenshtein distance, case-insensitive (cobra's ld). */
static size_t ld(const char *a, const char *b, size_t bl)
{
    size_t al = strlen(a), d[64][64];
    if (al >= 64 || bl >= 64)
        return 99;
    for (size_t i = 0; i <= al; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= bl; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= al; i++) {
        for (size_t j = 1; j <= bl; j++) {
            int ca = a[i - 1] | 0x20, cb = b[j - 1] | 0x20;
            size_t best = d[i - 1][j - 1] + (ca == cb ? 0 : 1);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            d[i][j] = best;
        }
    }
    return d[al][bl];
}

/* unknown_command prints cobra's and etcdctl's lines for root + word. */
static int unknown_command(const char *word)
{
    char msg[1024];
    int len = snprintf(msg, sizeof msg, "unknown command \"%s\" for \"%s\"",
                       word, ctl_program_name());
    bool first = true;
    for (size_t i = 0; run.root->subs[i]; i++) {
        const char *name;
        size_t nl = cmd_name(run.root->subs[i], &name);
        size_t wl = strlen(word);
        bool prefix = nl >= wl && strncasecmp(name, word, wl) == 0;
        if (ld(word, name, nl) > 2 && !prefix)
            continue;
        if (len < (int)sizeof msg)
            len += snprintf(msg + len, sizeof msg - (size_t)len, "%s\t%.*s\n",
                            first ? "\n\nDid you mean this?\n" : "", (int)nl,
                            name);
        first = false;
    }
    fprintf(stderr, "Error: %s\nRun '%s --help' for usage.\n", msg,
            ctl_program_name());
    ctl_exit(CTL_EXIT_ERROR, "%s", msg);
}

void ctl_usage_print(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    ctl__usage_write(m, run.root, run.cmd, run.path[0] ? run.path : NULL,
                     run.help);
    fclose(m);
    ctl__tabwriter(text, len, stdout);
    fflush(stdout);
    free(text);
}

static int help_run(int argc, char **argv)
{
    char *args[256];
    int n = argc < 256 ? argc : 256;
    memcpy(args, argv, (size_t)n * sizeof *args);
    run.path[0] = '\0';
    const struct ctl_cmd *c = find(run.root, args, &n, run.path,
                                   sizeof run.path);
    char *words[256];
    if (strip_flags(c, args, n, words) > 0 && c == run.root) {
        fprintf(stderr, "Unknown help topic [");
        for (int i = 0; i < argc; i++)
            fprintf(stderr, "%s`%s`", i ? " " : "", argv[i]);
        fprintf(stderr, "]\n");
        run.path[0] = '\0';
        /* cobra prints the root's usage here without having given the
         * root its help flag: no -h line */
        run.help[0] = (struct ctl_flag)CTL_FLAG_END;
    }
    run.cmd = c;
    const char *name;
    size_t nl = cmd_name(c, &name);
    snprintf(run.help_usage, sizeof run.help_usage, "help for %.*s",
             (int)nl, is_root(c) ? ctl_program_name() : name);
    ctl_usage_print();
    return CTL_EXIT_SUCCESS;
}

bool ctl_flag_changed(const char *name)
{
    struct ctl_flag *sets[4];
    size_t ns = flag_sets(run.cmd, sets);
    struct ctl_flag *f = ctl__flag_find(sets, ns, name, strlen(name), 0);
    return f && f->changed;
}

/* flag_error prints cobra's error, the usage and etcdctl's line. */
static void flag_error(const char *err)
{
    fprintf(stderr, "Error: %s\n", err);
    ctl_usage_print();
    fprintf(stderr, "\n");
    ctl_exit(CTL_EXIT_ERROR, "%s", err);
}

int ctl_main(const struct ctl_cmd *root, int argc, char **argv)
{
    run.root = root;
    int n = argc - 1;
    char **args = calloc((size_t)argc + 1, sizeof *args);
    char **pos = calloc((size_t)argc + 1, sizeof *pos);
    if (!args || !pos)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    memcpy(args, argv + 1, (size_t)n * sizeof *args);
    ctl__flags_defaults(ctl__global_flags);

    const struct ctl_cmd *c = find(root, args, &n, run.path,
                                   sizeof run.path);
    run.cmd = c;
    const char *name;
    size_t nl = cmd_name(c, &name);
    snprintf(run.help_usage, sizeof run.help_usage, "help for %.*s",
             (int)nl, is_root(c) ? ctl_program_name() : name);
    run.help[0] = (struct ctl_flag){"help", 'h', CTL_FLAG_BOOL, &run.help_on,
                                    "false", run.help_usage, false};
    run.help[1] = (struct ctl_flag)CTL_FLAG_END;
    ctl__flags_defaults(run.help);
    if (c->flags && !is_root(c))
        ctl__flags_defaults(c->flags);
    const struct ctl_cmd *group = ctl__cmd_parent(root, c);
    if (group && group->flags)
        ctl__flags_defaults(group->flags);

    char *words[256];
    if (is_root(c) && strip_flags(c, args, n < 256 ? n : 256, words) > 0)
        unknown_command(words[0]);

    struct ctl_flag *sets[4];
    size_t ns = flag_sets(c, sets);
    int npos = 0;
    char err[512];
    if (ctl__flags_parse(sets, ns, args, n, pos, &npos, err, sizeof err))
        flag_error(err);
    int rc = CTL_EXIT_SUCCESS;
    if (run.help_on || !c->run)
        ctl_usage_print();
    else
        rc = c->run(npos, pos);
    fflush(stdout);
    free(args); /* the leak checker of the ASan build would report them */
    free(pos);
    return rc;
}
