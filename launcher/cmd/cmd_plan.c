/* SPDX-License-Identifier: BSD-3-Clause */
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
#include "termsafe.h"
#include "place.h"

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

/* The bundled policies placed on the best layout by the dry run's own code
 * (p3d_place: the same cluster, model and job), so that the plan says up
 * front when the default policy's estimate loses to another one, and
 * why, and its run line names the faster policy. A failure leaves a note
 * and nothing else: the plan stands on its own estimates. */
static void compare_policies_on_best(const p3d_opts *o, p3d_plan *pl)
{
    const p3d_plan_row *r = &pl->rows[0];
    p3d_opts po = *o;
    po.tp = r->tp, po.pp = r->pp, po.dp = r->dp, po.cp = r->cp, po.ep = r->ep, po.etp = r->etp;
    po.micro_batch = r->micro_batch, po.micro_batches = 0, po.virtual_stages = r->virtual_stages;
    po.zero = r->zero;
    po.policy = NULL; /* the default, megatron; the others are compared */
    po.policy_sha256 = NULL;
    po.npolicy_candidates = 0;
    p3d_plan_result res;
    char *e = NULL;
    if (p3d_place(&po, &res, &e) < 0) {
        snprintf(pl->policy_note, sizeof pl->policy_note,
                 "the bundled policies could not be compared on layout #1: %s", e ? e : "placement failed");
        free(e);
        return;
    }
    if (!res.an || !res.an->has_cost) {
        p3d_plan_result_free(&res);
        return;
    }
    const char *me = res.pl && res.pl->policy ? res.pl->policy : "megatron";
    double best_t = res.an->nerrors ? 0 : res.an->cost.step_time;
    snprintf(pl->best_policy, sizeof pl->best_policy, "%s", res.an->nerrors ? "" : me);
    char others[256] = "";
    size_t k = 0;
    for (int i = 0; i < res.nalt; i++) {
        const struct p3d_policy_alt *a = &res.alt[i];
        if (a->step_time <= 0)
            continue;
        if (k < sizeof others)
            k += (size_t)snprintf(others + k, sizeof others - k, "%s%s %.2f s%s", k ? ", " : "", a->name,
                                  a->step_time, a->nerrors ? " (fails a check)" : "");
        if (!a->nerrors && (best_t <= 0 || a->step_time < best_t)) {
            best_t = a->step_time;
            snprintf(pl->best_policy, sizeof pl->best_policy, "%s", a->name);
        }
    }
    char note[600];
    p3d_place_policy_note(&res, note, sizeof note);
    if (note[0] && strcmp(pl->best_policy, me) != 0)
        snprintf(pl->policy_note, sizeof pl->policy_note, "layout #1 placed by each bundled policy: %s; the run line "
                 "uses --policy %s", note, pl->best_policy);
    else
        snprintf(pl->policy_note, sizeof pl->policy_note,
                 "layout #1 placed by each bundled policy: %s's dry-run estimate %.2f s is not beaten%s%s%s", me,
                 res.an->cost.step_time, others[0] ? " (" : "", others, others[0] ? ")" : "");
    p3d_plan_result_free(&res);
}

/* What --exclude and --spares took away, on stderr (the plan's own
 * report is for the nodes left). */
static int report_roles(const p3d_cluster *c)
{
    static const struct {
        int role;
        const char *what;
    } kinds[] = {{P3D_NODE_EXCLUDED, "excluded (--exclude)"}, {P3D_NODE_SPARE, "kept as spares (--spares)"}};
    char **names = malloc((c->nnodes ? c->nnodes : 1) * sizeof *names);
    if (!names)
        return -1;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        size_t n = 0;
        for (size_t i = 0; i < c->nnodes; i++)
            if (c->nodes[i].role == kinds[k].role)
                names[n++] = c->nodes[i].name;
        char *hl = n ? p3d_hostlist_compress(names, n) : NULL;
        if (hl)
            fprintf(stderr, "par3drun: plan: %zu node%s %s, not planned on: %s\n", n, n == 1 ? "" : "s",
                    kinds[k].what, p3d_tesc(hl));
        free(hl);
    }
    free(names);
    return 0;
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
    if (p3d_opts_job(o, &job, &err) < 0)
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
    /* --exclude and --spares as the dry run applies them (the default
     * spares rule: plan runs no policy); the plan is for the nodes left */
    job.spares = o->spares;
    if (p3d_place_roles(o, c, &job, &err) < 0 || report_roles(c) < 0 || p3d_place_keep_usable(c, &err) < 0)
        goto fail;
    int zero_mode = o->search_zero ? P3D_PLAN_ZERO_SEARCH : o->zero >= 0 ? o->zero : P3D_PLAN_ZERO_DEFAULT;
    /* --tp, --pp, --cp, --ep, --micro-batch, --virtual-stages, --etp pin
     * those dimensions; the rest is searched */
    p3d_plan_pins pins = {o->tp, o->pp, o->cp, o->ep, o->micro_batch, o->virtual_stages, o->etp};
    if (p3d_plan_search_pinned(c, &job, zero_mode, &pins, &pl, &err) < 0)
        goto fail;
    pl->exclude = o->exclude;
    pl->spares = o->spares;
    for (size_t i = 0; i < c->nwarnings; i++)
        fprintf(stderr, "par3drun: warning: %s\n", p3d_tesc(c->warnings[i]));
    if (pl->racks_unknown)
        fprintf(stderr, "par3drun: warning: %s names no racks: plan assumes all %d nodes share one leaf switch "
                        "(add \"rack\" to each node entry)\n",
                o->cluster ? p3d_tesc(o->cluster) : "the cluster", pl->nodes);
    if (pl->nrows > 0)
        compare_policies_on_best(o, pl);
    text = json ? p3d_plan_json(pl, o->top ? o->top : 5) : p3d_plan_text(pl, o->top ? o->top : 5);
    if (!text) {
        fprintf(stderr, "par3drun: plan: out of memory\n");
        rc = P3D_EXIT_FAIL;
        goto out;
    }
    if (write_out(o->output, text, &err) < 0) {
        fputs("par3drun: ", stderr);
        p3d_term_fputs(err, stderr);
        fputc('\n', stderr);
        rc = P3D_EXIT_FAIL;
        goto out;
    }
    if (pl->nrows == 0) {
        char *why = p3d_plan_none_reason(pl);
        fprintf(stderr, "par3drun: plan: %s on %d GPUs: %s%s\n", p3d_tesc(job.model.name), pl->gpus,
                why ? p3d_tesc(why) : "no layout is valid", pl->has_misfit ? " (see 'closest misfit')" : "");
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
