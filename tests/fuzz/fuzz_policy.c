/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_policy.c — the policy-result validator (placement/policy/policy_run.c:
 * Lua table -> p3d_placement) through the real sandbox, with small limits.
 *
 * Input byte 0 picks the mode:
 *  - even: the rest is a policy's Lua source, run as is (seeds: the bundled
 *    policies; the dictionary helps mutations stay Lua);
 *  - odd: the rest is decoded into a policy that returns a generated table
 *    (entries with rank/node/gpu/coordinates taken from the bytes, wrong
 *    types, names instead of indices, duplicate ranks, metatables, notes),
 *    so the validator sees many near-valid results without the fuzzer
 *    having to learn Lua syntax.
 * A result that validates must be a bijection onto existing GPUs with the
 * coordinates the mesh order gives.
 */
#include "fuzz_topofiles.h"

#include "policy_internal.h"


static p3d_cluster *cl;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    static const char cluster[] =
        "{\"nodes\": [\n"
        " {\"name\": \"n[1-2]\", \"topology\": \"pcie8-nvlink-pairs.xml\", \"rack\": \"r0\"},\n"
        " {\"name\": \"m[1-2]\", \"topology\": \"dgx1-v100.xml\", \"rack\": \"r1\"}\n"
        "]}\n";
    cl = fz_policy_cluster("fuzz_policy", "policy-cluster.json", cluster);
    return 0;
}

typedef struct cur {
    const uint8_t *p;
    size_t n, off;
} cur;

static unsigned next(cur *c)
{
    return c->off < c->n ? c->p[c->off++] : 0;
}

static const char *const orders[] = {"tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp", "pp-dp-tp", "dp-tp-pp",
                                     "tp-pp-dp", "ep-tp-dp-pp-cp"};

/* Builds the job (sizes whose product stays within the 32 GPUs) and the
 * generated policy text. */
static char *generate(cur *c, p3d_job *job, size_t *len)
{
    sb b = {0};
    static const int pow2[] = {1, 2, 4, 8};
    int world = 1;
    job->mesh.size[P3D_DIM_TP] = pow2[next(c) % 4];
    job->mesh.size[P3D_DIM_PP] = pow2[next(c) % 3];
    job->mesh.size[P3D_DIM_DP] = pow2[next(c) % 3];
    p3d_mesh_set_order(&job->mesh, orders[next(c) % 6], NULL);
    world = p3d_mesh_world(&job->mesh);
    unsigned tricks = next(c);
    add(&b, "function place(cluster, job)\n  local r = {}\n");
    int ent = 0;
    while (c->off < c->n && ent < 64) {
        unsigned k = next(c), rank = next(c), node = next(c), gpu = next(c), coord = next(c);
        int rk = (int)(rank % (unsigned)(world + 2)) - 1; /* -1 .. world */
        add(&b, "  r[#r+1] = {rank = ");
        if (k & 1)
            add(&b, "%d", rk);
        else if (k & 2)
            add(&b, "%d.5", rk);
        else
            add(&b, "\"%d\"", rk);
        switch ((k >> 2) & 3) {
        case 0:
            add(&b, ", node = %d", (int)(node % 6));
            break;
        case 1:
            add(&b, ", node = \"%c%d\"", node & 1 ? 'n' : 'm', (int)((node >> 1) % 4));
            break;
        case 2:
            add(&b, ", node = cluster.nodes[%d] and %d", (int)(node % 5) + 1, (int)(node % 5));
            break;
        default:
            add(&b, ", node = {}");
            break;
        }
        add(&b, ", gpu = %d", (int)(gpu % 10) - 1);
        if (k & 16) {
            /* the right coordinates via par3d.mesh, or a wrong one */
            add(&b, ", tp = (par3d.mesh(job):coords(%d) or {}).tp", rk < 0 ? 0 : rk);
            if (coord & 1)
                add(&b, ", pp = %d", (int)(coord >> 1) % 4);
        }
        add(&b, "}\n");
        if (k & 32)
            add(&b, "  r[#r].rank = nil\n");
        ent++;
    }
    if (tricks & 1) /* ranks 0.. in order, as a valid base the bytes perturb */
        add(&b, "  local nx = 0\n  for i, nd in ipairs(cluster.nodes) do for g = 0, nd.ngpus - 1 do\n"
                "    if nx < %d then r[nx + 1] = r[nx + 1] or {rank = nx, node = i, gpu = g}; nx = nx + 1 end\n"
                "  end end\n",
            world);
    if (tricks & 2)
        add(&b, "  setmetatable(r, {__len = function() return %d end, __index = function(t, i) return "
                "{rank = i - 1, node = 1, gpu = 0} end})\n",
            world);
    if (tricks & 4)
        add(&b, "  r.notes = {\"fuzz note\", %s}\n", tricks & 8 ? "42" : "\"second\"");
    if (tricks & 16)
        add(&b, "  for i = 1, #r do if type(r[i]) == 'table' then setmetatable(r[i], {__index = "
                "function() return 0 end}) end end\n");
    if (tricks & 32)
        add(&b, "  return r, %s\nend\n", tricks & 64 ? "\"a note\"" : "7");
    else
        add(&b, "  return r\nend\n");
    *len = b.len;
    return b.p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 65536)
        return 0;
    p3d_job job;
    p3d_job_init(&job);
    p3d_placement *pl = NULL;
    char *err = NULL, *text = NULL;
    size_t len;
    p3d_sandbox_limits lim = {.mem_bytes = (size_t)16 << 20, .instructions = 1000000};
    if (data[0] & 1) {
        cur c = {data + 1, size - 1, 0};
        text = generate(&c, &job, &len);
    } else {
        /* raw policy text: tp/pp from the mesh that fits every seed */
        job.mesh.size[P3D_DIM_TP] = 2;
        job.mesh.size[P3D_DIM_PP] = 2;
        job.mesh.size[P3D_DIM_DP] = 4;
        len = size - 1;
        text = fz_cstr(data + 1, len);
    }
    if (p3d_policy_run_text("fuzz.lua", "fuzz.lua", text, len, cl, &job, &lim, &pl, &err) < 0) {
        if (getenv("P3D_FUZZ_VERBOSE"))
            fprintf(stderr, "rejected: %s\n", err);
        if (!err || !*err || pl)
            abort();
        goto out;
    }
    /* validated: every rank on an existing GPU, no GPU twice, coordinates
     * as the mesh order gives them */
    size_t total = p3d_cluster_gpus(cl);
    unsigned char *used = calloc(total * 16 + 1, 1);
    if (!used || pl->world != p3d_mesh_world(&job.mesh))
        abort();
    for (int r = 0; r < pl->world; r++) {
        const p3d_rank *k = &pl->ranks[r];
        if (k->node < 0 || (size_t)k->node >= cl->nnodes || k->gpu < 0 ||
            k->gpu >= cl->nodes[k->node].topo->ngpus)
            abort();
        size_t slot = (size_t)k->node * 16 + (size_t)k->gpu;
        if (used[slot]++)
            abort();
        int coord[P3D_NDIMS];
        p3d_mesh_coord(&job.mesh, r, coord);
        if (memcmp(coord, k->coord, sizeof coord) || p3d_mesh_rank(&job.mesh, k->coord) != r)
            abort();
    }
    free(used);
out:
    p3d_placement_free(pl);
    free(err);
    free(text);
    return 0;
}
