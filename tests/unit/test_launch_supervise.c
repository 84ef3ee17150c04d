/* SPDX-License-Identifier: BSD-3-Clause */
/* test_launch_supervise.c — the agent and launcher loops (supervise.c) on
 * a hand-built 2-node placement with /bin/sh workers: success, fail-fast
 * with the failing rank's code, grace then SIGKILL, death by signal,
 * restarts with the same ranks, whole lines under concurrent long output. */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "launch_fixture.h"
#include "hub.h"

static char dir[64];

static int setup(void **st)
{
    (void)st;
    strcpy(dir, "/tmp/p3d_sup_XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    setenv("T_DIR", dir, 1);
    return 0;
}

static int teardown(void **st)
{
    (void)st;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Runs the fixture's job as an emulated 2-node launch; returns the code
 * and the wall time in *secs. */
static int run_job(fixture *f, double *secs)
{
    int nodes[8];
    int n = 0;
    for (size_t i = 0; i < f->cluster.nnodes; i++)
        nodes[n++] = (int)i;
    f->L.emulate = 1;
    f->L.run_dir = dir;
    double t0 = p3d_now();
    int rc = p3d_launcher_run(&f->L, nodes, n);
    if (secs)
        *secs = p3d_now() - t0;
    return rc;
}

static void test_success(void **st)
{
    (void)st;
    static fixture f;
    fixture_init(&f, 2, 4, 2, 2, 2);
    fixture_sh(&f, "echo \"$RANK $LOCAL_RANK $P3D_NODE\" > \"$T_DIR/ok-$RANK\"");
    assert_int_equal(run_job(&f, NULL), 0);
    for (int r = 0; r < 8; r++) {
        char p[128], line[64] = "", want[64];
        snprintf(p, sizeof p, "%s/ok-%d", dir, r);
        FILE *fp = fopen(p, "r");
        assert_non_null(fp);
        assert_non_null(fgets(line, sizeof line, fp));
        fclose(fp);
        snprintf(want, sizeof want, "%d %d node%03d\n", r, r % 4, r / 4 + 1);
        assert_string_equal(line, want);
    }
}

static void test_fail_fast_code(void **st)
{
    (void)st;
    static fixture f;
    fixture_init(&f, 2, 4, 2, 2, 2);
    f.o.grace = 1;
    /* rank 5 (node 2) fails; everyone else would run for a minute */
    fixture_sh(&f, "if [ \"$RANK\" = 5 ]; then echo boom-from-5 >&2; exit 7; fi; exec sleep 60");
    assert_int_equal(run_job(&f, NULL), 7);
}

static double wall_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void test_grace_then_kill(void **st)
{
    (void)st;
    static fixture f;
    fixture_init(&f, 2, 4, 2, 2, 2);
    f.o.grace = 1;
    /* the survivors ignore SIGTERM: only SIGKILL after the grace ends
     * them. Rank 2 fails once all of them have set their trap, and notes
     * when. */
    fixture_sh(&f, "if [ \"$RANK\" = 2 ]; then while [ $(ls \"$T_DIR\" | grep -c '^trap-') -lt 7 ]; do sleep 0.02; "
                   "done; date +%s.%N > \"$T_DIR/failed_at\"; exit 9; fi; trap '' TERM; touch \"$T_DIR/trap-$RANK\"; "
                   "while :; do sleep 0.05; done");
    assert_int_equal(run_job(&f, NULL), 9);
    double end = wall_now(), failed_at = 0;
    char p[128];
    snprintf(p, sizeof p, "%s/failed_at", dir);
    FILE *fp = fopen(p, "r");
    assert_non_null(fp);
    assert_int_equal(fscanf(fp, "%lf", &failed_at), 1);
    fclose(fp);
    /* the grace was honoured (how fast the job is down after it is a
     * figure for bench/, not a bound for a loaded test machine) */
    assert_true(end - failed_at >= 1.0 - 0.05);
}

static void test_signal_code(void **st)
{
    (void)st;
    static fixture f;
    fixture_init(&f, 1, 4, 2, 1, 2);
    f.o.grace = 1;
    fixture_sh(&f, "if [ \"$RANK\" = 3 ]; then kill -SEGV $$; fi; exec sleep 60");
    assert_int_equal(run_job(&f, NULL), 128 + SIGSEGV);
}

static void test_restarts_same_ranks(void **st)
{
    (void)st;
    static fixture f;
    fixture_init(&f, 2, 4, 2, 2, 2);
    f.o.grace = 1;
    f.o.max_restarts = 2;
    /* rank 6 fails in the first two generations, then all succeed */
    fixture_sh(&f, "echo \"$RANK $LOCAL_RANK $P3D_GPU $P3D_NODE\" >> \"$T_DIR/gen-$P3D_RESTART_COUNT\"; "
                   "while [ $(wc -l < \"$T_DIR/gen-$P3D_RESTART_COUNT\") -lt 8 ]; do sleep 0.02; done; "
                   "[ \"$TORCHELASTIC_RESTART_COUNT\" = \"$P3D_RESTART_COUNT\" ] || exit 99; "
                   "if [ \"$RANK\" = 6 ] && [ \"$P3D_RESTART_COUNT\" -lt 2 ]; then exit 5; fi; "
                   "[ \"$RANK\" = 6 ] || [ \"$P3D_RESTART_COUNT\" = 2 ] || exec sleep 60");
    assert_int_equal(run_job(&f, NULL), 0);
    char *gens[3];
    for (int g = 0; g < 3; g++) {
        char cmd[160];
        snprintf(cmd, sizeof cmd, "sort -n '%s/gen-%d'", dir, g);
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        char buf[4096];
        size_t n = fread(buf, 1, sizeof buf - 1, p);
        buf[n] = 0;
        pclose(p);
        gens[g] = strdup(buf);
        int lines = 0;
        for (char *c = buf; *c; c++)
            lines += *c == '\n';
        assert_int_equal(lines, 8);
    }
    /* the same ranks on the same nodes and GPUs in every generation */
    assert_string_equal(gens[0], gens[1]);
    assert_string_equal(gens[0], gens[2]);
    for (int g = 0; g < 3; g++)
        free(gens[g]);
    /* out of restarts: the failing rank's code comes back */
    fixture_init(&f, 2, 4, 2, 2, 2);
    f.o.grace = 1;
    f.o.max_restarts = 1;
    fixture_sh(&f, "if [ \"$RANK\" = 6 ]; then exit 5; fi; exec sleep 60");
    assert_int_equal(run_job(&f, NULL), 5);
}

static void test_lines_whole(void **st)
{
    (void)st;
    static fixture f;
    fixture_init(&f, 2, 4, 2, 2, 2);
    f.L.tag = 1;
    /* every rank writes 200 lines of 20000 characters, in odd-sized
     * pieces (dd bs=777), all at once */
    fixture_sh(&f, "yes \"$(printf '%020000d' 0 | tr 0 \"$RANK\")\" | head -n 200 | dd bs=777 status=none");
    char out[128];
    snprintf(out, sizeof out, "%s/out.txt", dir);
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    fflush(stdout);
    int saved = dup(1);
    dup2(fd, 1);
    close(fd);
    int rc = run_job(&f, NULL);
    dup2(saved, 1);
    close(saved);
    assert_int_equal(rc, 0);
    FILE *fp = fopen(out, "r");
    assert_non_null(fp);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int count[8] = {0}, lines = 0;
    while ((n = getline(&line, &cap, fp)) > 0) {
        int r = -1, tp, pp, dp, off = 0;
        if (sscanf(line, "[r%d tp%d pp%d dp%d] %n", &r, &tp, &pp, &dp, &off) != 4 || r < 0 || r > 7)
            fail_msg("line %d has no tag: %.40s", lines, line);
        assert_int_equal(n - off, 20001);
        for (int i = off; i < n - 1; i++)
            if (line[i] != '0' + r)
                fail_msg("line %d of rank %d torn at %d: %.20s", lines, r, i, line + i);
        count[r]++;
        lines++;
    }
    free(line);
    fclose(fp);
    for (int r = 0; r < 8; r++)
        assert_int_equal(count[r], 200);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_success),
        cmocka_unit_test(test_fail_fast_code),
        cmocka_unit_test(test_grace_then_kill),
        cmocka_unit_test(test_signal_code),
        cmocka_unit_test(test_restarts_same_ranks),
        cmocka_unit_test(test_lines_whole),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
