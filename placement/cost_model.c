/* cost_model.c — placeholder: presets land with the cost model. */
#include "p3d/p3d.h"
int p3d_model_preset(const char *name, p3d_model *m, char **err)
{
    (void)m;
    return p3d_err(err, "--model: unknown preset '%s'", name);
}
