/*
 * fuzz_replay.c - runs fuzz/fuzz_raft.c on files without libFuzzer.
 *
 * GOAL: the seed corpus (and any crash file a fuzzing run leaves) can be
 * replayed in every build, including the ASan+UBSan one, and shows how deep
 * each input drives node 1.
 * METHOD: a main() that feeds each file to LLVMFuzzerTestOneInput and
 * prints the final status the harness reports (fuzz_raft_report).
 *
 * Usage: raft_fuzz_replay FILE...
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "raft/raft.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *current;

void fuzz_raft_report(const struct raft_status *st)
{
    printf("%s: %s term %" PRIu64 " commit %" PRIu64 " applied %" PRIu64
           " first %" PRIu64 " last %" PRIu64 " members %u+%u\n",
           current, raft_role_name(st->role), st->term, st->commit,
           st->applied, st->first_index, st->last_index, st->conf.n_voters,
           st->conf.n_learners);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (f == NULL) {
            perror(argv[i]);
            return 1;
        }
        static uint8_t buf[1 << 20];
        size_t n = fread(buf, 1, sizeof(buf), f);
        fclose(f);
        current = argv[i];
        LLVMFuzzerTestOneInput(buf, n);
    }
    return 0;
}
