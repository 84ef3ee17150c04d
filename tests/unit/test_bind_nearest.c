/* SPDX-License-Identifier: BSD-3-Clause */
/* test_bind_nearest.c — a rank whose NUMA node has too few of the allowed
 * CPUs gets the allowed CPUs of the nearest NUMA nodes by SLIT distance
 * (not by CPU number), says where they came from, and falls back to CPU
 * numbers when sysfs gives no distances. A fake /sys/devices/system/node
 * in a temp dir: 4 nodes of 4 CPUs, where node 2 is nearer to node 0 than
 * node 1 is. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "ranks.h"

static char root[256];

static void put(const char *rel, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void fake_sysfs(const char *const dist[4])
{
    char d[512], rel[64];
    put("online", "0-3\n");
    for (int n = 0; n < 4; n++) {
        snprintf(d, sizeof d, "%s/node%d", root, n);
        mkdir(d, 0700);
        char cpus[32];
        snprintf(cpus, sizeof cpus, "%d-%d\n", 4 * n, 4 * n + 3);
        snprintf(rel, sizeof rel, "node%d/cpulist", n);
        put(rel, cpus);
        snprintf(rel, sizeof rel, "node%d/distance", n);
        put(rel, dist[n]);
    }
}

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/tmp/p3d-test-bind-XXXXXX");
    if (!mkdtemp(root))
        return -1;
    static const char *const dist[4] = {"10 21 12 31\n", "21 10 21 21\n", "12 21 10 21\n", "31 21 21 10\n"};
    fake_sysfs(dist);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

static void expect(const char *own, int numa, const char *allowed, int want, const char *sysfs, const char *cpus,
                   const char *why1, const char *why2)
{
    char *why = NULL, *got = p3d_bind_nearest(own, numa, allowed, want, sysfs, &why);
    assert_non_null(got);
    if (strcmp(got, cpus))
        fail_msg("own %s allowed %s want %d: got %s, want %s (%s)", own, allowed, want, got, cpus, why ? why : "");
    if (!why1)
        assert_null(why);
    else {
        assert_non_null(why);
        if (!strstr(why, why1) || (why2 && !strstr(why, why2)))
            fail_msg("note '%s' lacks '%s' / '%s'", why, why1, why2 ? why2 : "");
    }
    free(got);
    free(why);
}

static void test_enough_of_its_own(void **state)
{
    (void)state;
    expect("0-3", 0, "0-15", 4, root, "0-3", NULL, NULL);
    expect("0-3", 0, "1-2,5", 2, root, "1-2", NULL, NULL); /* its share is met inside its node */
}

static void test_nearest_by_distance(void **state)
{
    (void)state;
    /* node 0 keeps CPU 3 and gets 2 more from node 2 (distance 12), not
     * CPUs 4-5 of node 1 (distance 21), which are nearer by number */
    expect("0-3", 0, "3-15", 3, root, "3,8-9", "NUMA 0 has 1 allowed CPU of the 3 this rank's share needs",
           "added nearest allowed 8-9 (NUMA 2 at distance 12)");
    /* node 2 full of nothing allowed: node 1 next, then node 3 */
    expect("0-3", 0, "6-7,12-15", 4, root, "6-7,12-13", "outside the allowed set: nearest allowed 6-7,12-13",
           "NUMA 1 at distance 21, NUMA 3 at distance 31");
    /* ties (node 3: nodes 1 and 2 both at 21): the lower node first */
    expect("12-15", 3, "0-11", 2, root, "4-5", "outside the allowed set", "NUMA 1 at distance 21");
    /* fewer allowed than wanted: everything allowed, no loop */
    expect("0-3", 0, "9", 4, root, "9", "nearest allowed 9", NULL);
}

static void test_no_distances(void **state)
{
    (void)state;
    char none[300];
    snprintf(none, sizeof none, "%s/missing", root);
    /* closest CPU numbers, and no NUMA named */
    expect("0-3", 0, "3-15", 3, none, "3-5", "added nearest allowed 4-5", NULL);
    /* an unreadable distance row is no map either */
    static const char *const bad[4] = {"10 x\n", "21 10 21 21\n", "12 21 10 21\n", "31 21 21 10\n"};
    fake_sysfs(bad);
    expect("0-3", 0, "3-15", 3, root, "3-5", "added nearest allowed 4-5", NULL);
    static const char *const good[4] = {"10 21 12 31\n", "21 10 21 21\n", "12 21 10 21\n", "31 21 21 10\n"};
    fake_sysfs(good);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_enough_of_its_own),
        cmocka_unit_test(test_nearest_by_distance),
        cmocka_unit_test(test_no_distances),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
