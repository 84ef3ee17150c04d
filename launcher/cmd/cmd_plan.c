/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cmd_plan.c — `par3drun plan`: load the cluster, search layouts with the
 * cost model (placement/cost/plan.c), place the best few as their run
 * lines' dry runs would (p3d_place) and rank them on those estimates,
 * print them (docs/plan.md, "Which policy").
 *
 * Exit codes: 0 with at least one layout that fits; 2 on bad input or when
 * no layout fits (the report still says what came closest and why).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "termsafe.h"
#include "plan.h"

/* The most nodes plan searches (docs/limits.md). */
#define P3D_PLAN_MAX_NODES 8192

/* Shapes placed beyond the --top shown: a shape just below the cut on
 * plan's own estimate may place better than one above it. */
#define PLACED_EXTRA 5

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

/* Writes the report; on failure says why on stderr. 0 or -1. */
static int emit(const char *path, const char *text)
{
    char *err = NULL;
    if (write_out(path, text, &err) == 0)
        return 0;
    fputs("par3drun: ", stderr);
    p3d_term_fputs(err, stderr);
    fputc('\n', stderr);
    free(err);
    return -1;
}

/* The plan's options with row r's layout: the job its run line gives. */
static p3d_opts row_opts(const p3d_opts *o, const p3d_plan_row *r, const char *policy)
{
    p3d_opts po = *o;
    po.tp = r->tp, po.pp = r->pp, po.dp = r->dp, po.cp = r->cp, po.ep = r->ep, po.etp = r->etp;
    po.micro_batch = r->micro_batch, po.micro_batches = 0, po.virtual_stages = r->virtual_stages;
    po.zero = r->zero;
    po.policy = policy;
    po.policy_sha256 = NULL;
    po.npolicy_candidates = 0;
    return po;
}

/* Row r placed by the dry run's own code (p3d_place, --policy auto: every
 * bundled policy, the one without an error-level check and with the fewest
 * warning-level ones kept, the fastest estimate among those). With
 * --spares the chosen policy is placed once more under its own name, as
 * the run line names it, since its spares() hook picks the spares then.
 * 0 with *res filled, or -1 with *err (the row stays unplaced). */
static int place_row(const p3d_opts *o, const p3d_plan_row *r, p3d_plan_result *res, char **err)
{
    p3d_opts po = row_opts(o, r, "auto");
    if (p3d_place(&po, res, err) < 0)
        return -1;
    if (o->spares > 0 && res->pl && res->pl->policy) {
        char name[64];
        snprintf(name, sizeof name, "%s", res->pl->policy);
        p3d_plan_result_free(res);
        po = row_opts(o, r, name);
        if (p3d_place(&po, res, err) < 0)
            return -1;
    }
    if (!res->an || !res->an->has_cost || !res->pl) {
        p3d_plan_result_free(res);
        return p3d_err(err, "no estimate");
    }
    return 0;
}

/* p3d_plan_place's callback: the row takes its placement's estimate. A
 * row no policy can place keeps plan's own (the report says so). */
static int place_cb(void *ctx, p3d_plan_row *row, char **err)
{
    (void)err;
    p3d_plan_result res;
    char *e = NULL;
    if (place_row(ctx, row, &res, &e) < 0) {
        free(e);
        return 0;
    }
    row->cost = res.an->cost;
    row->placed = 1;
    row->nerrors = res.an->nerrors;
    row->nwarnings = res.an->nwarnings;
    snprintf(row->policy, sizeof row->policy, "%s", res.pl->policy ? res.pl->policy : "megatron");
    p3d_place_warned(res.an, row->warned, sizeof row->warned);
    p3d_plan_result_free(&res);
    return 0;
}

/* The policy line: layout #1 (already placed) with every bundled policy's
 * estimate, and which one the run line uses and why. The rule (docs/plan.md,
 * "Which policy"): no error-level check, then the fewest warning-level
 * ones, then the fastest estimate, the rule of --policy auto; a faster
 * policy passed over for its warnings is named with them. */
