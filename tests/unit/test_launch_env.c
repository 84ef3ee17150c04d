/* SPDX-License-Identifier: BSD-3-Clause */
/* test_launch_env.c — the rank environment contract (rank_env.c), the
 * --output-ranks list and the output tag, on a hand-built placement. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <fcntl.h>
#include <unistd.h>

#include <cmocka.h>

#include "launch_fixture.h"
#include "ranks.h"

static void env_of(fixture *f, int r, int restart, p3d_envv *e)
{
    char *base[] = {"PATH=/usr/bin", "RANK=999", "KEEP=me", "P3D_RDZV_TOKEN=secret", NULL};
    char *err = NULL;
    if (p3d_rank_env(&f->L, base, r, restart, e, &err) < 0)
        fail_msg("p3d_rank_env: %s", err);
}

#define ENV_EQ(e, k, v) assert_string_equal(p3d_envv_get(e, k) ? p3d_envv_get(e, k) : "(unset)", v)

static void test_torchrun_names(void **st)
{
    (void)st;
    static fixture f;
    fixture_init(&f, 2, 8, 2, 2, 4); /* world 16: rank = tp + 2 dp + 8 pp */
    p3d_envv e;
    env_of(&f, 11, 1, &e);
    ENV_EQ(&e, "RANK", "11"); /* replaces the inherited RANK=999 */
    ENV_EQ(&e, "WORLD_SIZE", "16");
    ENV_EQ(&e, "LOCAL_RANK", "3");
    ENV_EQ(&e, "LOCAL_WORLD_SIZE", "8");
    ENV_EQ(&e, "GROUP_RANK", "1");
    ENV_EQ(&e, "NODE_RANK", "1");
    ENV_EQ(&e, "MASTER_ADDR", "127.0.0.1");
    ENV_EQ(&e, "MASTER_PORT", "29500");
    ENV_EQ(&e, "TORCHELASTIC_RUN_ID", "job42");
    ENV_EQ(&e, "TORCHELASTIC_RESTART_COUNT", "1");
    ENV_EQ(&e, "P3D_RESTART_COUNT", "1");
    ENV_EQ(&e, "KEEP", "me");
    ENV_EQ(&e, "PATH", "/usr/bin");
    ENV_EQ(&e, "P3D_RDZV_TOKEN", "(unset)"); /* the agents' secret stays out of workers */
    int n = 0;
    for (size_t i = 0; i < e.n; i++)
        n += strncmp(e.v[i], "RANK=", 5) == 0;
    assert_int_equal(n, 1);
    assert_null(e.v[e.n]);
    p3d_envv_free(&e);
}

static void test_groups_and_coords(void **st)
{
    (void)st;
    static fixture f;
    fixture_init(&f, 2, 8, 2, 2, 4);
    p3d_envv e;
    env_of(&f, 11, 0, &e); /* tp 1, dp 1, pp 1 */
    ENV_EQ(&e, "P3D_TP_RANK", "1");
    ENV_EQ(&e, "P3D_TP_SIZE", "2");
    ENV_EQ(&e, "P3D_TP_GROUP", "10,11");
    ENV_EQ(&e, "P3D_DP_RANK", "1");
    ENV_EQ(&e, "P3D_DP_SIZE", "4");
    ENV_EQ(&e, "P3D_DP_GROUP", "9,11,13,15");
    ENV_EQ(&e, "P3D_PP_RANK", "1");
    ENV_EQ(&e, "P3D_PP_GROUP", "3,11");
    ENV_EQ(&e, "P3D_CP_SIZE", "1");
    ENV_EQ(&e, "P3D_CP_GROUP", "11");
    ENV_EQ(&e, "P3D_EP_GROUP", "11");
    ENV_EQ(&e, "P3D_NODE", "node002");
    ENV_EQ(&e, "P3D_JOB_ID", "job42");
    ENV_EQ(&e, "P3D_PLACEMENT", "/tmp/placement.json");
    p3d_envv_free(&e);
}

