/*
 * fuzz_dir.h - a scratch directory for a fuzz target that needs files:
 * in /dev/shm when there is one (the code under test fsyncs), named
 * cetcd-<target>.<pid>.  libFuzzer ends the process without running
 * atexit handlers, so the directory outlives it: each start removes those
 * its earlier runs left (their process is gone).  Static functions: a
 * target includes this once.
 */
#ifndef CETCD_FUZZ_DIR_H
#define CETCD_FUZZ_DIR_H

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* fuzz_dir_rm removes the tree at path. */
static void fuzz_dir_rm(const char *path)
{
    char child[1024];
    struct stat st;
    DIR *d = opendir(path);
    struct dirent *de;
    while (d != NULL && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        snprintf(child, sizeof child, "%s/%s", path, de->d_name);
        if (lstat(child, &st) == 0 && S_ISDIR(st.st_mode))
            fuzz_dir_rm(child);
        else
            unlink(child);
    }
    if (d != NULL)
        closedir(d);
    rmdir(path);
}

/* fuzz_dir_make creates the directory of target into out (cap bytes),
 * after removing those of dead earlier runs; false on failure. */
static bool fuzz_dir_make(const char *target, char *out, size_t cap)
{
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    char prefix[128], path[512];
    snprintf(prefix, sizeof prefix, "cetcd-%s.", target);
    DIR *d = opendir(base);
    struct dirent *de;
    while (d != NULL && (de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, prefix, strlen(prefix)) != 0)
            continue;
        long pid = strtol(de->d_name + strlen(prefix), NULL, 10);
        if (pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH) {
            snprintf(path, sizeof path, "%s/%s", base, de->d_name);
            fuzz_dir_rm(path);
        }
    }
    if (d != NULL)
        closedir(d);
    int n = snprintf(out, cap, "%s/%s%ld", base, prefix, (long)getpid());
    return n > 0 && (size_t)n < cap && mkdir(out, 0700) == 0;
}

#endif
