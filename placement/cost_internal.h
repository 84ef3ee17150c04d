/*
 * cost_internal.h — writers shared by every report that shows cost-model
 * figures (plan, dry-run text/JSON, svg/html); private to placement/.
 */
#ifndef P3D_COST_INTERNAL_H
#define P3D_COST_INTERNAL_H

#include "p3d/p3d.h"
#include "strbuf.h"

/* The "cost" JSON object of docs/cost-model.md (memory, traffic, time,
 * bubble, mfu, assumptions), keys in a fixed order. */
void p3d_cost_json(p3d_sb *b, const p3d_cost *c);

/* Human-readable lines (each prefixed by `indent`, ending in '\n'): memory
 * per GPU, traffic and time per dimension, bubble, step time and MFU. When
 * base is not NULL each line also shows the baseline's figure. */
void p3d_cost_text(p3d_sb *b, const p3d_cost *c, const p3d_cost *base,
                   const char *indent);

/* "none", "selective", "full". */
const char *p3d_recompute_name(int r);

#endif
