/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * model_config.c — a model from a HuggingFace config.json (docs/cost-model.md,
 * "Describing a model"): the keys of Llama, Mistral/Mixtral, Qwen2/Qwen2-MoE
 * and DeepSeek-V2/V3, mapped onto Megatron-LM's terms. Keys it does not
 * know are ignored (a config.json carries many); every key it reads must be
 * an integer inside its bounds, and a message names the file and the key.
 */
#include "cost_internal.h"
#include "read_file.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONFIG_MAX_FILE (1u << 20) /* a config.json is a few KB */
#define BIG (1 << 26)

typedef struct {
    const char *path;
    const cJSON *root;
} cfg;

/* Key `key` as an integer in [lo, hi] into *out; absent (or null when
 * null_ok): *out untouched, 0. */
static int get_int(const cfg *c, const char *key, long lo, long hi, int null_ok, int *out, char **err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->root, key);
    if (!v || (null_ok && cJSON_IsNull(v)))
        return 0;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble) ||
        v->valuedouble < (double)lo || v->valuedouble > (double)hi)
        return p3d_err(err, "%s: key \"%s\": expected an integer from %ld to %ld%s", c->path, key, lo, hi,
                       cJSON_IsNumber(v) ? "" : (cJSON_IsString(v) ? ", got a string" : ", got another JSON type"));
    *out = (int)v->valuedouble;
    return 0;
}

static int get_bool(const cfg *c, const char *key, int *out, char **err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->root, key);
    if (!v)
        return 0;
    if (!cJSON_IsBool(v))
        return p3d_err(err, "%s: key \"%s\": expected true or false", c->path, key);
    *out = cJSON_IsTrue(v);
    return 0;
}

/* The attention and dense shape every family shares (Llama's names). */
static int read_dense(const cfg *c, p3d_model *m, char **err)
{
    int head_dim = 0;
    if (get_int(c, "num_hidden_layers", 1, 1 << 20, 0, &m->layers, err) < 0 ||
        get_int(c, "hidden_size", 1, 1 << 24, 0, &m->hidden, err) < 0 ||
        get_int(c, "intermediate_size", 1, BIG, 0, &m->ffn, err) < 0 ||
        get_int(c, "num_attention_heads", 1, 1 << 20, 0, &m->heads, err) < 0 ||
        get_int(c, "num_key_value_heads", 1, 1 << 20, 0, &m->query_groups, err) < 0 ||
        get_int(c, "head_dim", 1, 1 << 20, 1, &head_dim, err) < 0 ||
        get_int(c, "vocab_size", 1, BIG, 0, &m->vocab, err) < 0 ||
        get_int(c, "max_position_embeddings", 1, BIG, 0, &m->seq_len, err) < 0)
        return -1;
    int tied = 0; /* the default of every family read here */
    if (get_bool(c, "tie_word_embeddings", &tied, err) < 0)
        return -1;
    m->untied = !tied;
    m->kv_channels = head_dim;
    const char *need[] = {"num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size"};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (!cJSON_GetObjectItemCaseSensitive(c->root, need[i]))
            return p3d_err(err,
                           "%s: key \"%s\" missing (expected a HuggingFace config.json of a Llama, "
                           "Mistral/Mixtral, Qwen2 or DeepSeek model)",
                           c->path, need[i]);
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(c->root, "hidden_act");
    /* silu/swish: a gated MLP (SwiGLU), the families' default */
    m->swiglu = !cJSON_IsString(act) || !strcmp(act->valuestring, "silu") || !strcmp(act->valuestring, "swish");
    m->rmsnorm = 1;
    return 0;
}

