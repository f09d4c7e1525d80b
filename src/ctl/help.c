/*
 * help.c - the help text etcdctl prints (its usage template: NAME, USAGE,
 * VERSION, API VERSION, COMMANDS, DESCRIPTION, OPTIONS, GLOBAL OPTIONS,
 * flag lines as etcdFlagUsages writes them) and Go's text/tabwriter that
 * aligns it (minwidth 0, tabwidth 8, padding 1, padchar '\t').
 */
#include <stdlib.h>
#include <string.h>

#include "ctl/ctl_int.h"

static size_t name_of(const struct ctl_cmd *c, const char **name)
{
    *name = c->use;
    return strcspn(c->use, " ");
}

static bool has_flags(const struct ctl_flag *fs) { return fs && fs->name; }

/* flag_lines writes etcdFlagUsages' lines for the flags of sets, sorted by
 * name. */
static void flag_lines(FILE *f, struct ctl_flag *const *sets, size_t nsets)
{
    const struct ctl_flag *all[128];
    size_t n = 0;
    for (size_t s = 0; s < nsets; s++)
        for (const struct ctl_flag *x = sets[s]; x && x->name && n < 128; x++)
            all[n++] = x;
    for (size_t i = 1; i < n; i++) /* insertion sort by name */
        for (size_t j = i; j > 0 && strcmp(all[j - 1]->name,
                                           all[j]->name) > 0; j--) {
            const struct ctl_flag *t = all[j];
            all[j] = all[j - 1];
            all[j - 1] = t;
        }
    for (size_t i = 0; i < n; i++) {
        const struct ctl_flag *x = all[i];
        bool opt = x->type == CTL_FLAG_BOOL;
        if (x->shorthand)
            fprintf(f, "  -%c, --%s", x->shorthand, x->name);
        else
            fprintf(f, "      --%s", x->name);
        fputs(opt ? "[=" : "=", f);
        if (x->type == CTL_FLAG_STRING)
            fprintf(f, "\"%s\"", x->def);
        else
            fputs(x->def, f);
        fprintf(f, "%s\t%s\n", opt ? "]" : "", x->usage);
    }
}

/* sub_lines writes the COMMANDS lines: every runnable command below c,
 * depth first in name order, named from below c. */
static void sub_lines(FILE *f, const struct ctl_cmd *c, const char *prefix,
                      const struct ctl_cmd *extra)
{
    const struct ctl_cmd *subs[64];
    size_t n = 0;
    for (size_t i = 0; c->subs && c->subs[i] && n < 63; i++)
        subs[n++] = c->subs[i];
    if (extra)
        subs[n++] = extra;
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0; j--) {
            const char *a, *b;
            size_t al = name_of(subs[j - 1], &a), bl = name_of(subs[j], &b);
            int cmp = strncmp(a, b, al < bl ? al : bl);
            if (cmp < 0 || (cmp == 0 && al <= bl))
                break;
            const struct ctl_cmd *t = subs[j];
            subs[j] = subs[j - 1];
            subs[j - 1] = t;
        }
    for (size_t i = 0; i < n; i++) {
        const char *name;
        size_t nl = name_of(subs[i], &name);
        char path[128];
        snprintf(path, sizeof path, "%s%s%.*s", prefix, *prefix ? " " : "",
                 (int)nl, name);
        if (subs[i]->run)
            fprintf(f, "\t%s\t%s\n", path, subs[i]->short_desc);
        sub_lines(f, subs[i], path, NULL);
    }
}

/* description writes the Long text's lines, trimmed as descToLines. */
static void description(FILE *f, const char *text)
{
    const char *b = text, *e = text + strlen(text);
    while (b < e && strchr("\n\t ", *b))
        b++;
    while (e > b && strchr("\n\t ", e[-1]))
        e--;
    fputs("\nDESCRIPTION:\n", f);
    while (b <= e) {
        const char *nl = memchr(b, '\n', (size_t)(e - b));
        size_t len = nl ? (size_t)(nl - b) : (size_t)(e - b);
        fprintf(f, "\t%.*s\n", (int)len, b);
        if (!nl)
            break;
        b = nl + 1;
    }
}

