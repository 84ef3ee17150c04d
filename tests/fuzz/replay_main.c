/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * replay_main.c — the regression replay of a fuzz target without libFuzzer:
 * feeds every regular file of the directories (or the files) named on the
 * command line to LLVMFuzzerTestOneInput, in name order so a failure
 * reproduces the same way. Built with the normal compiler and registered as
 * ctest fuzz/<target>; under -DP3D_SANITIZE=ON the same run is an ASan +
 * UBSan replay. A crash is a crash of the test; a harness assertion aborts.
 */
#include "fuzz_common.h"

#include <dirent.h>

__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    return 0;
}

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 4096, n = 0, k;
    uint8_t *b = malloc(cap);
    while (b && (k = fread(b + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) {
            uint8_t *nb = realloc(b, cap * 2);
            if (!nb)
                free(b);
            b = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (!b) {
        fprintf(stderr, "replay: out of memory reading %s\n", path);
        return -1;
    }
    /* an exact-size copy, so ASan sees reads past the input's end */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact)
        abort();
    memcpy(exact, b, n);
    free(b);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

int main(int argc, char **argv)
{
    int rc = 0;
    size_t total = 0;
    LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) < 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            rc = 1;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            rc |= run_file(argv[i]) < 0;
            total++;
            continue;
        }
        struct dirent **ents = NULL;
        int n = scandir(argv[i], &ents, NULL, alphasort);
        if (n < 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            rc = 1;
            continue;
        }
        for (int k = 0; k < n; k++) {
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", argv[i], ents[k]->d_name);
            if (ents[k]->d_name[0] != '.' && stat(p, &st) == 0 &&
                S_ISREG(st.st_mode)) {
                rc |= run_file(p) < 0;
                total++;
            }
            free(ents[k]);
        }
        free(ents);
    }
    printf("replayed %zu inputs\n", total);
    if (total == 0) {
        fprintf(stderr, "replay: no inputs found (an empty corpus tests nothing)\n");
        rc = 1;
    }
    return rc;
}
