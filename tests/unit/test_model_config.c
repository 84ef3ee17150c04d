/* SPDX-License-Identifier: BSD-3-Clause */
/* test_model_config.c — models described by a HuggingFace config.json
 * (p3d_model_config_load) and by Megatron-LM's figures: the published
 * parameter counts of the presets and of the fixtures
 * (tests/fixtures/models), and hostile files refused with the file and the
 * key named. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <math.h>

#include "p3d/p3d.h"

static char path_buf[4096];

static const char *fixture(const char *name)
{
    const char *dir = getenv("P3D_FIXTURES");
    snprintf(path_buf, sizeof path_buf, "%s/models/%s", dir ? dir : "tests/fixtures", name);
    return path_buf;
}

static double rel(double x, double want)
{
    return fabs(x - want) / want;
}

/* Every preset's derived count is within 2% of its published total (the
 * GPT-3 paper rounds: its "13.0B" counts 12.85B with 5120 x 40 layers;
 * every other preset is within 0.6%). */
static void presets_match_published(void **state)
{
    (void)state;
    const char *const *names = p3d_model_preset_names();
    int n = 0;
    for (; names[n]; n++) {
        p3d_model m;
        assert_int_equal(p3d_model_preset(names[n], &m, NULL), 0);
        assert_true(m.published > 0);
        if (rel(m.params, m.published) > (strncmp(names[n], "gpt3-", 5) ? 0.006 : 0.02))
            fail_msg("%s: %.4g parameters, published %.4g", names[n], m.params, m.published);
    }
    assert_true(n >= 12);
}

static void llama3_70b_config(void **state)
{
    (void)state;
    p3d_model m;
    char *err = NULL;
    assert_int_equal(p3d_model_config_load(fixture("llama-3-70b.config.json"), &m, &err), 0);
    assert_int_equal(m.layers, 80);
    assert_int_equal(m.hidden, 8192);
    assert_int_equal(m.ffn, 28672);
    assert_int_equal(m.heads, 64);
    assert_int_equal(m.query_groups, 8);
    assert_int_equal(m.vocab, 128256);
    assert_int_equal(m.seq_len, 8192);
    assert_true(m.swiglu && m.untied && m.rmsnorm);
    assert_string_equal(m.name, "llama-3-70b.config.json");
    assert_true(rel(m.params, 70.55e9) < 0.002); /* Meta: 70.6B */
    p3d_model preset;
    assert_int_equal(p3d_model_preset("llama3-70b", &preset, NULL), 0);
    assert_true(rel(m.params, preset.params) < 1e-12);
}

static void mixtral_8x22b_config(void **state)
{
    (void)state;
    p3d_model m;
    p3d_model_counts c;
    char *err = NULL;
    assert_int_equal(p3d_model_config_load(fixture("mixtral-8x22b.config.json"), &m, &err), 0);
    assert_int_equal(m.experts, 8);
    assert_int_equal(m.top_k, 2);
    assert_int_equal(m.moe_ffn, 16384);
    assert_int_equal(p3d_model_count(&m, &c, NULL), 0);
    assert_true(rel(c.total, 141e9) < 0.005); /* Mistral AI: 141B total */
    assert_true(rel(c.active, 39e9) < 0.01);  /* 39B active */
}

/* Writes text to a temporary file; returns its path (static). */
static const char *tmp_config(const char *text)
{
    static char p[64];
    snprintf(p, sizeof p, "/tmp/p3d-model-config-XXXXXX");
    int fd = mkstemp(p);
    assert_true(fd >= 0);
    size_t n = strlen(text);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
    close(fd);
    return p;
}

#define LLAMA_KEYS                                                                                                     \
    "\"num_hidden_layers\": 2, \"hidden_size\": 64, \"intermediate_size\": 128, \"num_attention_heads\": 4, "          \
    "\"vocab_size\": 100"

