/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * warnings.c — a launch says what the dry run would warn about: one line
 * per warning-level check on stderr before any rank starts (--quiet hides
 * them). The single-node/--emulate path (cmd_launch.c) and a multi-node
 * leader (mnode_place.c) print the same lines.
 */
#include "launch.h"

#include "p3d/check.h"

#include <stdio.h>

int p3d_launch_warnings(const p3d_analysis *an, int quiet)
{
    int n = 0;
    for (size_t i = 0; an && i < an->nchecks; i++) {
        if (an->checks[i].severity != P3D_SEV_WARNING)
            continue;
        n++;
        if (!quiet)
            fprintf(stderr, "par3drun: warning: %s: %s\n", an->checks[i].code, an->checks[i].message);
    }
    return n;
}
