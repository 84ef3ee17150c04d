/* SPDX-License-Identifier: BSD-3-Clause */
/* test_worker_ckpt.c - p3d-worker's checkpoint code (worker/ckpt.c and
 * ckpt_fs.c, included so their static helpers are testable) in one process: the marker's format,
 * the regular-file and directory rules, the temporary-name writer, and save
 * and load with generations, on a world of one rank (the TCP collectives
 * are stubbed: an allgather of one copies). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../../worker/ckpt.c"
#include "../../worker/ckpt_fs.c"

int tcp_world_allgather(tcp_world *w, const void *mine, void *all, size_t each)
{
    (void)w;
    memcpy(all, mine, each);
    return 0;
}

void tcp_set_activity(tcp_world *w, const char *what)
{
    (void)w;
    (void)what;
}

typedef struct fixture {
    char dir[64];
    p3dw_env e;
    p3dw_opts o;
    p3dw_ckpt c;
} fixture;

static void setup(fixture *f, long gen, const char *job, int steps)
{
    memset(f, 0, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/p3d-ckpt-unit-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    f->e.world = 1;
    f->e.generation = gen;
    snprintf(f->e.job_id, sizeof f->e.job_id, "%s", job);
    for (int d = 0; d < P3DW_NALL; d++)
        f->e.size[d] = 1;
    f->o = (p3dw_opts){.layers = 2, .hidden = 8, .global_batch = 4, .steps = steps, .seed = 7, .top_k = 2};
    f->c = (p3dw_ckpt){.dir = f->dir, .e = &f->e, .o = &f->o, .dfd = -1};
    assert_int_equal(p3dw_ckpt_open(&f->c), 0);
}

static void teardown(fixture *f)
{
    char cmd[128];
    p3dw_ckpt_close(&f->c);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
}

static void slurp(const char *path, char *out, size_t n)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    size_t k = fread(out, 1, n - 1, fp);
    out[k] = 0;
    fclose(fp);
}

static void test_marker_roundtrip_and_refusals(void **state)
{
    (void)state;
    fixture f;
    setup(&f, 12, "job\x1b[2J", 5);
    marker m, back;
    char text[MARKER_MAX];
    const char *why = NULL;
    my_marker(&f.c, 4, &m);
    assert_string_equal(m.job, "job?[2J"); /* control bytes never reach the file */
    int n = ck_format_marker(&m, text, sizeof text);
    assert_true(n > 0);
    assert_int_equal(ck_parse_marker(text, (size_t)n, &back, &why), 0);
    assert_int_equal(back.step, 4);
    assert_int_equal(back.gen, 12);
    assert_string_equal(back.job, m.job);
    for (int i = 0; i < M_NMESH; i++)
        assert_int_equal(back.mesh[i], m.mesh[i]);
    static const char *const bad[] = {
        "p3d-worker checkpoint 1\nstep 4\n",
        "p3d-worker checkpoint 2\nstep 4\ngeneration +1\njob j\nworld_size 1\ntp 1\npp 1\n"
        "dp 1\nep 1\netp 1\nedp 1\n",
        "p3d-worker checkpoint 2\nstep 4\njob j\ngeneration 1\nworld_size 1\ntp 1\npp 1\n"
        "dp 1\nep 1\netp 1\nedp 1\n",
        "p3d-worker checkpoint 2\nstep 4\ngeneration 1\njob j\nworld_size 1\ntp 1\npp 1\n"
        "dp 1\nep 1\netp 1\nedp 1\nextra 1\n",
        "p3d-worker checkpoint 2\nstep 4\ngeneration 1\njob j\nworld_size 1\ntp 1\npp 1\n"
        "dp 1\nep 1\netp 1\nedp 1",
        "p3d-worker checkpoint 2\nstep 4\ngeneration 1234567890\njob j\nworld_size 1\ntp 1\n"
        "pp 1\ndp 1\nep 1\netp 1\nedp 1\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why = NULL;
        assert_int_equal(ck_parse_marker(bad[i], strlen(bad[i]), &back, &why), -1);
        assert_non_null(why);
    }
    /* an embedded NUL: the length says more than the string holds */
    assert_int_equal(ck_parse_marker(text, (size_t)n + 1, &back, &why), -1);
    teardown(&f);
}

