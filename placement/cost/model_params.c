/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * model_params.c — the model presets and the parameter count of any
 * transformer described in Megatron-LM's terms (docs/cost-model.md,
 * "Describing a model"): which weights sit where, so that memory can be
 * counted on the most loaded shard and FLOPs per token.
 *
 * The counts follow the arithmetic of Megatron-LM's own estimator
 * (megatron/training/theoretical_memory_usage.py): attention 2h^2(1 +
 * g/a)(q/h) (or the multi-latent projections), MLP 2h*ffn (x 3/2 gated),
 * two norms per layer, a router per MoE layer, one final norm, the
 * embedding (and a separate output layer when untied). Biases are not
 * counted (Megatron's estimator leaves them out too).
 */
#include "cost_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Presets. Figures from the papers / released configs listed in             */
/* docs/cost-model.md; vocab is the size the embedding really has.           */
/* ------------------------------------------------------------------------ */

/* name, published total, L, h, a, s, V, then the architecture */
#define GPT(n, pub, L, h, a, V)                                                                                        \
    {                                                                                                                  \
        .name = n, .published = pub, .layers = L, .hidden = h, .heads = a, .seq_len = 2048, .vocab = V                 \
    }
#define LLAMA(n, pub, L, h, a, g, f, s, V)                                                                             \
    {                                                                                                                  \
        .name = n, .published = pub, .layers = L, .hidden = h, .heads = a, .query_groups = g, .ffn = f, .seq_len = s,  \
        .vocab = V, .swiglu = 1, .untied = 1, .rmsnorm = 1                                                             \
    }

static const p3d_model presets[] = {
    /* Brown et al. 2020, Table 2.1 (GELU MLP of 4h, LayerNorm, tied
     * embeddings); vocab padded as in Megatron-LM. 13B: hidden 5120 (the
     * table's 5140 does not divide into its 40 heads; 5120 = 40 x 128).
     * 1.3B: 16 heads of 128 (the table's 24 heads of 128 would not make
     * 2048, nor 1.3B; Megatron-LM's 1.3B runs use 16). */
    GPT("gpt3-175b", 175e9, 96, 12288, 96, 51200),
    GPT("gpt3-13b", 13e9, 40, 5120, 40, 51200),
    GPT("gpt3-6.7b", 6.7e9, 32, 4096, 32, 51200),
    GPT("gpt3-1.3b", 1.3e9, 24, 2048, 16, 51200),
    /* Touvron et al. 2023 (Llama 2), Table 1 + released config.json. */
    LLAMA("llama2-7b", 6.74e9, 32, 4096, 32, 32, 11008, 4096, 32000),
    LLAMA("llama2-13b", 13.0e9, 40, 5120, 40, 40, 13824, 4096, 32000),
    LLAMA("llama2-70b", 68.98e9, 80, 8192, 64, 8, 28672, 4096, 32000),
    /* Llama 3 herd paper (2024), Table 3 + released config.json. */
    LLAMA("llama3-8b", 8.03e9, 32, 4096, 32, 8, 14336, 8192, 128256),
    LLAMA("llama3-70b", 70.55e9, 80, 8192, 64, 8, 28672, 8192, 128256),
    LLAMA("llama3-405b", 405.85e9, 126, 16384, 128, 8, 53248, 8192, 128256),
    /* DeepSeek-V3 technical report (arXiv:2412.19437) section 4.2 +
     * released config.json: 671B total (without the MTP module), 37B
     * active, multi-latent attention, 4K pre-training sequences. */
    {.name = "deepseek-v3",
     .published = 671e9,
     .layers = 61,
     .hidden = 7168,
     .heads = 128,
     .seq_len = 4096,
     .vocab = 129280,
     .experts = 256,
     .top_k = 8,
     .moe_ffn = 2048,
     .shared_experts = 1,
     .dense_layers = 3,
     .ffn = 18432,
     .swiglu = 1,
     .untied = 1,
     .rmsnorm = 1,
     .mla = 1,
     .q_lora_rank = 1536,
     .kv_lora_rank = 512,
     .qk_head_dim = 128,
     .qk_rope_dim = 64,
     .v_head_dim = 128},
    /* Mixtral 8x22B (Mistral AI, April 2024: 141B total, 39B active) and
     * the released Mixtral-8x22B-v0.1 config.json; 4096 as in NeMo's
     * mixtral_8x22b pre-training recipe. */
    {.name = "mixtral-8x22b",
     .published = 140.6e9,
     .layers = 56,
     .hidden = 6144,
     .heads = 48,
     .query_groups = 8,
     .seq_len = 4096,
     .vocab = 32000,
     .experts = 8,
     .top_k = 2,
     .moe_ffn = 16384,
     .ffn = 16384,
     .swiglu = 1,
     .untied = 1,
     .rmsnorm = 1},
};
#define NPRESETS (sizeof presets / sizeof presets[0])

const char *const *p3d_model_preset_names(void)
{
    static const char *names[NPRESETS + 1];
    for (size_t i = 0; i < NPRESETS; i++)
        names[i] = presets[i].name;
    names[NPRESETS] = NULL;
    return names;
}

int p3d_model_preset(const char *name, p3d_model *m, char **err)
{
    for (size_t i = 0; i < NPRESETS; i++)
        if (name && strcmp(name, presets[i].name) == 0) {
            *m = presets[i];
            return p3d_model_finish(m, err);
        }
    char list[512] = "";
    for (size_t i = 0; i < NPRESETS; i++) {
        if (i)
            strcat(list, ", ");
        strcat(list, presets[i].name);
    }
    return p3d_err(err,
                   "--model: unknown preset '%s' (known: %s; or give --num-layers --hidden-size "
                   "--num-attention-heads --seq-length ..., or --model-config config.json)",
                   name ? name : "", list);
}

/* ------------------------------------------------------------------------ */
/* Counting                                                                  */
/* ------------------------------------------------------------------------ */

/* Megatron's default FFN size: 4h, or 8h/3 rounded down to a multiple of 64
 * for a gated MLP (megatron/training/arguments.py). */
int p3d_model_ffn(const p3d_model *m)
{
    if (m->ffn > 0)
        return m->ffn;
    double f = 4.0 * m->hidden;
    return m->swiglu ? (int)(f * 2.0 / 3.0 / 64.0) * 64 : (int)f;
}

static double attention_params(const p3d_model *m)
{
    const double h = m->hidden, a = m->heads, norm = m->rmsnorm ? 1 : 2;
    if (m->mla) {
        double qk = (double)m->qk_head_dim + m->qk_rope_dim;
        double q = m->q_lora_rank > 0 ? m->q_lora_rank * (h + a * qk + norm) : h * a * qk;
        return q + (double)m->kv_lora_rank * (h + a * ((double)m->qk_head_dim + m->v_head_dim) + norm) +
               h * m->qk_rope_dim + a * m->v_head_dim * h;
    }
    double kv = m->kv_channels > 0 ? m->kv_channels : (double)(m->hidden / m->heads);
    double g = m->query_groups > 0 ? m->query_groups : a;
    return 2.0 * h * h * (1.0 + g / a) * (kv * a / h);
}

/* Figures every count needs, checked once: names the first one out of
 * range (the options and config keys that set them carry the same name). */
static int check_figures(const p3d_model *m, char **err)
{
    const char *bad = NULL;
    if (m->layers < 1 || m->hidden < 1 || m->heads < 1 || m->seq_len < 1)
        bad = "layers, hidden size, attention heads and sequence length must be >= 1";
    else if (m->vocab < 0 || m->ffn < 0 || m->kv_channels < 0 || m->moe_ffn < 0 || m->moe_shared_ffn < 0)
        bad = "sizes must be >= 0";
    else if (m->query_groups < 0 || m->query_groups > m->heads || (m->query_groups && m->heads % m->query_groups))
        bad = "query groups must divide the attention heads";
    else if (!m->mla && m->kv_channels == 0 && m->hidden % m->heads)
        bad = "the hidden size must be a multiple of the attention heads (or give kv channels)";
    else if (m->experts < 0 || (m->experts > 0 && (m->top_k < 1 || m->top_k > m->experts || m->moe_ffn < 1)))
        bad = "an MoE model needs 1 <= top-k <= experts and an expert FFN size >= 1";
    else if (m->shared_experts < 0 || m->dense_layers < 0 || m->dense_layers > m->layers ||
             (m->experts > 0 && m->dense_layers == m->layers))
        bad = "shared experts and dense layers must be >= 0 and leave at least one MoE layer";
    else if (m->mla && (m->kv_lora_rank < 1 || m->qk_head_dim < 1 || m->v_head_dim < 1 || m->q_lora_rank < 0 ||
                        m->qk_rope_dim < 0))
        bad = "multi-latent attention needs kv_lora_rank, qk_head_dim and v_head_dim >= 1";
    if (bad)
        return p3d_err(err, "model '%s': %s", m->name, bad);
    return 0;
}

int p3d_model_count(const p3d_model *m, p3d_model_counts *c, char **err)
{
    memset(c, 0, sizeof *c);
    if (check_figures(m, err) < 0)
        return -1;
    const double h = m->hidden, glu = m->swiglu ? 1.5 : 1.0, norm = m->rmsnorm ? 1 : 2;
    const int moe = m->experts > 0;
    c->moe_layers = moe ? m->layers - m->dense_layers : 0;
    c->dense_layers = m->layers - c->moe_layers;
    c->attn = attention_params(m);
    c->dense_mlp = 2.0 * h * p3d_model_ffn(m) * glu;
    double shared_ffn = m->moe_shared_ffn > 0 ? m->moe_shared_ffn : (double)m->shared_experts * m->moe_ffn;
    c->shared_mlp = moe ? 2.0 * h * shared_ffn * glu : 0;
    c->routed = moe ? 2.0 * h * m->moe_ffn * (double)m->experts * glu : 0;
    c->routed_active = moe ? 2.0 * h * m->moe_ffn * (double)m->top_k * glu : 0;
    c->norms = 2.0 * h * norm;
    c->router = moe ? h * m->experts : 0;
    c->final_norm = norm * h;
    c->embedding = h * m->vocab;
    /* TP-sharded, replicated and expert-sharded weights of the whole block */
    c->tp_block = (c->attn + c->dense_mlp) * c->dense_layers + (c->attn + c->shared_mlp) * c->moe_layers;
    c->replicated_block = c->norms * m->layers + c->router * c->moe_layers + c->final_norm;
    c->expert_block = c->routed * c->moe_layers;
    /* --params: the layers' share scaled to the total asked for */
    double emb = c->embedding * (m->untied ? 2 : 1);
    double block = c->tp_block + c->replicated_block + c->expert_block;
    if (m->params_forced && m->params > 0) {
        if (m->params <= emb)
            return p3d_err(err, "model '%s': --params %.4g cannot hold the embeddings (%.4g parameters)", m->name,
                           m->params, emb);
        c->scale = (m->params - emb) / block;
        c->attn *= c->scale, c->dense_mlp *= c->scale, c->shared_mlp *= c->scale;
        c->routed *= c->scale, c->routed_active *= c->scale;
        c->tp_block *= c->scale, c->replicated_block *= c->scale, c->expert_block *= c->scale;
        block = m->params - emb;
    } else {
        c->scale = 1;
    }
    c->total = block + emb;
    c->active = c->total - (c->routed - c->routed_active) * c->moe_layers;
    /* the matmul weights a token passes through (FLOPs): all but the
     * norms, the router and the embeddings */
    c->matmul = c->tp_block + c->routed_active * c->moe_layers;
    return 0;
}

int p3d_model_finish(p3d_model *m, char **err)
{
    p3d_model_counts c;
    if (p3d_model_count(m, &c, err) < 0)
        return -1;
    if (!m->params_forced)
        m->params = c.total;
    return 0;
}

void p3d_model_describe(p3d_sb *b, const p3d_model *m, const char *indent)
{
    p3d_sb_printf(b, "%sarchitecture: FFN %d%s, ", indent, p3d_model_ffn(m), m->swiglu ? " SwiGLU" : "");
    if (m->mla)
        p3d_sb_printf(b, "multi-latent attention (kv rank %d, q rank %d)", m->kv_lora_rank, m->q_lora_rank);
    else if (m->query_groups > 0 && m->query_groups < m->heads)
        p3d_sb_printf(b, "grouped-query attention (%d KV heads)", m->query_groups);
    else
        p3d_sb_puts(b, "multi-head attention");
    p3d_sb_printf(b, ", %s embeddings, %s", m->untied ? "untied" : "tied", m->rmsnorm ? "RMSNorm" : "LayerNorm");
    if (m->published > 0)
        p3d_sb_printf(b, "; published total %.4gB", m->published / 1e9);
    p3d_sb_puts(b, "\n");
}
