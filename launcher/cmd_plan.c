/* cmd_plan.c — placeholder until this command lands. */
#include <stdio.h>
#include "commands.h"
int p3d_cmd_plan(const p3d_opts *o)
{
    (void)o;
    fprintf(stderr, "par3drun: 'plan' is not built yet\n");
    return P3D_EXIT_FAIL;
}
