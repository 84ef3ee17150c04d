/*
 * mnode_compact.c — the compact placement (CPLACE, rdzv.h): what the
 * leader sends down the distribution tree instead of the placement JSON.
 *
 * The JSON report (placement/report/report_json.c) is ~200 bytes a rank;
 * almost all of it is the "ranks" and "groups" arrays, which are a
 * function of: rank -> (node, GPU, local rank), the mesh, each node's
 * name, rack and NVLink domain, and the node topologies (NUMA node, NIC
 * and NVLink island of each GPU). So the message carries those (8 bytes a
 * rank, one record per distinct topology) plus the report's few head and
 * tail lines verbatim; every node renders the middle with the same
 * p3d_report_json the leader used and splices. The leader expands its own
 * message the same way and compares: when the bytes differ (a report
 * field this encoding does not carry), the JSON goes along verbatim
 * instead, so the result is byte-identical on every node either way.
 */
#include "mnode.h"

#include <stdlib.h>
#include <string.h>

#define CP_COMPACT 1
#define CP_VERBATIM 0
#define STR_MAX_ 4096

/* Where the report's middle (ranks and groups) starts and ends. */
static const char MARK_RANKS[] = "\n  \"ranks\": [\n";
static const char MARK_CHECKS[] = ",\n  \"checks\": ";

static int split_json(const char *json, size_t *head, size_t *tail_at)
{
    const char *r = strstr(json, MARK_RANKS);
    if (!r)
        return -1;
    const char *c = strstr(r, MARK_CHECKS);
    if (!c)
        return -1;
    *head = (size_t)(r - json) + 1; /* keeps the newline */
    *tail_at = (size_t)(c - json);
    return 0;
}

static void enc_mesh(p3d_wbuf *b, const p3d_placement *pl)
{
    p3d_wbuf_str(b, pl->policy);
    p3d_wbuf_str(b, pl->policy_source);
    p3d_wbuf_str(b, pl->mesh.order_str);
    for (int d = 0; d < P3D_NDIMS; d++) {
        p3d_wbuf_int(b, pl->mesh.size[d]);
        p3d_wbuf_int(b, pl->mesh.order[d]);
    }
    p3d_wbuf_int(b, pl->world);
}

static void enc_compact(const p3d_cplace_in *in, p3d_wbuf *b, size_t head, size_t tail_at)
{
    const p3d_cluster *c = in->cluster;
    const p3d_placement *pl = in->pl;
    size_t jl = strlen(in->json);
    p3d_wbuf_begin(b, P3D_MSG_CPLACE);
    p3d_wbuf_int(b, CP_COMPACT);
    p3d_wbuf_str(b, in->job_id);
    p3d_wbuf_str(b, in->master_addr);
    p3d_wbuf_int(b, in->master_port);
    p3d_wbuf_int(b, in->nccl_port);
    p3d_wbuf_int(b, (int)c->nnodes);
    p3d_wbuf_u32(b, (uint32_t)head);
    p3d_wbuf_bytes(b, in->json, head);
    p3d_wbuf_u32(b, (uint32_t)(jl - tail_at));
    p3d_wbuf_bytes(b, in->json + tail_at, jl - tail_at);
    enc_mesh(b, pl);
    p3d_wbuf_int(b, (int)c->ntopos);
    for (size_t t = 0; t < c->ntopos; t++)
        p3d_node_encode(c->topos[t], b);
    p3d_wbuf_int(b, (int)c->nracks);
    for (size_t i = 0; i < c->nracks; i++)
        p3d_wbuf_str(b, c->racks[i]);
    p3d_wbuf_int(b, (int)c->nnvl_domains);
    for (size_t i = 0; i < c->nnvl_domains; i++)
        p3d_wbuf_str(b, c->nvl_domains[i]);
    for (size_t i = 0; i < c->nnodes; i++) {
        const p3d_cnode *n = &c->nodes[i];
        int t = 0;
        for (size_t k = 0; k < c->ntopos; k++)
            if (c->topos[k] == n->topo)
                t = (int)k;
        p3d_wbuf_str(b, n->name);
        p3d_wbuf_int(b, t);
        p3d_wbuf_int(b, n->rack);
        p3d_wbuf_int(b, n->nvl_domain);
    }
    for (int q = 0; q < pl->world; q++) {
        const p3d_rank *k = &pl->ranks[q];
        p3d_wbuf_u32(b, (uint32_t)k->node);
        p3d_wbuf_u32(b, (uint32_t)k->gpu << 16 | (uint32_t)k->local_rank);
    }
}

