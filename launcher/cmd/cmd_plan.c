/*
 * cmd_plan.c — `par3drun plan`: load the cluster, search layouts with the
 * cost model (placement/cost/plan.c), print the best few (docs/plan.md).
 *
 * Exit codes: 0 with at least one layout that fits; 2 on bad input or when
 * no layout fits (the report still says what came closest and why).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"

static int write_out(const char *path, const char *text, char **err)
{
    if (!path || strcmp(path, "-") == 0) {
        fputs(text, stdout);
        return fflush(stdout) == 0 ? 0 : p3d_err(err, "stdout: write failed");
    }
    FILE *f = fopen(path, "w");
    if (!f)
        return p3d_err(err, "--output %s: cannot open for writing", path);
    int ok = fputs(text, f) >= 0;
    ok = (fclose(f) == 0) && ok;
    return ok ? 0 : p3d_err(err, "--output %s: write failed", path);
}

int p3d_cmd_plan(const p3d_opts *o)
{
    int rc = P3D_EXIT_BADINPUT;
    char *err = NULL, *text = NULL;
    p3d_cluster *c = NULL;
    p3d_plan *pl = NULL;
    p3d_job job;
    const char *fmt = o->format ? o->format : "text";
    int json = 0;
    if (strcmp(fmt, "json") == 0)
        json = 1;
    else if (strcmp(fmt, "text") != 0) {
        p3d_err(&err, "--format: plan writes text or json, got '%s'", fmt);
        goto fail;
    }
    if (p3d_cli_job(o, &job, &err) < 0)
        goto fail;
    if (!job.has_model) {
        p3d_err(&err, "plan: which model? give --model NAME (e.g. gpt3-175b, llama2-70b) or "
                      "--params --layers --hidden --heads --seq-len --vocab");
        goto fail;
    }
    if (o->cluster) {
        if (p3d_cluster_load(o->cluster, &c, &err) < 0)
            goto fail;
    } else {
        /* one node: the topology given (or this machine's) */
        p3d_node *n = NULL;
        if (p3d_topo_load(o->topology ? o->topology : "local", &n, &err) < 0)
            goto fail;
        if (p3d_cluster_from_node(n, &c, &err) < 0)
            goto fail;
    }
    if (o->slurm_topology && p3d_cluster_apply_slurm_topology(c, o->slurm_topology, &err) < 0)
        goto fail;
    int zero_mode = o->search_zero ? P3D_PLAN_ZERO_SEARCH : o->zero >= 0 ? o->zero : P3D_PLAN_ZERO_DEFAULT;
    /* --tp, --pp, --cp, --ep, --micro-batch, --virtual-stages, --etp pin
     * those dimensions; the rest is searched */
    p3d_plan_pins pins = {o->tp, o->pp, o->cp, o->ep, o->micro_batch, o->virtual_stages, o->etp};
    if (p3d_plan_search_pinned(c, &job, zero_mode, &pins, &pl, &err) < 0)
        goto fail;
    for (size_t i = 0; i < c->nwarnings; i++)
        fprintf(stderr, "par3drun: warning: %s\n", c->warnings[i]);
    if (pl->racks_unknown)
        fprintf(stderr, "par3drun: warning: %s names no racks: plan assumes all %d nodes share one leaf switch "
                        "(add \"rack\" to each node entry)\n",
                o->cluster ? o->cluster : "the cluster", pl->nodes);
    text = json ? p3d_plan_json(pl, o->top ? o->top : 5) : p3d_plan_text(pl, o->top ? o->top : 5);
    if (!text) {
        fprintf(stderr, "par3drun: plan: out of memory\n");
        rc = P3D_EXIT_FAIL;
        goto out;
    }
    if (write_out(o->output, text, &err) < 0) {
        fprintf(stderr, "par3drun: %s\n", err);
        rc = P3D_EXIT_FAIL;
        goto out;
    }
    if (pl->nrows == 0) {
        char *why = p3d_plan_none_reason(pl);
        fprintf(stderr, "par3drun: plan: %s on %d GPUs: %s%s\n", job.model.name, pl->gpus,
                why ? why : "no layout is valid", pl->has_misfit ? " (see 'closest misfit')" : "");
        free(why);
        rc = P3D_EXIT_BADINPUT;
        goto out;
    }
    rc = P3D_EXIT_OK;
    goto out;
fail:
    rc = p3d_fail_input(err);
    err = NULL;
out:
    free(err);
    free(text);
    p3d_plan_free(pl);
    p3d_cluster_free(c);
    return rc;
}