/* Mixtral, Qwen2-MoE and DeepSeek name their experts differently. */
static int read_moe(const cfg *c, p3d_model *m, char **err)
{
    int shared_ffn = 0, step = 0;
    if (get_int(c, "num_local_experts", 1, 1 << 16, 1, &m->experts, err) < 0 || /* Mixtral */
        get_int(c, "num_experts", 1, 1 << 16, 1, &m->experts, err) < 0 ||       /* Qwen2-MoE */
        get_int(c, "n_routed_experts", 1, 1 << 16, 1, &m->experts, err) < 0 ||  /* DeepSeek */
        get_int(c, "num_experts_per_tok", 1, 1 << 16, 1, &m->top_k, err) < 0 ||
        get_int(c, "moe_intermediate_size", 1, BIG, 1, &m->moe_ffn, err) < 0 ||
        get_int(c, "shared_expert_intermediate_size", 1, BIG, 1, &shared_ffn, err) < 0 ||
        get_int(c, "n_shared_experts", 0, 1 << 16, 1, &m->shared_experts, err) < 0 ||
        get_int(c, "first_k_dense_replace", 0, 1 << 20, 1, &m->dense_layers, err) < 0 ||
        get_int(c, "decoder_sparse_step", 1, 1 << 20, 1, &step, err) < 0 ||
        get_int(c, "moe_layer_freq", 1, 1 << 20, 1, &step, err) < 0)
        return -1;
    if (m->experts > 0 && step > 1)
        return p3d_err(err,
                       "%s: MoE layers every %d layers are not modelled (only every layer after the "
                       "first dense ones)",
                       c->path, step);
    if (m->experts > 0 && m->moe_ffn == 0)
        m->moe_ffn = m->ffn; /* Mixtral: the experts are intermediate_size wide */
    m->moe_shared_ffn = shared_ffn;
    if (m->experts > 0 && m->top_k == 0)
        return p3d_err(err, "%s: key \"num_experts_per_tok\" missing for a model with experts", c->path);
    return 0;
}

/* DeepSeek's multi-latent attention (kv_lora_rank present). */
static int read_mla(const cfg *c, p3d_model *m, char **err)
{
    if (!cJSON_GetObjectItemCaseSensitive(c->root, "kv_lora_rank"))
        return 0;
    m->mla = 1;
    m->query_groups = 0;
    if (get_int(c, "kv_lora_rank", 1, BIG, 0, &m->kv_lora_rank, err) < 0 ||
        get_int(c, "q_lora_rank", 1, BIG, 1, &m->q_lora_rank, err) < 0 ||
        get_int(c, "qk_nope_head_dim", 1, 1 << 20, 0, &m->qk_head_dim, err) < 0 ||
        get_int(c, "qk_rope_head_dim", 0, 1 << 20, 0, &m->qk_rope_dim, err) < 0 ||
        get_int(c, "v_head_dim", 1, 1 << 20, 0, &m->v_head_dim, err) < 0)
        return -1;
    return 0;
}

/* The file's base name, kept to [A-Za-z0-9._-] (it reaches terminals). */
static void config_name(const char *path, char *name, size_t cap)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = 0;
    for (; *base && n + 1 < cap; base++, n++) {
        char ch = *base;
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
                 ch == '_' || ch == '-';
        name[n] = ok ? ch : '?';
    }
    name[n] = 0;
    if (!n)
        snprintf(name, cap, "config");
}

int p3d_model_config_load(const char *path, p3d_model *m, char **err)
{
    char *buf = NULL;
    size_t len = 0;
    cJSON *root = NULL;
    int rc = -1;
    memset(m, 0, sizeof *m);
    if (p3d_read_small_file(path, "model config", CONFIG_MAX_FILE, &buf, &len, err) < 0)
        return -1;
    const char *end = NULL;
    root = cJSON_ParseWithLengthOpts(buf, len, &end, 0);
    if (!cJSON_IsObject(root)) {
        p3d_err(err, "%s: not a JSON object (expected a HuggingFace config.json)%s", path,
                root ? "" : ": syntax error");
        goto out;
    }
    cfg c = {path, root};
    /* multimodal configs keep the language model under text_config */
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(root, "text_config");
    if (cJSON_IsObject(text) && !cJSON_GetObjectItemCaseSensitive(root, "num_hidden_layers"))
        c.root = text;
    if (read_dense(&c, m, err) < 0 || read_moe(&c, m, err) < 0 || read_mla(&c, m, err) < 0)
        goto out;
    config_name(path, m->name, sizeof m->name);
    m->config = path;
    /* no max_position_embeddings: --seq-length must say it (p3d_opts_job
     * checks); count the parameters without it */
    int no_seq = m->seq_len == 0;
    if (no_seq)
        m->seq_len = 1;
    int frc = p3d_model_finish(m, err);
    if (no_seq)
        m->seq_len = 0;
    if (frc < 0) {
        char *inner = err ? *err : NULL;
        if (err)
            *err = NULL;
        p3d_err(err, "%s: %s", path, inner ? inner : "inconsistent figures");
        free(inner);
        goto out;
    }
    rc = 0;
out:
    cJSON_Delete(root);
    free(buf);
    return rc;
}
