/*
 * flags.c - pflag's parsing as etcdctl's cobra commands see it: flag
 * values from their default texts, "--x=v", "--x v", "-x v", "-xv",
 * "-x=v", bool flags without a value, "--" ending the flags, and pflag's
 * error texts ("unknown flag: --x", "invalid argument ...").
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/ctl_int.h"
#include "ctl/print.h"

/* Go's strconv.ParseBool. */
static int parse_bool(const char *s, bool *out)
{
    static const char *const t[] = {"1", "t", "T", "TRUE", "true", "True"};
    static const char *const f[] = {"0", "f", "F", "FALSE", "false",
                                    "False"};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (strcmp(s, t[i]) == 0) {
            *out = true;
            return 0;
        }
        if (strcmp(s, f[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    return -1;
}

/* Go's strconv.ParseInt(s, 0, bits) / ParseUint: base prefixes 0x, 0o, 0b
 * and a leading 0 (octal), underscores only with a prefix.  err gets Go's
 * text. */
static int parse_int(const char *s, bool is_unsigned, int bits,
                     int64_t *i_out, uint64_t *u_out, char *err, size_t cap)
{
    const char *fn = is_unsigned ? "strconv.ParseUint" : "strconv.ParseInt";
    const char *p = s;
    bool neg = false;
    if (!is_unsigned && (*p == '+' || *p == '-'))
        neg = *p++ == '-';
    int base = 10;
    bool prefixed = false;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        base = 16, p += 2, prefixed = true;
    } else if (p[0] == '0' && (p[1] == 'o' || p[1] == 'O')) {
        base = 8, p += 2, prefixed = true;
    } else if (p[0] == '0' && (p[1] == 'b' || p[1] == 'B')) {
        base = 2, p += 2, prefixed = true;
    } else if (p[0] == '0' && p[1] != '\0') {
        base = 8, p += 1, prefixed = true;
    }
    uint64_t v = 0, limit = is_unsigned
                                ? (bits == 64 ? UINT64_MAX
                                              : ((uint64_t)1 << bits) - 1)
                                : ((uint64_t)1 << (bits - 1));
    bool any = false, range = false, last_us = false;
    if (*p == '\0' && !prefixed)
        goto syntax;
    for (; *p; p++) {
        if (*p == '_' && prefixed && !last_us) {
            last_us = true;
            continue;
        }
        int d = isdigit((unsigned char)*p)   ? *p - '0'
                : isalpha((unsigned char)*p) ? tolower((unsigned char)*p) - 'a' + 10
                                             : 99;
        if (d >= base)
            goto syntax;
        last_us = false;
        any = true;
        if (v > (limit - (uint64_t)d) / (uint64_t)base)
            range = true;
        else
            v = v * (uint64_t)base + (uint64_t)d;
    }
    if ((!any && base != 8) || last_us)
        goto syntax;
    if (!is_unsigned && !neg && v == limit)
        range = true;
    if (range) {
        snprintf(err, cap, "%s: parsing \"%s\": value out of range", fn, s);
        return -1;
    }
    if (is_unsigned)
        *u_out = v;
    else
        *i_out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
syntax:
    snprintf(err, cap, "%s: parsing \"%s\": invalid syntax", fn, s);
    return -1;
}

/* One CSV record of a StringSlice value (encoding/csv: quoted fields,
 * "" inside quotes). */
static int parse_csv(const char *s, struct ctl_strings *l, char *err,
                     size_t cap)
{
    if (*s == '\0')
        return 0; /* pflag: "" sets an empty slice */
    size_t n = strlen(s);
    char *field = malloc(n + 1);
    if (!field)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    const char *p = s;
    for (;;) {
        size_t k = 0;
        if (*p == '"') {
            for (p++;; p++) {
                if (*p == '\0') {
                    snprintf(err, cap,
                             "parse error on line 1, column %zu: extraneous "
                             "or missing \" in quoted-field",
                             (size_t)(p - s) + 1);
                    free(field);
                    return -1;
                }
                if (*p == '"' && p[1] == '"') {
                    field[k++] = '"', p++;
                } else if (*p == '"') {
                    p++;
                    break;
                } else {
                    field[k++] = *p;
                }
            }
            if (*p != ',' && *p != '\0') {
                snprintf(err, cap,
                         "parse error on line 1, column %zu: extraneous or "
                         "missing \" in quoted-field",
                         (size_t)(p - s) + 1);
                free(field);
                return -1;
            }
        } else {
            while (*p && *p != ',')
                field[k++] = *p++;
        }
        field[k] = '\0';
        ctl_strings_add(l, field);
        if (*p != ',')
            break;
        p++;
    }
    free(field);
    return 0;
}

/* flag_set sets f from the text v; on error err has pflag's value error
 * (without the "invalid argument" prefix). */
static int flag_set(struct ctl_flag *f, const char *v, bool from_default,
                    char *err, size_t cap)
{
    int64_t i = 0;
    uint64_t u = 0;
    switch (f->type) {
    case CTL_FLAG_BOOL:
        if (parse_bool(v, (bool *)f->var) != 0) {
            snprintf(err, cap, "strconv.ParseBool: parsing \"%s\": invalid "
                               "syntax", v);
            return -1;
        }
        return 0;
    case CTL_FLAG_STRING:
        *(const char **)f->var = v;
        return 0;
    case CTL_FLAG_INT64:
        if (parse_int(v, false, 64, &i, &u, err, cap) != 0)
            return -1;
        *(int64_t *)f->var = i;
        return 0;
    case CTL_FLAG_UINT64:
        if (parse_int(v, true, 64, &i, &u, err, cap) != 0)
            return -1;
        *(uint64_t *)f->var = u;
        return 0;
    case CTL_FLAG_DURATION:
        return ctl_duration_parse(v, (int64_t *)f->var, err, cap);
    case CTL_FLAG_STRINGS:
    case CTL_FLAG_STRING_ARRAY: {
        struct ctl_strings *l = f->var;
        if (from_default) {
            /* "[a,b]" */
            ctl_strings_clear(l);
            size_t n = strlen(v);
            if (n >= 2 && v[0] == '[' && v[n - 1] == ']' && n > 2) {
                char *in = strndup(v + 1, n - 2);
                if (!in)
                    ctl_exit(CTL_EXIT_ERROR, "out of memory");
                int rc = parse_csv(in, l, err, cap);
                free(in);
                return rc;
            }
            return 0;
        }
        if (!f->changed)
            ctl_strings_clear(l);
        if (f->type == CTL_FLAG_STRING_ARRAY) {
            ctl_strings_add(l, v);
            return 0;
        }
        return parse_csv(v, l, err, cap);
    }
    }
    return -1;
}

void ctl__flags_defaults(struct ctl_flag *fs)
{
    char err[256];
    for (; fs && fs->name; fs++) {
        fs->changed = false;
        int rc = flag_set(fs, fs->def, true, err, sizeof err);
        if (rc != 0) {
            fprintf(stderr, "cetcdctl: bad default of --%s: %s\n", fs->name,
                    err);
            abort();
        }
    }
}

/* ctl__flag_apply sets a flag from the command line (or the environment)
 * and marks it changed; on error writes pflag's whole error text. */
int ctl__flag_apply(struct ctl_flag *f, const char *v, char *err, size_t cap)
{
    char why[256];
    if (flag_set(f, v, false, why, sizeof why) != 0) {
        char name[80];
        if (f->shorthand)
            snprintf(name, sizeof name, "-%c, --%s", f->shorthand, f->name);
        else
            snprintf(name, sizeof name, "--%s", f->name);
        char *q = NULL;
        size_t ql = 0;
        FILE *m = open_memstream(&q, &ql);
        if (m) {
            ctl_quote(m, v, strlen(v)); /* pflag quotes the value with %q */
            fclose(m);
        }
        snprintf(err, cap, "invalid argument %s for \"%s\" flag: %s",
                 q ? q : v, name, why);
        free(q);
        return -1;
    }
    f->changed = true;
    return 0;
}

struct ctl_flag *ctl__flag_find(struct ctl_flag *const *sets, size_t nsets,
                                const char *name, size_t len, char shorthand)
{
    for (size_t s = 0; s < nsets; s++) {
        for (struct ctl_flag *f = sets[s]; f && f->name; f++) {
            if (shorthand ? f->shorthand == shorthand
                          : strlen(f->name) == len &&
                                memcmp(f->name, name, len) == 0)
                return f;
        }
    }
    return NULL;
}

/* long_arg handles args[*i] = "--name[=v]". */
static int long_arg(struct ctl_flag *const *sets, size_t nsets, char **args,
                    int n, int *i, char *err, size_t cap)
{
    const char *s = args[*i], *name = s + 2;
    if (*name == '\0' || *name == '-' || *name == '=') {
        snprintf(err, cap, "bad flag syntax: %s", s);
        return -1;
    }
    const char *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    struct ctl_flag *f = ctl__flag_find(sets, nsets, name, len, 0);
    if (!f) {
        snprintf(err, cap, "unknown flag: --%.*s", (int)len, name);
        return -1;
    }
    const char *v;
    if (eq)
        v = eq + 1;
    else if (f->type == CTL_FLAG_BOOL)
        v = "true";
    else if (*i + 1 < n)
        v = args[++*i];
    else {
        snprintf(err, cap, "flag needs an argument: %s", s);
        return -1;
    }
    return ctl__flag_apply(f, v, err, cap);
}

/* short_args handles args[*i] = "-abc", "-wjson", "-w=json", "-w json". */
static int short_args(struct ctl_flag *const *sets, size_t nsets,
                      char **args, int n, int *i, char *err, size_t cap)
{
    const char *sh = args[*i] + 1;
    while (*sh) {
        struct ctl_flag *f = ctl__flag_find(sets, nsets, NULL, 0, *sh);
        if (!f) {
            snprintf(err, cap, "unknown shorthand flag: '%c' in -%s", *sh,
                     sh);
            return -1;
        }
        const char *v;
        const char *next = sh + 1;
        if (sh[1] == '=' && sh[2] != '\0') {
            v = sh + 2, next = "";
        } else if (f->type == CTL_FLAG_BOOL) {
            v = "true";
        } else if (sh[1] != '\0') {
            v = sh + 1, next = "";
        } else if (*i + 1 < n) {
            v = args[++*i];
        } else {
            snprintf(err, cap, "flag needs an argument: '%c' in -%s", *sh,
                     sh);
            return -1;
        }
        if (ctl__flag_apply(f, v, err, cap) != 0)
            return -1;
        sh = next;
    }
    return 0;
}

int ctl__flags_parse(struct ctl_flag *const *sets, size_t nsets, char **args,
                     int n, char **pos, int *npos, char *err, size_t cap)
{
    *npos = 0;
    for (int i = 0; i < n; i++) {
        const char *s = args[i];
        if (s[0] != '-' || s[1] == '\0') {
            pos[(*npos)++] = args[i];
            continue;
        }
        if (s[1] == '-' && s[2] == '\0') {
            for (i++; i < n; i++)
                pos[(*npos)++] = args[i];
            break;
        }
        int rc = s[1] == '-' ? long_arg(sets, nsets, args, n, &i, err, cap)
                             : short_args(sets, nsets, args, n, &i, err, cap);
        if (rc != 0)
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------
 * String lists
 * ---------------------------------------------------------------------- */

void ctl_strings_add(struct ctl_strings *l, const char *s)
{
    char **v = realloc(l->v, (l->n + 1) * sizeof *v);
    char *c = strdup(s);
    if (!v || !c)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    v[l->n++] = c;
    l->v = v;
}

void ctl_strings_clear(struct ctl_strings *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}
