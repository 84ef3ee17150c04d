/* cmd_dryrun.c — placeholder until this command lands. */
#include <stdio.h>
#include "commands.h"
int p3d_cmd_dryrun(const p3d_opts *o)
{
    (void)o;
    fprintf(stderr, "par3drun: 'dryrun' is not built yet\n");
    return P3D_EXIT_FAIL;
}
