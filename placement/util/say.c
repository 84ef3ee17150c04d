/* SPDX-License-Identifier: BSD-3-Clause */
/* say.c — notes and warnings on stderr, behind one --quiet check, and the
 * error lines no --quiet silences (say.h). */
#include "say.h"
#include "termsafe.h"
#include "p3d/base.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int quiet;

void p3d_say_set_quiet(int q)
{
    quiet = q;
}

int p3d_say_quiet(void)
{
    return quiet;
}

static void say(const char *prefix, const char *fmt, va_list ap)
{
    if (quiet)
        return;
    /* one line, one write: it may meet the ranks' output on the terminal.
     * stderr is the guarded stream (termsafe.h): what the text quotes is
     * escaped on its way out */
    char line[4096];
    int n = snprintf(line, sizeof line, "%s", prefix);
    vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    size_t len = strlen(line);
    line[len] = '\n';
    line[len + 1] = 0;
    fputs(line, stderr);
}

void p3d_note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say("par3drun: ", fmt, ap);
    va_end(ap);
}

void p3d_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say("par3drun: warning: ", fmt, ap);
    va_end(ap);
}

void p3d_say_error(const char *fmt, ...)
{
    /* what it quotes may come from outside (a spec, a peer): one path to
     * the terminal (termsafe.h) */
    va_list ap;
    va_start(ap, fmt);
    char *m = p3d_vfmt(fmt, ap);
    va_end(ap);
    fputs("par3drun: ", stderr);
    p3d_term_fputs(m ? m : "out of memory", stderr);
    fputc('\n', stderr);
    free(m);
}

int p3d_fail_input(char *msg)
{
    /* every bad-input message ends here: one last escape of what it quotes */
    fputs("par3drun: ", stderr);
    p3d_term_fputs(msg ? msg : "out of memory", stderr);
    fputc('\n', stderr);
    free(msg);
    return P3D_EXIT_BADINPUT;
}