/* The verbatim form: the old PLACE body inside. */
static int enc_verbatim(const p3d_cplace_in *in, p3d_wbuf *b, char **err)
{
    const p3d_cluster *c = in->cluster;
    p3d_place_msg pm = {
        .job_id = (char *)in->job_id, .master_addr = (char *)in->master_addr, .master_port = in->master_port,
        .nccl_port = in->nccl_port, .nnodes = (int)c->nnodes, .pl = (p3d_placement *)in->pl,
        .json = (char *)in->json, .json_len = strlen(in->json),
    };
    p3d_wbuf inner = {0};
    pm.names = calloc(c->nnodes + 1, sizeof *pm.names);
    pm.hashes = calloc(c->nnodes + 1, sizeof *pm.hashes);
    int rc = -1;
    if (!pm.names || !pm.hashes) {
        p3d_err(err, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < c->nnodes; i++) {
        pm.names[i] = c->nodes[i].name;
        pm.hashes[i] = (char *)c->nodes[i].topo->hash;
    }
    if (p3d_place_encode(&pm, &inner) < 0) {
        p3d_err(err, "cannot encode the placement (out of memory, or over %u bytes)", P3D_WIRE_MAX);
        goto out;
    }
    p3d_wbuf_begin(b, P3D_MSG_CPLACE);
    p3d_wbuf_int(b, CP_VERBATIM);
    p3d_wbuf_bytes(b, inner.p + 5, inner.len - 5);
    if (p3d_wbuf_end(b) < 0) {
        p3d_err(err, "cannot encode the placement (out of memory, or over %u bytes)", P3D_WIRE_MAX);
        goto out;
    }
    rc = 0;
out:
    free(pm.names);
    free(pm.hashes);
    p3d_wbuf_free(&inner);
    return rc;
}

int p3d_cplace_encode(const p3d_cplace_in *in, p3d_wbuf *b, int *compact, char **err)
{
    size_t head, tail_at;
    *compact = 0;
    if (split_json(in->json, &head, &tail_at) == 0) {
        enc_compact(in, b, head, tail_at);
        if (p3d_wbuf_end(b) < 0)
            return p3d_err(err, "cannot encode the placement (out of memory, or over %u bytes)", P3D_WIRE_MAX);
        /* the proof: expanded here as on every node, it is the same bytes */
        p3d_place_msg m;
        char *e = NULL;
        if (p3d_cplace_decode(b->p + 5, b->len - 5, &m, &e) == 0) {
            *compact = m.json_len == strlen(in->json) && !memcmp(m.json, in->json, m.json_len);
            p3d_place_msg_free(&m);
        }
        free(e);
        if (*compact)
            return 0;
    }
    return enc_verbatim(in, b, err);
}

/* ---- expansion --------------------------------------------------------------- */

static char *rb_strdup(p3d_rbuf *r)
{
    return p3d_rbuf_str(r, STR_MAX_);
}

/* The mesh and world as PLACE carries them, checked the same way. */
static int dec_mesh(p3d_rbuf *r, p3d_placement *pl)
{
    pl->policy = rb_strdup(r);
    pl->policy_source = rb_strdup(r);
    char *os = p3d_rbuf_str(r, sizeof pl->mesh.order_str - 1);
    if (os)
        memcpy(pl->mesh.order_str, os, strlen(os) + 1);
    free(os);
    for (int d = 0; d < P3D_NDIMS; d++) {
        pl->mesh.size[d] = p3d_rbuf_int(r, 1, 1 << 24);
        pl->mesh.order[d] = p3d_rbuf_int(r, 0, P3D_NDIMS - 1);
    }
    p3d_mesh check = pl->mesh;
    char *merr = NULL;
    int world = r->bad ? -1 : p3d_mesh_world(&pl->mesh);
    if (world > 0 && (p3d_mesh_set_order(&check, pl->mesh.order_str, &merr) < 0 ||
                      p3d_mesh_resolve(&check, &merr) < 0 || memcmp(&check, &pl->mesh, sizeof check) != 0))
        world = -1;
    free(merr);
    pl->world = p3d_rbuf_int(r, 1, 1 << 24);
    return r->bad || world <= 0 || pl->world != world ? -1 : 0;
}

static int dec_strv(p3d_rbuf *r, char ***v, size_t *n, int lo)
{
    int k = p3d_rbuf_int(r, lo, 1 << 20);
    if (r->bad || (size_t)k * 4 > r->len - r->off)
        return -1;
    *v = calloc((size_t)k + 1, sizeof **v);
    if (!*v)
        return -1;
    for (int i = 0; i < k; i++) {
        (*v)[i] = p3d_rbuf_str(r, 255);
        *n = (size_t)i + 1;
        if (!(*v)[i])
            return -1;
    }
    return 0;
}

/* Renders the report's middle on c and pl (p3d_report_json with an empty
 * analysis: only its ranks and groups are kept) and splices. */
static char *expand(const p3d_cluster *c, const p3d_placement *pl, const unsigned char *head, size_t hn,
                    const unsigned char *tail, size_t tn, size_t *outn)
{
    p3d_analysis *an = calloc(1, sizeof *an);
    char *full = NULL, *out = NULL;
    if (!an)
        return NULL;
    p3d_report_in in = {.cluster = c, .pl = pl, .an = an};
    full = p3d_report_json(&in);
    size_t h, t;
    if (full && split_json(full, &h, &t) == 0) {
        size_t mid = t - h;
        out = malloc(hn + mid + tn + 1);
        if (out) {
            memcpy(out, head, hn);
            memcpy(out + hn, full + h, mid);
            memcpy(out + hn + mid, tail, tn);
            out[hn + mid + tn] = 0;
            *outn = hn + mid + tn;
        }
    }
    free(full);
    free(an);
    return out;
}

static int dec_compact(p3d_rbuf *r, p3d_place_msg *m, char **err)
{
    p3d_cluster *c = calloc(1, sizeof *c);
    const unsigned char *head, *tail;
    size_t hn, tn;
    int rc = -1;
    if (!c || !(m->pl = calloc(1, sizeof *m->pl)))
        goto oom;
    m->job_id = p3d_rbuf_str(r, 127);
    m->master_addr = p3d_rbuf_str(r, 255);
    m->master_port = p3d_rbuf_int(r, 0, 65535);
    m->nccl_port = p3d_rbuf_int(r, 0, 65535);
    int nn = p3d_rbuf_int(r, 1, 1 << 20);
    head = p3d_rbuf_blob(r, P3D_WIRE_MAX, &hn);
    tail = p3d_rbuf_blob(r, P3D_WIRE_MAX, &tn);
    if (r->bad || !head || !tail || dec_mesh(r, m->pl) < 0)
        goto bad;
    int nt = p3d_rbuf_int(r, 1, 1 << 16);
    if (r->bad || (size_t)nt * 60 > r->len - r->off)
        goto bad;
    c->topos = calloc((size_t)nt, sizeof *c->topos);
    if (!c->topos)
        goto oom;
    for (int i = 0; i < nt; i++) {
        char *e = NULL;
        c->topos[i] = p3d_node_decode(r, &e);
        if (!c->topos[i]) {
            p3d_err(err, "malformed placement from the leader: %s", e ? e : "bad node record");
            free(e);
            goto out;
        }
        c->ntopos++;
    }
    if (dec_strv(r, &c->racks, &c->nracks, 0) < 0 || dec_strv(r, &c->nvl_domains, &c->nnvl_domains, 0) < 0)
        goto bad;
    /* each node at least 16 bytes, each rank 8 */
    if ((size_t)nn * 16 + (size_t)m->pl->world * 8 > r->len - r->off)
        goto bad;
    c->nodes = calloc((size_t)nn, sizeof *c->nodes);
    m->names = calloc((size_t)nn, sizeof *m->names);
    m->hashes = calloc((size_t)nn, sizeof *m->hashes);
    if (!c->nodes || !m->names || !m->hashes)
        goto oom;
    m->nnodes = nn;
    for (int i = 0; i < nn; i++) {
        p3d_cnode *n = &c->nodes[i];
        n->name = p3d_rbuf_str(r, 255);
        c->nnodes = (size_t)i + 1;
        int t = p3d_rbuf_int(r, 0, nt - 1);
        n->rack = p3d_rbuf_int(r, 0, c->nracks ? (int)c->nracks - 1 : 0);
        n->nvl_domain = p3d_rbuf_int(r, -1, (int)c->nnvl_domains - 1);
        if (r->bad || !c->nracks)
            goto bad;
        n->topo = c->topos[t];
        m->names[i] = strdup(n->name);
        m->hashes[i] = strdup(n->topo->hash);
        if (!m->names[i] || !m->hashes[i])
            goto oom;
    }
    p3d_placement *pl = m->pl;
    pl->ranks = calloc((size_t)pl->world, sizeof *pl->ranks);
    if (!pl->ranks)
        goto oom;
    for (int q = 0; q < pl->world; q++) {
        p3d_rank *k = &pl->ranks[q];
        uint32_t node = p3d_rbuf_u32(r), gl = p3d_rbuf_u32(r);
        if (r->bad || node >= (uint32_t)nn)
            goto bad;
        k->node = (int)node;
        k->gpu = (int)(gl >> 16);
        k->local_rank = (int)(gl & 0xffff);
        if (k->gpu >= c->nodes[node].topo->ngpus || k->local_rank >= pl->world)
            goto bad;
        p3d_mesh_coord(&pl->mesh, q, k->coord);
    }
    if (r->off != r->len)
        goto bad;
    m->json = expand(c, pl, head, hn, tail, tn, &m->json_len);
    if (!m->json)
        goto oom;
    rc = 0;
    goto out;
oom:
    p3d_err(err, "out of memory");
    goto out;
bad:
    p3d_err(err, "malformed placement from the leader");
out:
    p3d_cluster_free(c);
    return rc;
}

int p3d_cplace_decode(const unsigned char *body, size_t len, p3d_place_msg *m, char **err)
{
    p3d_rbuf r = {.p = body, .len = len};
    memset(m, 0, sizeof *m);
    int kind = p3d_rbuf_int(&r, CP_VERBATIM, CP_COMPACT);
    if (r.bad)
        return p3d_err(err, "malformed placement from the leader");
    if (kind == CP_VERBATIM)
        return p3d_place_decode(body + r.off, len - r.off, m, err);
    if (dec_compact(&r, m, err) < 0) {
        p3d_place_msg_free(m);
        return -1;
    }
    return 0;
}
