/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * warnings.c — a launch says what the dry run would warn about: one line
 * per warning-level check on stderr before any rank starts (--quiet hides
 * them). The single-node/--emulate path (launch_local.c) and a multi-node
 * leader (mnode_place.c) print the same lines. A check's message quotes
 * names from the input (node, rack, file names): escaped here, where the
 * analysis meets the terminal.
 */
#include "plan.h"
#include "say.h"

#include "p3d/check.h"
#include "termsafe.h"

#include <stdio.h>

int p3d_launch_warnings(const p3d_analysis *an, int quiet)
{
    int n = 0;
    for (size_t i = 0; an && i < an->nchecks; i++) {
        if (an->checks[i].severity != P3D_SEV_WARNING)
            continue;
        n++;
        if (!quiet)
            p3d_warn("%s: %s", p3d_tesc(an->checks[i].code), p3d_tesc(an->checks[i].message));
    }
    return n;
}