static void test_cuda_visible(void **st)
{
    (void)st;
    static fixture f;
    fixture_init(&f, 2, 8, 2, 2, 4);
    p3d_envv e;
    /* node 2 holds its GPUs in reverse: local rank 3 -> GPU 4 */
    env_of(&f, 11, 0, &e);
    ENV_EQ(&e, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
    ENV_EQ(&e, "CUDA_VISIBLE_DEVICES", "7,6,5,4,3,2,1,0");
    ENV_EQ(&e, "P3D_GPU", "4");
    ENV_EQ(&e, "P3D_GPU_PCI", "0000:14:00.0");
    ENV_EQ(&e, "P3D_GPU_PHYS", "4"); /* no allocation: the same index */
    ENV_EQ(&e, "P3D_NUMA", "1");
    ENV_EQ(&e, "P3D_NIC", "mlx5_1");
    const char *cvd = p3d_envv_get(&e, "CUDA_VISIBLE_DEVICES");
    /* device LOCAL_RANK of the visible list is the placed GPU */
    assert_int_equal(cvd[2 * 3] - '0', 4);
    p3d_envv_free(&e);
    env_of(&f, 2, 0, &e);
    ENV_EQ(&e, "CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7");
    ENV_EQ(&e, "P3D_GPU", "2");
    assert_null(p3d_envv_get(&e, "NCCL_COMM_ID"));
    p3d_envv_free(&e);
    /* CPU slots: no CUDA device is chosen */
    strcpy(f.gpus[0].model, "CPU slot");
    env_of(&f, 2, 0, &e);
    assert_null(p3d_envv_get(&e, "CUDA_VISIBLE_DEVICES"));
    p3d_envv_free(&e);
}

static void test_extra_env_and_nccl(void **st)
{
    (void)st;
    static fixture f;
    fixture_init(&f, 1, 4, 4, 1, 1);
    char *extra[] = {"FOO=bar", "RANK=override-is-last", NULL};
    f.L.extra_env = extra;
    f.L.nextra = 2;
    f.job.nccl_port = 31000;
    f.L.emulate = 1;
    p3d_envv e;
    env_of(&f, 1, 0, &e);
    ENV_EQ(&e, "FOO", "bar");
    ENV_EQ(&e, "RANK", "override-is-last");
    ENV_EQ(&e, "NCCL_COMM_ID", "127.0.0.1:31000");
    ENV_EQ(&e, "HOSTNAME", "node001");
    p3d_envv_free(&e);
}

/* The batch (docs/launch.md "Elastic width"): B 24, b 2 at dp 4 is 3
 * micro-batches; the same job placed at dp 3 below its full width 4 (what
 * a shrink's placement and p3d_jobstate.full_dp say) is 4; only
 * --micro-batches, that alone; nothing given, nothing set. */
static void test_batch(void **st)
{
    (void)st;
    static fixture f;
    p3d_envv e;
    fixture_init(&f, 2, 8, 2, 2, 4);
    f.o.global_batch = 24, f.o.micro_batch = 2, f.o.batch_tolerance = -1;
    env_of(&f, 5, 0, &e);
    ENV_EQ(&e, "P3D_GLOBAL_BATCH", "24");
    ENV_EQ(&e, "P3D_MICRO_BATCH", "2");
    ENV_EQ(&e, "P3D_MICRO_BATCHES", "3");
    p3d_envv_free(&e);
    fixture_init(&f, 2, 8, 2, 2, 3);
    f.o.global_batch = 24, f.o.micro_batch = 2, f.o.batch_tolerance = -1;
    f.job.full_dp = 4;
    env_of(&f, 0, 1, &e);
    ENV_EQ(&e, "P3D_MICRO_BATCHES", "4");
    ENV_EQ(&e, "P3D_GLOBAL_BATCH", "24");
    ENV_EQ(&e, "P3D_DP_SIZE", "3");
    p3d_envv_free(&e);
    /* --micro-batches 3 is the full width's m: b = 24 / (4 x 3) = 2 */
    f.o.micro_batch = 0, f.o.micro_batches = 3;
    env_of(&f, 0, 1, &e);
    ENV_EQ(&e, "P3D_MICRO_BATCH", "2");
    ENV_EQ(&e, "P3D_MICRO_BATCHES", "4");
    p3d_envv_free(&e);
    f.o.global_batch = 0;
    env_of(&f, 0, 1, &e);
    ENV_EQ(&e, "P3D_GLOBAL_BATCH", "(unset)");
    ENV_EQ(&e, "P3D_MICRO_BATCH", "(unset)");
    ENV_EQ(&e, "P3D_MICRO_BATCHES", "3");
    p3d_envv_free(&e);
    f.o.micro_batches = 0;
    env_of(&f, 0, 1, &e);
    ENV_EQ(&e, "P3D_MICRO_BATCHES", "(unset)");
    p3d_envv_free(&e);
}

static void test_env_file(void **st)
{
    (void)st;
    char path[] = "/tmp/p3d_envfile_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *text = "# comment\n\nA=1\nexport B=\"two words\"\n  C='x=y'\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    p3d_envv e = {0};
    char *err = NULL;
    assert_int_equal(p3d_env_file_read(path, &e, &err), 0);
    ENV_EQ(&e, "A", "1");
    ENV_EQ(&e, "B", "two words");
    ENV_EQ(&e, "C", "x=y");
    p3d_envv_free(&e);
    fd = open(path, O_WRONLY | O_TRUNC);
    assert_int_equal(write(fd, "A=1\nnot a pair\n", 15), 15);
    close(fd);
    assert_int_equal(p3d_env_file_read(path, &e, &err), -1);
    assert_non_null(strstr(err, ":2:")); /* names the line */
    free(err);
    p3d_envv_free(&e);
    unlink(path);
}

static void test_rank_list_and_tag(void **st)
{
    (void)st;
    unsigned char sel[16];
    char *err = NULL;
    assert_int_equal(p3d_rank_list_parse("0,8-10,15", 16, sel, &err), 0);
    assert_true(sel[0] && sel[8] && sel[9] && sel[10] && sel[15]);
    assert_false(sel[1] || sel[7] || sel[11] || sel[14]);
    assert_int_equal(p3d_rank_list_parse("16", 16, sel, &err), -1);
    free(err);
    err = NULL;
    assert_int_equal(p3d_rank_list_parse("3-x", 16, sel, &err), -1);
    free(err);
    /* a range reaching past the world names the rank and the world size */
    err = NULL;
    assert_int_equal(p3d_rank_list_parse("1-9", 4, sel, &err), -1);
    assert_non_null(strstr(err, "rank 9 is outside the job (world size 4"));
    free(err);
    err = NULL;
    assert_int_equal(p3d_rank_list_parse("5-9", 4, sel, &err), -1);
    assert_non_null(strstr(err, "rank 5 is outside"));
    free(err);
    const char *bad[] = {"", " 1", "+1", "1-", "1--3", "3-1", "1,,2", "1;2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err = NULL;
        assert_int_equal(p3d_rank_list_parse(bad[i], 16, sel, &err), -1);
        assert_non_null(strstr(err, "--output-ranks"));
        free(err);
    }
    assert_int_equal(p3d_rank_list_parse("0-3", 4, sel, &err), 0);
    assert_true(sel[0] && sel[1] && sel[2] && sel[3]);
    static fixture f;
    fixture_init(&f, 2, 8, 2, 2, 4);
    char tag[96];
    p3d_rank_tag(&f.pl, 3, tag, sizeof tag);
    assert_string_equal(tag, "[r3 tp1 pp0 dp1] ");
    f.pl.mesh.size[P3D_DIM_CP] = 2; /* shown only when > 1 */
    p3d_rank_tag(&f.pl, 3, tag, sizeof tag);
    assert_string_equal(tag, "[r3 tp1 pp0 dp1 cp0] ");
}

static void test_free_port(void **st)
{
    (void)st;
    int p = p3d_free_port();
    assert_true(p > 0 && p < 65536);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_torchrun_names), cmocka_unit_test(test_groups_and_coords),
        cmocka_unit_test(test_cuda_visible),   cmocka_unit_test(test_extra_env_and_nccl),
        cmocka_unit_test(test_env_file),       cmocka_unit_test(test_rank_list_and_tag),
        cmocka_unit_test(test_free_port),      cmocka_unit_test(test_batch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
