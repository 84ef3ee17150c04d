/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gen_wire_seeds.c — writes valid rendezvous frames (type byte + body, the
 * layout fuzz_rdzv_wire.c reads) into a directory, to seed corpus/rdzv_wire/:
 *   gen-wire-seeds OUTDIR TOPO.txt...
 * Each nvidia-smi text becomes a HELLO, a GATHER and a bare node record;
 * one PLACE and one CPLACE (compact, over 4 nodes of the first record) and
 * a JOIN, TREE and TJOIN are added, and the agent packets a parent sends
 * down in a FATE frame: restart, health request, heartbeat. Rerun when
 * the wire format changes.
 */
#include "fuzz_common.h"

#include "wire.h"
#include "rdzv.h"
#include "topo_internal.h"

static void put(const char *dir, const char *name, const p3d_wbuf *b, int skip_len)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    /* a frame is 4 length bytes then the type byte and the body */
    fz_write(p, b->p + (skip_len ? 4 : 0), b->len - (skip_len ? 4 : 0));
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s OUTDIR TOPO.txt...\n", argv[0]);
        return 2;
    }
    p3d_node *first = NULL;
    for (int i = 2; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        char *text = calloc(1, 1 << 20), *err = NULL;
        p3d_node *n = NULL;
        if (!f || !text || fread(text, 1, (1 << 20) - 1, f) == 0)
            return 1;
        fclose(f);
        if (p3d_topo_parse_nvsmi(argv[i], text, &n, &err) < 0) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        p3d_hello h = {.proto = P3D_WIRE_PROTO, .version = P3D_VERSION,
                       .job_id = "job42", .nnodes = 2, .node_rank = 1, .hostname = "n2",
                       .addr = "10.0.0.2", .master_port = 29500, .nccl_port = 29501, .topo = n};
        p3d_wbuf b = {0};
        char name[64];
        p3d_hello_encode(&h, &b);
        snprintf(name, sizeof name, "hello-%d", i - 1);
        put(argv[1], name, &b, 1);
        p3d_wbuf_free(&b);
        memset(&b, 0, sizeof b);
        p3d_wbuf_bytes(&b, "R", 1); /* any other type byte: a bare node record */
        p3d_node_encode(n, &b);
        snprintf(name, sizeof name, "node-%d", i - 1);
        put(argv[1], name, &b, 0);
        p3d_wbuf_free(&b);
        p3d_gather g = {0};
        p3d_grec rec = {.rank = i - 1, .hostname = "n2", .addr = "10.0.0.2", .rack = "r1", .master_port = 29500};
        /* every other record carries a failed pre-start --health-check */
        if (i % 2) {
            rec.health = P3D_GREC_HEALTH_FAILED;
            rec.health_how = "its process ended with exit code 1: gpu 3 is missing";
        }
        p3d_node *c = NULL;
        if (!first) {
            first = n;
            p3d_wbuf nb = {0};
            p3d_node_encode(n, &nb);
            p3d_rbuf rb = {.p = nb.p, .len = nb.len};
            c = p3d_node_decode(&rb, NULL);
            p3d_wbuf_free(&nb);
        }
        p3d_gather_add(&g, &rec, c ? c : n, NULL);
        p3d_gather_encode(&g, &b);
        snprintf(name, sizeof name, "gather-%d", i - 1);
        put(argv[1], name, &b, 1);
        p3d_wbuf_free(&b);
        p3d_gather_free(&g);
        free(text);
    }
    p3d_placement pl = {0};
    p3d_rank ranks[4];
    memset(ranks, 0, sizeof ranks);
    pl.world = 4;
    pl.ranks = ranks;
    pl.mesh.size[P3D_DIM_TP] = 2;
    pl.mesh.size[P3D_DIM_CP] = pl.mesh.size[P3D_DIM_EP] = pl.mesh.size[P3D_DIM_PP] = 1;
    pl.mesh.size[P3D_DIM_DP] = 2;
    p3d_mesh_set_order(&pl.mesh, "tp-cp-ep-dp-pp", NULL);
    for (int r = 0; r < 4; r++) {
        ranks[r].node = r / 2;
        ranks[r].gpu = r % 2;
        ranks[r].local_rank = r % 2;
        p3d_mesh_coord(&pl.mesh, r, ranks[r].coord);
    }
    pl.policy = "megatron";
    pl.policy_source = "lua/megatron.lua";
    char *names[] = {"n1", "n2"}, *hashes[] = {"0123456789abcdef", "fedcba9876543210"};
    const char json[] = "{\"world\": 4}";
    p3d_place_msg m = {.job_id = "job42", .master_addr = "10.0.0.1", .master_port = 29500,
                       .nccl_port = 29501, .nnodes = 2, .names = names, .hashes = hashes,
                       .pl = &pl, .json = (char *)json, .json_len = sizeof json - 1};
    p3d_wbuf b = {0};
    p3d_place_encode(&m, &b);
    put(argv[1], "place-1", &b, 1);
    p3d_wbuf_free(&b);

    p3d_join j = {.proto = P3D_WIRE_PROTO, .version = P3D_VERSION, .job_id = "job42",
                  .nnodes = 40, .node_rank = 9, .hostname = "n9", .addr = "10.0.0.9", .port = 40000};
    p3d_join_encode(&j, &b);
    put(argv[1], "join-1", &b, 1);
    p3d_treepos t = {.parent = 2, .addr = "10.0.0.2", .port = 40001, .nchildren = 4, .fanout = 4};
    p3d_treepos_encode(&t, &b);
    put(argv[1], "tree-1", &b, 1);
    p3d_tjoin tj = {.proto = P3D_WIRE_PROTO, .version = P3D_VERSION, .job_id = "job42",
                    .node_rank = 37};
    p3d_tjoin_encode(&tj, &b);
    put(argv[1], "tjoin-1", &b, 1);
    p3d_wbuf_free(&b);

    /* CPLACE: 4 nodes of the first record, tp 2 x dp 16 */
    if (first) {
        p3d_cluster *c = NULL;
        p3d_cluster_from_node(first, &c, NULL);
        c->nodes = realloc(c->nodes, 4 * sizeof *c->nodes);
        for (int i = 1; i < 4; i++)
            c->nodes[i] = (p3d_cnode){.topo = c->topos[0], .nvl_domain = -1};
        for (int i = 0; i < 4; i++) {
            free(c->nodes[i].name);
            c->nodes[i].name = malloc(16);
            snprintf(c->nodes[i].name, 16, "node%02d", i + 1);
        }
        c->nnodes = 4;
        char *racks[4] = {"r1", "r1", "r2", "r2"};
        p3d_cluster_set_racks(c, racks, NULL);
        p3d_placement cp = {.policy = "megatron", .policy_source = "lua/megatron.lua"};
        for (int d = 0; d < P3D_NDIMS; d++)
            cp.mesh.size[d] = 1;
        cp.mesh.size[P3D_DIM_TP] = 2;
        cp.mesh.size[P3D_DIM_DP] = 16;
        p3d_mesh_set_order(&cp.mesh, "tp-cp-ep-dp-pp", NULL);
        p3d_mesh_resolve(&cp.mesh, NULL);
        cp.world = 32;
        p3d_rank cr[32];
        cp.ranks = cr;
        for (int r = 0; r < 32; r++) {
            cr[r].node = r / 8;
            cr[r].gpu = r % 8;
            cr[r].local_rank = r % 8;
            p3d_mesh_coord(&cp.mesh, r, cr[r].coord);
        }
        p3d_analysis an;
        memset(&an, 0, sizeof an);
        p3d_report_in in = {.cluster = c, .pl = &cp, .an = &an};
        char *js = p3d_report_json(&in);
        p3d_cplace_in ci = {.job_id = "job42", .master_addr = "10.0.0.1", .master_port = 29500, .cluster = c,
                            .pl = &cp, .json = js};
        int compact = 0;
        p3d_cplace_encode(&ci, &b, &compact, NULL);
        put(argv[1], "cplace-1", &b, 1);
        p3d_wbuf_free(&b);
        free(js);
        p3d_cluster_free(c);
    }
    /* FATE frames down the tree: the body is the agent packet */
    const p3d_amsg down[] = {{.type = P3D_AM_RESTART, .gen = 3},
                             {.type = P3D_AM_CHECK, .seq = 7},
                             {.type = P3D_AM_BEAT, .ms = 5000}};
    const char *fnames[] = {"fate-restart", "fate-check", "fate-beat"};
    for (size_t i = 0; i < sizeof down / sizeof down[0]; i++) {
        char pkt[128], p[4096];
        pkt[0] = P3D_MSG_FATE;
        int n = p3d_amsg_encode(&down[i], pkt + 1, sizeof pkt - 1);
        snprintf(p, sizeof p, "%s/%s", argv[1], fnames[i]);
        if (n > 0)
            fz_write(p, (const unsigned char *)pkt, (size_t)n + 1);
    }
    return 0;
}
