/* cmd_launch.c — placeholder until launch lands. */
#include <stdio.h>
#include "commands.h"
int p3d_cmd_launch(const p3d_opts *o)
{
    (void)o;
    fprintf(stderr, "par3drun: launch is not built yet\n");
    return P3D_EXIT_FAIL;
}
int p3d_cmd_agent(const p3d_opts *o)
{
    return p3d_cmd_launch(o);
}
