/* SPDX-License-Identifier: BSD-3-Clause */
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
/* The dry run's "inference" object (docs/report-json.md): one line. */
void p3d_infer_json(p3d_sb *b, const p3d_infer_cost *k);

/* Human-readable lines (each prefixed by `indent`, ending in '\n'): memory
 * per GPU, traffic and time per dimension, bubble, step time and MFU. When
 * base is not NULL each line also shows the baseline's figure. */
void p3d_cost_text(p3d_sb *b, const p3d_cost *c, const p3d_cost *base, const char *indent);

/* b, m, B as the cost model uses them: B = dp·b·m, missing ones derived
 * from the others (docs/cost-model.md, "Batch"). The one place that resolves
 * them; the checks (BATCH_MISMATCH) call it too so they say what the cost
 * model really does. Returns -1 with *err naming the figures that disagree. */
typedef struct p3d_batch {
    int b, m, B;
    int b_derived; /* b = B/(dp·m): --micro-batch not given, --micro-batches was */
    int m_derived; /* m = B/(dp·b) */
    int m_assumed; /* neither B nor m given: m = 4·pp */
} p3d_batch;
int p3d_batch_resolve(const p3d_job *job, p3d_batch *r, char **err);

/* One line (ending in '\n', prefixed by indent) saying why `base` (named
 * base_name) comes out faster than c (named name): which dimension's traffic
 * moved to which link; nothing when c is not slower. */
void p3d_cost_compare_note(p3d_sb *b, const p3d_cost *c, const char *name, const p3d_cost *base, const char *base_name,
                           const char *indent);

/* One line (prefixed by indent, ending in '\n') with the model's
 * architecture: FFN, attention kind, embeddings, norm, published total. */
void p3d_model_describe(p3d_sb *b, const p3d_model *m, const char *indent);

/* "none", "selective", "full". */
const char *p3d_recompute_name(int r);

#endif
