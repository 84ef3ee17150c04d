/* cmd_topo.c — placeholder until this command lands. */
#include <stdio.h>
#include "commands.h"
int p3d_cmd_topo(const p3d_opts *o)
{
    (void)o;
    fprintf(stderr, "par3drun: 'topo' is not built yet\n");
    return P3D_EXIT_FAIL;
}