static void test_open_regular_refuses_fifo_and_link(void **state)
{
    (void)state;
    fixture f;
    setup(&f, 0, "j", 5);
    const char *why = NULL;
    assert_int_equal(mkfifoat(f.c.dfd, "fifo", 0600), 0);
    assert_int_equal(symlinkat("/etc/passwd", f.c.dfd, "link"), 0);
    int fd = openat(f.c.dfd, "plain", O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(ck_open_regular(f.c.dfd, "fifo", &why), -1); /* returns: no writer needed */
    assert_non_null(strstr(why, "not a regular file"));
    assert_int_equal(ck_open_regular(f.c.dfd, "link", &why), -1);
    assert_non_null(strstr(why, "symbolic link"));
    fd = ck_open_regular(f.c.dfd, "plain", &why);
    assert_true(fd >= 0);
    assert_int_equal(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
    close(fd);
    teardown(&f);
}

static void test_directory_rules(void **state)
{
    (void)state;
    fixture f;
    char msg[256];
    struct stat st;
    setup(&f, 0, "j", 5);
    assert_int_equal(fstat(f.c.dfd, &st), 0);
    assert_int_equal(ck_check_private_dir(&st, msg, sizeof msg), 0);
    st.st_mode |= S_IWOTH;
    assert_int_equal(ck_check_private_dir(&st, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "another user could write"));
    st.st_mode &= ~(mode_t)S_IWOTH;
    st.st_uid = geteuid() + 1;
    assert_int_equal(ck_check_private_dir(&st, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "not to you"));
    /* the top directory: refused when others may write it */
    p3dw_ckpt_close(&f.c);
    assert_int_equal(chmod(f.dir, 0777), 0);
    assert_int_equal(p3dw_ckpt_open(&f.c), -1);
    assert_int_equal(chmod(f.dir, 0700), 0);
    assert_int_equal(p3dw_ckpt_open(&f.c), 0);
    /* a step directory that is a link is not opened */
    assert_int_equal(symlinkat("/tmp", f.c.dfd, "step-00000003"), 0);
    assert_int_equal(ck_open_step(&f.c, 3, 1, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "symbolic link"));
    teardown(&f);
}

static void test_write_atomic_not_through_planted_link(void **state)
{
    (void)state;
    fixture f;
    char victim[128], buf[64], path[128];
    setup(&f, 0, "j", 5);
    snprintf(victim, sizeof victim, "%s/victim", f.dir);
    FILE *fp = fopen(victim, "w");
    assert_non_null(fp);
    fputs("precious", fp);
    fclose(fp);
    assert_int_equal(symlinkat(victim, f.c.dfd, "shard.tmp"), 0);
    const void *part[1] = {"new"};
    size_t len[1] = {3};
    assert_int_equal(ck_write_atomic(f.c.dfd, "shard", part, len, 1, 0), 0);
    slurp(victim, buf, sizeof buf);
    assert_string_equal(buf, "precious");
    snprintf(path, sizeof path, "%s/shard", f.dir);
    slurp(path, buf, sizeof buf);
    assert_string_equal(buf, "new");
    /* commit (link) never replaces an existing name */
    assert_int_equal(ck_write_atomic(f.c.dfd, "shard", part, len, 1, 1), -1);
    assert_int_equal(errno, EEXIST);
    assert_int_equal(faccessat(f.c.dfd, "shard.tmp", F_OK, AT_SYMLINK_NOFOLLOW), -1);
    teardown(&f);
}

static void test_save_load_generations_and_fence(void **state)
{
    (void)state;
    fixture f;
    float w[5] = {1, 2, 3, 4, 5}, r[5] = {0};
    double l[3] = {0.5, 0.25, 0}, lr[3] = {0};
    char path[160], before[1024], after[1024];
    setup(&f, 2, "J", 3);
    assert_int_equal(p3dw_ckpt_save(&f.c, 2, w, 5, l), 0);
    snprintf(path, sizeof path, "%s/step-00000002/rank-00000.gen-2.bin", f.dir);
    assert_int_equal(access(path, F_OK), 0);
    assert_int_equal(p3dw_ckpt_load(&f.c, r, 5, lr), 2);
    assert_memory_equal(r, w, sizeof w);
    assert_true(lr[0] == 0.5 && lr[1] == 0.25);
    /* generation 1 of the same job is a stale copy: step 2 is not touched */
    snprintf(path, sizeof path, "%s/step-00000002/complete", f.dir);
    slurp(path, before, sizeof before);
    f.e.generation = 1;
    assert_int_equal(p3dw_ckpt_save(&f.c, 2, w, 5, l), -1);
    slurp(path, after, sizeof after);
    assert_string_equal(before, after);
    snprintf(path, sizeof path, "%s/step-00000002/rank-00000.gen-1.bin", f.dir);
    assert_int_equal(access(path, F_OK), -1);
    /* a shard of another generation beside the marker's is never read:
     * garbage under the gen-1 name changes nothing */
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs("stale", fp);
    fclose(fp);
    memset(r, 0, sizeof r);
    assert_int_equal(p3dw_ckpt_load(&f.c, r, 5, lr), 2);
    assert_memory_equal(r, w, sizeof w);
    /* another job supersedes the marker */
    snprintf(f.e.job_id, sizeof f.e.job_id, "K");
    f.e.generation = 0;
    w[0] = 9;
    assert_int_equal(p3dw_ckpt_save(&f.c, 2, w, 5, l), 0);
    memset(r, 0, sizeof r);
    assert_int_equal(p3dw_ckpt_load(&f.c, r, 5, lr), 2);
    assert_true(r[0] == 9);
    /* at or past --steps: -3 */
    f.o.steps = 2;
    assert_int_equal(p3dw_ckpt_load(&f.c, r, 5, lr), -3);
    /* a marker of another world size: -2 */
    f.o.steps = 3;
    f.e.world = 2;
    assert_int_equal(p3dw_ckpt_load(&f.c, r, 5, lr), -2);
    teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_marker_roundtrip_and_refusals),
        cmocka_unit_test(test_open_regular_refuses_fifo_and_link),
        cmocka_unit_test(test_directory_rules),
        cmocka_unit_test(test_write_atomic_not_through_planted_link),
        cmocka_unit_test(test_save_load_generations_and_fence),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