void ctl__usage_write(FILE *f, const struct ctl_cmd *root,
                      const struct ctl_cmd *cmd, const char *path,
                      struct ctl_flag *help_flag)
{
    const char *prog = ctl_program_name();
    bool top = cmd == root;
    fputs("NAME:\n", f);
    if (top)
        fprintf(f, "\t%s - %s\n", prog, cmd->short_desc);
    else
        fprintf(f, "\t%s - %s\n", path, cmd->short_desc);
    /* UseLine: the parent's path, the Use line, " [flags]" */
    char parent[160];
    snprintf(parent, sizeof parent, "%s", prog);
    if (!top) {
        const char *sp = strrchr(path, ' ');
        if (sp)
            snprintf(parent, sizeof parent, "%s %.*s", prog,
                     (int)(sp - path), path);
        fprintf(f, "\nUSAGE:\n\t%s %s%s\n", parent, cmd->use,
                strstr(cmd->use, "[flags]") ? "" : " [flags]");
    } else {
        fprintf(f, "\nUSAGE:\n\t%s [flags]\n", prog);
        fprintf(f, "\nVERSION:\n\t%s\n", CTL_VERSION);
    }
    if (cmd->subs) {
        fprintf(f, "\nAPI VERSION:\n\t%s\n", CTL_API_VERSION);
        fputs("\n\nCOMMANDS:\n", f);
        sub_lines(f, cmd, "", top ? ctl__help_cmd() : NULL);
    }
    if (cmd->long_desc)
        description(f, cmd->long_desc);
    fputs("\nOPTIONS:\n", f);
    if (top) {
        struct ctl_flag *sets[2] = {ctl__global_flags, help_flag};
        flag_lines(f, sets, 2);
    } else {
        struct ctl_flag *sets[2] = {cmd->flags, help_flag};
        flag_lines(f, sets, 2);
        if (has_flags(ctl__global_flags)) {
            /* inherited flags: the globals and the group's own */
            const struct ctl_cmd *group = ctl__cmd_parent(root, cmd);
            fputs("\nGLOBAL OPTIONS:\n", f);
            struct ctl_flag *g[2] = {ctl__global_flags,
                                     group ? group->flags : NULL};
            flag_lines(f, g, 2);
        }
    }
    fputs("\n", f);
}

/* ------------------------------------------------------------------------
 * Go's text/tabwriter, for this configuration
 * ---------------------------------------------------------------------- */

struct tw_cell {
    size_t off, size; /* the cell's bytes in the text */
    size_t width;     /* its width in runes */
};

struct tw_line {
    struct tw_cell *cells; /* cells; the last one is not tab-terminated */
    size_t n;              /* their number */
};

struct tw {
    const char *text;     /* the input */
    struct tw_line *lines; /* its lines */
    size_t nlines;        /* their number */
    bool last_open;       /* the text does not end in a newline */
    size_t widths[64];    /* the column widths being formatted */
    size_t nwidths;       /* how many */
    FILE *out;            /* where it goes */
};

static size_t runes(const char *s, size_t n)
{
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xc0) != 0x80)
            w++;
    return w;
}

static void tw_pad(struct tw *t, size_t textw, size_t cellw)
{
    cellw = (cellw + 7) / 8 * 8;
    size_t tabs = (cellw - textw + 7) / 8;
    for (size_t i = 0; i < tabs; i++)
        fputc('\t', t->out);
}

static void tw_write_lines(struct tw *t, size_t l0, size_t l1)
{
    for (size_t i = l0; i < l1; i++) {
        const struct tw_line *ln = &t->lines[i];
        for (size_t j = 0; j < ln->n; j++) {
            const struct tw_cell *c = &ln->cells[j];
            fwrite(t->text + c->off, 1, c->size, t->out);
            if (j < t->nwidths)
                tw_pad(t, c->width, t->widths[j]);
        }
        if (i + 1 < t->nlines || !t->last_open)
            fputc('\n', t->out);
    }
}

static void tw_format(struct tw *t, size_t l0, size_t l1)
{
    size_t column = t->nwidths;
    for (size_t i = l0; i < l1; i++) {
        if (column + 1 >= t->lines[i].n)
            continue;
        tw_write_lines(t, l0, i);
        l0 = i;
        size_t width = 0;
        for (; i < l1 && column + 1 < t->lines[i].n; i++) {
            size_t w = t->lines[i].cells[column].width + 1;
            if (w > width)
                width = w;
        }
        if (t->nwidths < 64) {
            t->widths[t->nwidths++] = width;
            tw_format(t, l0, i);
            t->nwidths--;
        }
        l0 = i; /* line i has no cell here: the loop may skip it */
    }
    tw_write_lines(t, l0, l1);
}

void ctl__tabwriter(const char *text, size_t len, FILE *out)
{
    struct tw t = {.text = text, .out = out};
    size_t cap = 16;
    t.lines = calloc(cap, sizeof *t.lines);
    size_t start = 0;
    while (t.lines && start < len) {
        if (t.nlines == cap) {
            struct tw_line *g = realloc(t.lines, 2 * cap * sizeof *g);
            if (!g)
                break;
            t.lines = g, cap *= 2;
        }
        const char *nl = memchr(text + start, '\n', len - start);
        size_t end = nl ? (size_t)(nl - text) : len;
        struct tw_line *ln = &t.lines[t.nlines++];
        *ln = (struct tw_line){0};
        size_t ncells = 1;
        for (size_t k = start; k < end; k++)
            ncells += text[k] == '\t';
        ln->cells = calloc(ncells, sizeof *ln->cells);
        if (!ln->cells)
            break;
        size_t cs = start;
        for (size_t k = start; k <= end; k++) {
            if (k == end || text[k] == '\t') {
                ln->cells[ln->n++] = (struct tw_cell){
                    cs, k - cs, runes(text + cs, k - cs)};
                cs = k + 1;
            }
        }
        t.last_open = nl == NULL;
        start = end + 1;
    }
    if (t.lines)
        tw_format(&t, 0, t.nlines);
    for (size_t i = 0; t.lines && i < t.nlines; i++)
        free(t.lines[i].cells);
    free(t.lines);
}
