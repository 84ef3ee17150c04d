/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * proctitle.c — what `ps` shows for a forked agent: `par3drun [agent n2]`
 * instead of a copy of the launcher's own command line, so the agents of
 * an --emulate job (or of a node) can be told apart. The command line
 * lives in the argv strings the kernel laid out one after another; main()
 * parses a copy of them (p3d_proctitle_init), so that area may be
 * overwritten in a child. The thread name (ps -o comm, top) is set too.
 */
#include "ranks.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

static char *area;       /* argv[0]'s first byte */
static size_t room;      /* through the last argument's NUL */
static char **copy_argv; /* what main parses (the options point into it) */
static int copy_argc;

char **p3d_proctitle_init(int argc, char **argv)
{
    char **copy = calloc((size_t)argc + 1, sizeof *copy);
    if (!copy)
        return argv;
    for (int i = 0; i < argc; i++)
        if (!(copy[i] = strdup(argv[i]))) {
            for (int k = 0; k < i; k++)
                free(copy[k]);
            free(copy);
            return argv;
        }
    /* only the contiguous run of argument strings is ours to reuse */
    char *end = argc > 0 ? argv[0] : NULL;
    for (int i = 0; i < argc && argv[i] == end; i++)
        end = argv[i] + strlen(argv[i]) + 1;
    if (argc > 0 && end > argv[0]) {
        area = argv[0];
        room = (size_t)(end - argv[0]);
    }
    copy_argv = copy; /* lives until p3d_proctitle_done: the options point into it */
    copy_argc = argc;
    return copy;
}

void p3d_proctitle_done(void)
{
    for (int i = 0; copy_argv && i < copy_argc; i++)
        free(copy_argv[i]);
    free(copy_argv);
    copy_argv = NULL;
}

void p3d_proctitle_set(const char *comm, const char *fmt, ...)
{
    char t[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t, sizeof t, fmt, ap);
    va_end(ap);
    prctl(PR_SET_NAME, comm, 0, 0, 0); /* the kernel keeps 15 bytes */
    if (!area || room < 2)
        return;
    /* the rest zeroed: ps stops at the first NUL after the title */
    size_t n = strlen(t);
    if (n > room - 1)
        n = room - 1;
    memcpy(area, t, n);
    memset(area + n, 0, room - n);
}