static void policy_note(const p3d_opts *o, p3d_plan *pl)
{
    p3d_plan_row *r = &pl->rows[0];
    if (!r->placed) {
        snprintf(pl->policy_note, sizeof pl->policy_note,
                 "no bundled policy could place layout #1: its figures are plan's own estimate");
        return;
    }
    snprintf(pl->best_policy, sizeof pl->best_policy, "%s", r->policy);
    p3d_plan_result res;
    char *e = NULL;
    if (place_row(o, r, &res, &e) < 0) {
        snprintf(pl->policy_note, sizeof pl->policy_note, "layout #1 placed by %s (%.2f s)", r->policy,
                 r->cost.step_time);
        free(e);
        return;
    }
    /* the kept policy first (alt[] lacks it when it was placed by name) */
    char list[512] = "", passed[256] = "";
    int w = !r->nerrors && r->nwarnings;
    size_t k = (size_t)snprintf(list, sizeof list, "%s %.2f s%s%s%s", r->policy, r->cost.step_time,
                                r->nerrors ? " (fails a check)"
                                : w        ? " (warns "
                                           : "",
                                w ? r->warned : "", w ? ")" : "");
    size_t kp = 0;
    double fastest = r->cost.step_time;
    for (int i = 0; i < res.nalt; i++) {
        const struct p3d_policy_alt *a = &res.alt[i];
        if (a->step_time <= 0 || strcmp(a->name, r->policy) == 0)
            continue;
        if (k < sizeof list)
            k += (size_t)snprintf(list + k, sizeof list - k, ", %s %.2f s%s%s%s", a->name, a->step_time,
                                  a->nerrors     ? " (fails a check)"
                                  : a->nwarnings ? " (warns "
                                                 : "",
                                  !a->nerrors && a->nwarnings ? a->warned : "", !a->nerrors && a->nwarnings ? ")" : "");
        if (!a->nerrors && a->step_time < fastest - 0.005 && a->nwarnings > r->nwarnings && kp < sizeof passed)
            kp += (size_t)snprintf(passed + kp, sizeof passed - kp, "%s%s's %.2f s warns %s", kp ? "; " : "", a->name,
                                   a->step_time, a->warned);
    }
    if (r->nerrors)
        snprintf(pl->policy_note, sizeof pl->policy_note,
                 "layout #1 placed by each bundled policy: %s. None passes every error-level check: the run "
                 "line's dry run (%s) reports %d error%s; its Checks say what to change",
                 list, r->policy, r->nerrors, r->nerrors == 1 ? "" : "s");
    else if (passed[0])
        snprintf(pl->policy_note, sizeof pl->policy_note,
                 "layout #1 placed by each bundled policy: %s. The run line uses %s (%.2f s, %s): %s, so it is "
                 "not advised",
                 list, r->policy, r->cost.step_time, r->nwarnings ? "the fewest warnings" : "no warning-level check",
                 passed);
    else
        snprintf(pl->policy_note, sizeof pl->policy_note,
                 "layout #1 placed by each bundled policy: %s. The run line uses %s, the fastest%s%s", list, r->policy,
                 r->nwarnings ? "; its placement warns " : " without a warning-level check",
                 r->nwarnings ? r->warned : "");
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
            fprintf(stderr, "par3drun: plan: %zu node%s %s, not planned on: %s\n", n, n == 1 ? "" : "s", kinds[k].what,
                    p3d_tesc(hl));
        free(hl);
    }
    free(names);
    return 0;
}

/* The job from the options, with plan's own refusals (no model, an uneven
 * split Megatron refuses for the pinned pipeline). */
static int plan_job(const p3d_opts *o, p3d_job *job, char **err)
{
    if (p3d_opts_job(o, job, err) < 0)
        return -1;
    if (!job->has_model)
        return p3d_err(err, "plan: which model? give --model NAME (e.g. gpt3-175b, llama2-70b) or "
                            "--params --layers --hidden --heads --seq-len --vocab");
    if ((job->first_stage_layers || job->last_stage_layers) && o->pp) {
        /* pinned: refuse a split Megatron refuses; unpinned, plan keeps
         * the pipeline depths it fits */
        int lay[3];
        if (p3d_cost_stage_layers(job->model.layers, o->pp, o->virtual_stages ? o->virtual_stages : 1,
                                  job->first_stage_layers, job->last_stage_layers, lay, err) < 0)
            return -1;
    }
    return 0;
}

/* The nodes the plan is for: the cluster file (or this one node), its
 * Slurm topology, less --exclude and the spares; bounded in size. */
static int plan_cluster(const p3d_opts *o, p3d_job *job, p3d_cluster **out, char **err)
{
    p3d_cluster *c = NULL;
    if (o->cluster) {
        if (p3d_cluster_load(o->cluster, &c, err) < 0)
            return -1;
    } else {
        /* one node: the topology given (or this machine's) */
        p3d_node *n = NULL;
        if (p3d_topo_load(o->topology ? o->topology : "local", &n, err) < 0 || p3d_cluster_from_node(n, &c, err) < 0)
            return -1;
    }
    *out = c; /* the caller frees it, also on failure from here */
    if (o->slurm_topology && p3d_cluster_apply_slurm_topology(c, o->slurm_topology, err) < 0)
        return -1;
    /* --exclude and --spares as the dry run applies them (the default
     * spares rule for the search; each placed row takes its spares as its
     * run line's dry run does); the plan is for the nodes left */
    job->spares = o->spares;
    if (p3d_place_roles(o, c, job, err) < 0 || report_roles(c) < 0 || p3d_place_keep_usable(c, err) < 0)
        return -1;
    /* plan places every candidate mesh on every node: measured ~1 ms per
     * node on a loaded 2-core host (bench/plan-scale.sh), so 1,048,576
     * nodes took over 5 minutes and 3 GB. Bounded so that it answers in
     * seconds or refuses at once (docs/limits.md). */
    if (c->nnodes > P3D_PLAN_MAX_NODES)
        return p3d_err(err,
                       "plan: %s has %zu usable nodes; the limit is %d (plan places every candidate mesh on "
                       "every node): plan a slice of the cluster file (e.g. one rack group) and check the mesh "
                       "it finds with --dry-run on the whole cluster",
                       o->cluster ? p3d_tesc(o->cluster) : "the cluster", c->nnodes, P3D_PLAN_MAX_NODES);
    return 0;
}