/* Bad input: one message naming the file and the key, never a crash. */
static void hostile(void **state)
{
    (void)state;
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"", "not a JSON object"},
        {"[1, 2]", "not a JSON object"},
        {"{\"num_hidden_layers\": 2", "syntax error"},
        {"{\"num_hidden_layers\": 2, \"hidden_size\": \"64\", \"num_attention_heads\": 4, \"vocab_size\": 10}",
         "\"hidden_size\""},
        {"{\"num_hidden_layers\": -2, \"hidden_size\": 64, \"num_attention_heads\": 4, \"vocab_size\": 10}",
         "\"num_hidden_layers\""},
        {"{\"num_hidden_layers\": 1e300, \"hidden_size\": 64, \"num_attention_heads\": 4, \"vocab_size\": 10}",
         "\"num_hidden_layers\""},
        {"{\"num_hidden_layers\": 2.5, \"hidden_size\": 64, \"num_attention_heads\": 4, \"vocab_size\": 10}",
         "\"num_hidden_layers\""},
        {"{\"hidden_size\": 64, \"num_attention_heads\": 4, \"vocab_size\": 10, \"max_position_embeddings\": 8}",
         "\"num_hidden_layers\" missing"},
        {"{" LLAMA_KEYS ", \"max_position_embeddings\": 8, \"num_key_value_heads\": 3}", "query groups"},
        {"{" LLAMA_KEYS ", \"max_position_embeddings\": 8, \"tie_word_embeddings\": 1}", "\"tie_word_embeddings\""},
        {"{" LLAMA_KEYS ", \"max_position_embeddings\": 8, \"num_local_experts\": 8}", "\"num_experts_per_tok\""},
        {"{" LLAMA_KEYS ", \"max_position_embeddings\": 8, \"num_local_experts\": 4, \"num_experts_per_tok\": 5}",
         "top-k"},
        {"{" LLAMA_KEYS ", \"max_position_embeddings\": 8, \"num_experts\": 4, \"num_experts_per_tok\": 2, "
         "\"decoder_sparse_step\": 2}",
         "every 2 layers"},
        {"{" LLAMA_KEYS ", \"max_position_embeddings\": 8, \"kv_lora_rank\": 0}", "\"kv_lora_rank\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *p = tmp_config(cases[i].text);
        p3d_model m;
        char *err = NULL;
        int rc = p3d_model_config_load(p, &m, &err);
        unlink(p);
        if (rc != -1 || !err || !strstr(err, cases[i].want) || !strstr(err, "/tmp/p3d-model-config-"))
            fail_msg("case %zu: rc %d, message '%s', want one naming the file and '%s'", i, rc, err ? err : "(none)",
                     cases[i].want);
        free(err);
    }
    /* a missing file and a directory are refused too */
    p3d_model m;
    char *err = NULL;
    assert_int_equal(p3d_model_config_load("/nonexistent/config.json", &m, &err), -1);
    assert_non_null(strstr(err, "/nonexistent/config.json"));
    free(err);
    err = NULL;
    assert_int_equal(p3d_model_config_load("/tmp", &m, &err), -1);
    free(err);
}

/* A multimodal config keeps the language model under text_config; DeepSeek's
 * multi-latent attention keys with a null q_lora_rank (V2-Lite) load. */
static void nested_and_mla(void **state)
{
    (void)state;
    p3d_model m;
    char *err = NULL;
    const char *p =
        tmp_config("{\"model_type\": \"x\", \"text_config\": {" LLAMA_KEYS ", \"max_position_embeddings\": 16}}");
    assert_int_equal(p3d_model_config_load(p, &m, &err), 0);
    unlink(p);
    assert_int_equal(m.layers, 2);
    assert_int_equal(m.seq_len, 16);
    p = tmp_config("{" LLAMA_KEYS ", \"max_position_embeddings\": 16, \"kv_lora_rank\": 32, \"q_lora_rank\": null, "
                   "\"qk_nope_head_dim\": 16, \"qk_rope_head_dim\": 8, \"v_head_dim\": 16, \"n_routed_experts\": 8, "
                   "\"num_experts_per_tok\": 2, \"moe_intermediate_size\": 32, \"n_shared_experts\": 1, "
                   "\"first_k_dense_replace\": 1}");
    assert_int_equal(p3d_model_config_load(p, &m, &err), 0);
    unlink(p);
    assert_true(m.mla);
    assert_int_equal(m.q_lora_rank, 0);
    assert_int_equal(m.experts, 8);
    assert_int_equal(m.dense_layers, 1);
    /* q 64*4*24 + kv 32*(64 + 4*32 + 1) + 64*8 + 4*16*64 = 6144 + 6176 + 512 + 4096 */
    p3d_model_counts c;
    assert_int_equal(p3d_model_count(&m, &c, NULL), 0);
    assert_true(rel(c.attn, 16928) < 1e-12);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(presets_match_published), cmocka_unit_test(llama3_70b_config),
        cmocka_unit_test(mixtral_8x22b_config),    cmocka_unit_test(hostile),
        cmocka_unit_test(nested_and_mla),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
