/* SPDX-License-Identifier: BSD-3-Clause */
/* spawnloop.c — the floor for bench/launch.sh: posix_spawn N copies of a
 * program and wait for all of them, nothing else.
 * usage: spawnloop N PROGRAM [ARGS...] */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

extern char **environ;

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: spawnloop N PROGRAM [ARGS...]\n");
        return 2;
    }
    int n = atoi(argv[1]), rc = 0;
    for (int i = 0; i < n; i++) {
        pid_t pid;
        if (posix_spawn(&pid, argv[2], NULL, NULL, argv + 2, environ) != 0) {
            perror("posix_spawn");
            return 1;
        }
    }
    int st;
    while (wait(&st) > 0)
        if (!WIFEXITED(st) || WEXITSTATUS(st))
            rc = 1;
    return rc;
}
