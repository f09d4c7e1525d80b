/*
 * fault_cost.c - what a page fault costs on this machine, in CPU time per
 * 4 KiB page of a shared file mapping (the store's write_map): the first
 * write to new pages of a file, a write after MADV_DONTNEED (a map trim),
 * a read after it, a write to a page mapped by a read, a write after
 * msync (write-protected), and MADV_POPULATE_WRITE for the same pages.
 * Used for docs/BENCHMARKS.md (session 15).  Build and run:
 *   cc -O2 -o /tmp/fault_cost bench/fault_cost.c && /tmp/fault_cost /tmp
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PAGES 16384
#define PAGE 4096

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void report(const char *what, double t0)
{
    printf("%-34s %6.2f us/page\n", what, (cpu_now() - t0) / PAGES * 1e6);
}

static void touch(char *m, char c)
{
    for (size_t i = 0; i < PAGES; i++)
        m[i * PAGE] = c;
}

int main(int argc, char **argv)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/fault_cost.%d", argc > 1 ? argv[1] : "/tmp",
             (int)getpid());
    size_t len = (size_t)PAGES * PAGE;
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)len) != 0) {
        perror(path);
        return 1;
    }
    unlink(path);
    char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    double t = cpu_now();
    touch(m, 1);
    report("write, new pages", t);
    madvise(m, len, MADV_DONTNEED);
    t = cpu_now();
    touch(m, 2);
    report("write after MADV_DONTNEED", t);
    madvise(m, len, MADV_DONTNEED);
    t = cpu_now();
    volatile char sum = 0;
    for (size_t i = 0; i < PAGES; i++)
        sum += m[i * PAGE];
    report("read after MADV_DONTNEED", t);
    t = cpu_now();
    touch(m, 3);
    report("write to a read-mapped page", t);
    msync(m, len, MS_SYNC);
    t = cpu_now();
    touch(m, 4);
    report("write after msync", t);
    madvise(m, len, MADV_DONTNEED);
    t = cpu_now();
    int rc = madvise(m, len, MADV_POPULATE_WRITE);
    report(rc == 0 ? "MADV_POPULATE_WRITE" : "MADV_POPULATE_WRITE (failed)", t);
    t = cpu_now();
    touch(m, 5);
    report("write after populate", t);
    return 0;
}