/* Says *err (taken) and returns the bad-input exit code. */
static int fail(char **err)
{
    int rc = p3d_fail_input(*err);
    *err = NULL;
    return rc;
}

/* plan --inference: serving, not training (docs/plan.md, "Inference"). */
static int plan_inference(const p3d_opts *o, const p3d_cluster *c, const p3d_job *job, int json, char **err)
{
    p3d_infer_opts io = {o->context_len, o->prompt_len, o->serve_batch};
    int fits = 0;
    char *text = p3d_infer_report(c, job, &io, json, &fits, err);
    if (!text)
        return fail(err);
    int rc = emit(o->output, text) < 0 ? P3D_EXIT_FAIL : fits ? P3D_EXIT_OK : P3D_EXIT_BADINPUT;
    if (rc == P3D_EXIT_BADINPUT)
        fprintf(stderr, "par3drun: plan --inference: %s does not fit any replica of these GPUs\n",
                p3d_tesc(job->model.name));
    free(text);
    return rc;
}

/* The search's warnings, said once on stderr. */
static void plan_warnings(const p3d_opts *o, const p3d_cluster *c, const p3d_plan *pl)
{
    for (size_t i = 0; i < c->nwarnings; i++)
        fprintf(stderr, "par3drun: warning: %s\n", p3d_tesc(c->warnings[i]));
    if (pl->racks_unknown)
        fprintf(stderr,
                "par3drun: warning: %s names no racks: plan assumes all %d nodes share one leaf switch "
                "(add \"rack\" to each node entry)\n",
                o->cluster ? p3d_tesc(o->cluster) : "the cluster", pl->nodes);
}

/* The training plan: search, place the best few, write the report. */
static int plan_training(const p3d_opts *o, const p3d_cluster *c, const p3d_job *job, int json, char **err)
{
    int zero_mode = o->search_zero ? P3D_PLAN_ZERO_SEARCH : o->zero >= 0 ? o->zero : P3D_PLAN_ZERO_DEFAULT;
    /* --tp, --pp, --cp, --ep, --micro-batch, --virtual-stages, --etp pin
     * those dimensions; the rest is searched */
    p3d_plan_pins pins = {o->tp, o->pp, o->cp, o->ep, o->micro_batch, o->virtual_stages, o->etp};
    p3d_plan *pl = NULL;
    char *text = NULL;
    int rc = P3D_EXIT_BADINPUT;
    if (p3d_plan_search_pinned(c, job, zero_mode, &pins, &pl, err) < 0)
        return fail(err);
    pl->exclude = o->exclude;
    pl->spares = o->spares;
    plan_warnings(o, c, pl);
    /* One evaluation for the table, the note and the run line: the best
     * few shapes are placed as their run lines would place them, and
     * ranked by those estimates (docs/plan.md, "Which policy"). */
    int top = o->top ? o->top : 5;
    if (pl->nrows > 0) {
        if (p3d_plan_place(pl, top + PLACED_EXTRA, place_cb, (void *)o, err) < 0) {
            rc = fail(err);
            goto out;
        }
        policy_note(o, pl);
    }
    text = json ? p3d_plan_json(pl, top) : p3d_plan_text(pl, top);
    if (!text) {
        fprintf(stderr, "par3drun: plan: out of memory\n");
        rc = P3D_EXIT_FAIL;
    } else if (emit(o->output, text) < 0) {
        rc = P3D_EXIT_FAIL;
    } else if (pl->nrows == 0) {
        char *why = p3d_plan_none_reason(pl);
        fprintf(stderr, "par3drun: plan: %s on %d GPUs: %s%s\n", p3d_tesc(job->model.name), pl->gpus,
                why ? p3d_tesc(why) : "no layout is valid", pl->has_misfit ? " (see 'closest misfit')" : "");
        free(why);
        rc = P3D_EXIT_BADINPUT;
    } else {
        rc = P3D_EXIT_OK;
    }
out:
    free(text);
    p3d_plan_free(pl);
    return rc;
}

int p3d_cmd_plan(const p3d_opts *o)
{
    char *err = NULL;
    p3d_cluster *c = NULL;
    p3d_job job;
    const char *fmt = o->format ? o->format : "text";
    int json = strcmp(fmt, "json") == 0, rc;
    if (!json && strcmp(fmt, "text") != 0) {
        p3d_err(&err, "--format: plan writes text or json, got '%s'", fmt);
        rc = fail(&err);
    } else if (plan_job(o, &job, &err) < 0 || plan_cluster(o, &job, &c, &err) < 0) {
        rc = fail(&err);
    } else {
        rc = o->inference ? plan_inference(o, c, &job, json, &err) : plan_training(o, c, &job, json, &err);
    }
    p3d_cluster_free(c);
    return rc;
}
