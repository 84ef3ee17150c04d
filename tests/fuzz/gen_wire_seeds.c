/*
 * gen_wire_seeds.c — writes valid rendezvous frames (type byte + body, the
 * layout fuzz_rdzv_wire.c reads) into a directory, to seed corpus/rdzv_wire/:
 *   gen-wire-seeds OUTDIR TOPO.txt...
 * Each nvidia-smi text becomes a HELLO and a bare node record; one PLACE
 * over two nodes is added. Rerun when the wire format changes.
 */
#include "fuzz_common.h"

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
        p3d_hello h = {.proto = P3D_WIRE_PROTO, .version = P3D_VERSION, .token = "s3cr3t-token",
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
        p3d_node_free(n);
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
    return 0;
}
