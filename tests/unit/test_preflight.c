/* SPDX-License-Identifier: BSD-3-Clause */
/* test_preflight.c — the preflight's verdict (launcher/run/preflight/preflight.c):
 * the worker's figures line parsed strictly (it is input), the medians,
 * a node --slow-factor below one on any figure excluded with its reason,
 * TCP judged on the better of a node's two ring links and only from 3
 * nodes on, a node that did not run left out of the medians. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "preflight.h"

static void parse_good(void **st)
{
    (void)st;
    p3d_preflight_node nd = {0};
    char why[200] = "";
    const char *out =
        "noise before\npreflight backend=cpu gflops=1.5 mem_gbps=12 links=skipped\n"
        "preflight backend=cpu gflops=1.25 mem_gbps=10.5 tcp_out_mbps=400 tcp_in_mbps=380 links=skipped\n";
    assert_int_equal(p3d_preflight_parse(out, &nd, why, sizeof why), 0);
    /* the last line counts */
    assert_true(nd.gflops == 1.25 && nd.mem_gbps == 10.5 && nd.tcp_out_mbps == 400 && nd.tcp_in_mbps == 380);
    assert_int_equal(p3d_preflight_parse("preflight backend=cpu gflops=2 mem_gbps=3 links=skipped", &nd, why,
                                         sizeof why),
                     0);
    assert_true(nd.gflops == 2 && nd.tcp_out_mbps < 0 && nd.tcp_in_mbps < 0); /* no ring: none */
}

static void parse_bad(void **st)
{
    (void)st;
    static const struct {
        const char *text, *why;
    } cases[] = {
        {"", "no 'preflight ...' figures line"},
        {"p3d-worker: something else\n", "no 'preflight ...' figures line"},
        {"preflight gflops=1 mem_gbps=fast\n", "the bad value 'mem_gbps=fast'"},
        {"preflight gflops=1 mem_gbps=-3\n", "the bad value 'mem_gbps=-3'"},
        {"preflight gflops=1 mem_gbps=nan\n", "the bad value 'mem_gbps=nan'"},
        {"preflight gflops=1x mem_gbps=2\n", "the bad value 'gflops=1x'"},
        {"preflight gflops=1 mem_gbps=2 turbo=9\n", "the unknown word 'turbo=9'"},
        {"preflight gflops=1 mem_gbps=2 junk\n", "'junk' where KEY=VALUE belongs"},
        {"preflight backend=cpu gflops=1\n", "lacks gflops or mem_gbps"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        p3d_preflight_node nd = {0};
        char why[200] = "";
        assert_int_equal(p3d_preflight_parse(cases[i].text, &nd, why, sizeof why), -1);
        if (!strstr(why, cases[i].why))
            fail_msg("case %zu: '%s' does not say '%s'", i, why, cases[i].why);
    }
    char *huge = malloc(2000);
    assert_non_null(huge);
    memset(huge, 'x', 1999);
    memcpy(huge, "preflight ", 10);
    huge[1999] = 0;
    p3d_preflight_node nd = {0};
    char why[200] = "";
    assert_int_equal(p3d_preflight_parse(huge, &nd, why, sizeof why), -1);
    assert_non_null(strstr(why, "longer than"));
    free(huge);
}

/* n nodes with the same figures, then node `slow` divided by `by` on
 * figure `which` (0 compute, 1 memory, 2 TCP both links, 3 TCP one link). */
static p3d_preflight make(int n, int slow, int which, double by)
{
    static const char *names[] = {"n1", "n2", "n3", "n4", "n5", "n6"};
    p3d_preflight pf = {.n = n, .slow_factor = 1.3, .timeout = 30};
    pf.nodes = calloc((size_t)n, sizeof *pf.nodes);
    assert_non_null(pf.nodes);
    for (int i = 0; i < n; i++) {
        /* +-10% between nodes: never excluded at 1.3 */
        double f = 1.0 + 0.05 * (i % 3) - 0.05;
        pf.nodes[i] = (p3d_preflight_node){.name = names[i],
                                           .ran = 1,
                                           .gflops = 1.0 * f,
                                           .mem_gbps = 10 * f,
                                           .tcp_out_mbps = 500 * f,
                                           .tcp_in_mbps = 480 * f};
    }
    if (slow >= 0) {
        p3d_preflight_node *s = &pf.nodes[slow];
        if (which == 0)
            s->gflops /= by;
        else if (which == 1)
            s->mem_gbps /= by;
        else {
            s->tcp_out_mbps /= by;
            if (which == 2)
                s->tcp_in_mbps /= by;
        }
    }
    return pf;
}

static void judge_rules(void **st)
{
    (void)st;
    p3d_preflight pf = make(5, -1, 0, 1);
    assert_int_equal(p3d_preflight_judge(&pf), 0);
    assert_int_equal(pf.nexcluded, 0); /* no false positive on +-10% */
    assert_true(pf.tcp_judged);
    p3d_preflight_free(&pf);

    for (int which = 0; which < 3; which++) {
        pf = make(5, 2, which, 4);
        assert_int_equal(p3d_preflight_judge(&pf), 0);
        assert_int_equal(pf.nexcluded, 1);
        assert_true(pf.nodes[2].excluded);
        static const char *what[] = {"compute", "memory bandwidth", "TCP bandwidth"};
        if (!strstr(pf.nodes[2].why, what[which]) || !strstr(pf.nodes[2].why, "below the median") ||
            !strstr(pf.nodes[2].why, "--slow-factor 1.3"))
            fail_msg("figure %d: '%s'", which, pf.nodes[2].why);
        p3d_preflight_free(&pf);
    }
    /* only one of its links slow: a neighbour of a slow node, kept */
    pf = make(5, 2, 3, 4);
    assert_int_equal(p3d_preflight_judge(&pf), 0);
    assert_int_equal(pf.nexcluded, 0);
    p3d_preflight_free(&pf);
    /* 1.2x below: under the factor */
    pf = make(5, 2, 0, 1.2);
    assert_int_equal(p3d_preflight_judge(&pf), 0);
    assert_int_equal(pf.nexcluded, 0);
    p3d_preflight_free(&pf);
    /* two nodes: TCP shown, not judged (which end is slow?) */
    pf = make(2, 1, 2, 10);
    assert_int_equal(p3d_preflight_judge(&pf), 0);
    assert_false(pf.tcp_judged);
    assert_int_equal(pf.nexcluded, 0);
    p3d_preflight_free(&pf);
    /* a node that did not run (already excluded, no figures) is left out
     * of the medians: the others are judged among themselves */
    pf = make(5, -1, 0, 1);
    pf.nodes[0] = (p3d_preflight_node){
        .name = "n1", .excluded = 1, .gflops = -1, .mem_gbps = -1, .tcp_out_mbps = -1, .tcp_in_mbps = -1};
    snprintf(pf.nodes[0].why, sizeof pf.nodes[0].why, "its benchmark failed: timed out after 30 s");
    pf.nexcluded = 1;
    assert_int_equal(p3d_preflight_judge(&pf), 0);
    assert_int_equal(pf.nexcluded, 1);
    assert_true(pf.median_gflops > 0.9 && pf.median_gflops < 1.1);
    assert_non_null(strstr(pf.nodes[0].why, "timed out"));
    p3d_preflight_free(&pf);
}

/* The table p3d_preflight_table prints, into buf. */
static void table_of(const p3d_preflight *pf, char *buf, size_t cap)
{
    memset(buf, 0, cap);
    FILE *f = fmemopen(buf, cap - 1, "w");
    assert_non_null(f);
    p3d_preflight_table(pf, f);
    fclose(f);
}

/* judge.h: no reference under 3 values; the middle one, and for an even
 * count the lenient middle (never a mean of two). */
static void judge_pick(void **st)
{
    (void)st;
    assert_int_equal(p3d_judge_pick(0, 1), -1);
    assert_int_equal(p3d_judge_pick(2, 0), -1);
    assert_int_equal(p3d_judge_pick(3, 0), 1);
    assert_int_equal(p3d_judge_pick(3, 1), 1);
    assert_int_equal(p3d_judge_pick(4, 1), 2); /* busy: the upper middle */
    assert_int_equal(p3d_judge_pick(4, 0), 1); /* a rate: the lower middle */
    double v[4] = {1e300, 100, 101, 99}, ref;
    assert_int_equal(p3d_judge_ref(v, 4, 0, &ref), 0);
    assert_true(ref == 100);
    double two[2] = {900, 100};
    assert_int_equal(p3d_judge_ref(two, 2, 0, &ref), -1); /* cannot judge; shown: the lower */
    assert_true(ref == 100);
}

/* Issue 44: a figure beyond any hardware is refused with the reason (the
 * node that claims it is excluded, not its honest peer); with two nodes a
 * figure is shown but not judged (a median of two is their mean); a peer
 * claiming a high but possible figure cannot move the median of three. */
static void judge_robust(void **st)
{
    (void)st;
    p3d_opts o = {.slow_factor = 1.3, .preflight_timeout = 30};
    const char *names[] = {"h:0", "h:1", "h:2"};
    const char *liar[] = {"preflight gflops=100 mem_gbps=20 seconds=1", "preflight gflops=1e300 mem_gbps=20 seconds=1"};
    p3d_preflight pf;
    assert_int_equal(p3d_preflight_gathered(&o, names, liar, 2, &pf), 0);
    assert_false(pf.nodes[0].excluded);
    assert_true(pf.nodes[1].excluded);
    assert_non_null(strstr(pf.nodes[1].why, "gflops=1e+300: beyond any hardware (at most 1e+08 GFLOP/s)"));
    p3d_preflight_free(&pf);
    const char *two[] = {"preflight gflops=100 mem_gbps=20 seconds=1", "preflight gflops=900 mem_gbps=90 seconds=1"};
    assert_int_equal(p3d_preflight_gathered(&o, names, two, 2, &pf), 0);
    assert_int_equal(pf.nexcluded, 0);
    assert_false(pf.judged);
    char buf[8192];
    table_of(&pf, buf, sizeof buf);
    assert_non_null(strstr(buf, "cannot judge: 2 nodes gave figures (at least 3 needed"));
    p3d_preflight_free(&pf);
    const char *three[] = {"preflight gflops=100 mem_gbps=20 seconds=1", "preflight gflops=101 mem_gbps=20 seconds=1",
                           "preflight gflops=9e7 mem_gbps=9e4 seconds=1"};
    assert_int_equal(p3d_preflight_gathered(&o, names, three, 3, &pf), 0);
    assert_int_equal(pf.nexcluded, 0);
    assert_true(pf.judged);
    assert_true(pf.median_gflops > 100 && pf.median_gflops < 102);
    p3d_preflight_free(&pf);
    /* bounds on every figure, with the reason */
    p3d_preflight_node nd;
    char why[200];
    assert_true(p3d_preflight_parse("preflight gflops=1 mem_gbps=2e6", &nd, why, sizeof why) < 0);
    assert_non_null(strstr(why, "mem_gbps=2e+06: beyond any hardware"));
    assert_true(p3d_preflight_parse_tcp("preflight tcp_out_mbps=1e12 tcp_in_mbps=1", &nd, why, sizeof why) < 0);
    assert_non_null(strstr(why, "tcp_out_mbps=1e+12: beyond any hardware"));
}

static void json_and_table(void **st)
{
    (void)st;
    p3d_preflight pf = make(5, 2, 0, 4);
    assert_int_equal(p3d_preflight_judge(&pf), 0);
    for (int i = 0; i < pf.n; i++)
        pf.nodes[i].links = "skipped: the CPU backend has no NVLink";
    char *j = p3d_preflight_json(&pf);
    assert_non_null(j);
    assert_non_null(strstr(j, "\"excluded\": 1, \"tcp_judged\": true"));
    assert_non_null(strstr(j, "{\"node\": \"n3\", \"excluded\": true, \"gflops\": 0.26"));
    assert_non_null(strstr(j, "\"why\": null"));
    free(j);
    char buf[8192];
    table_of(&pf, buf, sizeof buf);
    assert_non_null(strstr(buf, "n3    EXCLUDED"));
    assert_non_null(strstr(buf, "1 of 5 nodes excluded"));
    p3d_preflight_free(&pf);
}

/* The leader's verdict on the lines the gathered records carried
 * (multi-node): a slow node, a failed benchmark, a malformed line (a
 * peer's input), a node that ran none (not judged), and the table says no
 * TCP ring ran. */
static void gathered_lines(void **st)
{
    (void)st;
    p3d_opts o = {.slow_factor = 1.3, .preflight_timeout = 30};
    const char *names[] = {"a:0", "a:1", "a:2", "a:3", "a:4", "a:5"};
    const char *lines[] = {"preflight gflops=10 mem_gbps=20 seconds=0.8",
                           "preflight gflops=10.5 mem_gbps=19 seconds=0.9",
                           "preflight gflops=3 mem_gbps=20 seconds=1.5",
                           "failed: its benchmark failed: its process ended with exit code 2",
                           "preflight gflops=lots mem_gbps=20",
                           NULL};
    p3d_preflight pf;
    assert_int_equal(p3d_preflight_gathered(&o, names, lines, 6, &pf), 0);
    assert_int_equal(pf.n, 6);
    assert_int_equal(pf.nrun_none, 1);
    assert_int_equal(pf.nexcluded, 3);
    assert_false(pf.nodes[0].excluded);
    assert_false(pf.nodes[1].excluded);
    assert_true(pf.nodes[2].excluded);
    assert_non_null(strstr(pf.nodes[2].why, "compute 3 GFLOP/s is 3.33x below the median 10"));
    assert_true(pf.nodes[3].excluded);
    assert_string_equal(pf.nodes[3].why, "its benchmark failed: its process ended with exit code 2");
    assert_true(pf.nodes[4].excluded);
    assert_non_null(strstr(pf.nodes[4].why, "its benchmark gave no figures: "));
    assert_non_null(strstr(pf.nodes[4].why, "gflops=lots"));
    assert_false(pf.nodes[5].excluded);
    assert_false(pf.nodes[5].ran);
    assert_false(pf.tcp_judged);
    assert_true(pf.seconds > 1.49 && pf.seconds < 1.51); /* the slowest node's */
    char buf[8192];
    table_of(&pf, buf, sizeof buf);
    assert_non_null(strstr(buf, "3 of 6 nodes excluded"));
    assert_non_null(strstr(buf, "TCP: not measured: fewer than two nodes took part in the ring"));
    assert_non_null(strstr(buf, "1 node ran no preflight"));
    p3d_preflight_free(&pf);
}

/* The TCP ring across the hosts (multi-node): the figures the lines
 * carry are judged once three nodes or more gave them, by the better of
 * each node's two links; the neighbours of a slow node keep one good link
 * each; a node with a figures line but no TCP (the ring failed before it
 * could append) is judged on compute and memory alone. */
static void gathered_ring(void **st)
{
    (void)st;
    p3d_opts o = {.slow_factor = 1.5, .preflight_timeout = 30};
    const char *names[] = {"a:0", "a:1", "a:2", "a:3", "a:4"};
    const char *lines[] = {"preflight gflops=10 mem_gbps=20 seconds=0.8 tcp_out_mbps=1000 tcp_in_mbps=950",
                           "preflight gflops=10 mem_gbps=20 seconds=0.8 tcp_out_mbps=200 tcp_in_mbps=1000",
                           "preflight gflops=10 mem_gbps=20 seconds=0.8 tcp_out_mbps=180 tcp_in_mbps=200",
                           "preflight gflops=10 mem_gbps=20 seconds=0.8 tcp_out_mbps=950 tcp_in_mbps=180",
                           "preflight gflops=10 mem_gbps=20 seconds=0.8"};
    p3d_preflight pf;
    assert_int_equal(p3d_preflight_gathered(&o, names, lines, 5, &pf), 0);
    assert_true(pf.tcp_judged);
    assert_null(pf.tcp_note);
    assert_int_equal(pf.nexcluded, 1);
    assert_true(pf.nodes[2].excluded);
    assert_non_null(strstr(pf.nodes[2].why, "TCP bandwidth (the better of its two ring links) 200 MB/s is 4.75x below "
                                            "the median 950"));
    assert_false(pf.nodes[1].excluded); /* its in-link is good */
    assert_false(pf.nodes[3].excluded); /* its out-link is good */
    assert_false(pf.nodes[4].excluded);
    char buf[8192];
    table_of(&pf, buf, sizeof buf);
    assert_non_null(strstr(buf, "TCP: MB/s on a ring of pairs (node i streams to node i+1). "));
    p3d_preflight_free(&pf);
    /* a node between two slow ones: both its links are slow, but nodes 1
     * and 3 explain all four slow links; it is cleared, they are not */
    const char *names7[] = {"r:0", "r:1", "r:2", "r:3", "r:4", "r:5", "r:6"};
    const char *sand[] = {"preflight gflops=10 mem_gbps=20 tcp_out_mbps=100 tcp_in_mbps=1000",
                          "preflight gflops=10 mem_gbps=20 tcp_out_mbps=90 tcp_in_mbps=100",
                          "preflight gflops=10 mem_gbps=20 tcp_out_mbps=95 tcp_in_mbps=90",
                          "preflight gflops=10 mem_gbps=20 tcp_out_mbps=85 tcp_in_mbps=95",
                          "preflight gflops=10 mem_gbps=20 tcp_out_mbps=1000 tcp_in_mbps=85",
                          "preflight gflops=10 mem_gbps=20 tcp_out_mbps=990 tcp_in_mbps=1000",
                          "preflight gflops=10 mem_gbps=20 tcp_out_mbps=1000 tcp_in_mbps=990"};
    assert_int_equal(p3d_preflight_gathered(&o, names7, sand, 7, &pf), 0);
    assert_int_equal(pf.nexcluded, 2);
    assert_true(pf.nodes[1].excluded && pf.nodes[3].excluded);
    assert_false(pf.nodes[2].excluded);
    assert_true(pf.nodes[2].tcp_cleared);
    p3d_preflight_free(&pf);
    /* two slow nodes side by side: three slow links, and the ring cannot
     * clear either of the two nodes in the middle */
    const char *side[] = {"preflight gflops=10 mem_gbps=20 tcp_out_mbps=100 tcp_in_mbps=1000",
                          "preflight gflops=10 mem_gbps=20 tcp_out_mbps=90 tcp_in_mbps=100",
                          "preflight gflops=10 mem_gbps=20 tcp_out_mbps=95 tcp_in_mbps=90",
                          "preflight gflops=10 mem_gbps=20 tcp_out_mbps=1000 tcp_in_mbps=95",
                          "preflight gflops=10 mem_gbps=20 tcp_out_mbps=1000 tcp_in_mbps=1000",
                          "preflight gflops=10 mem_gbps=20 tcp_out_mbps=990 tcp_in_mbps=1000",
                          "preflight gflops=10 mem_gbps=20 tcp_out_mbps=1000 tcp_in_mbps=990"};
    assert_int_equal(p3d_preflight_gathered(&o, names7, side, 7, &pf), 0);
    assert_int_equal(pf.nexcluded, 2);
    assert_true(pf.nodes[1].excluded && pf.nodes[2].excluded);
    assert_false(pf.nodes[1].tcp_cleared || pf.nodes[2].tcp_cleared);
    p3d_preflight_free(&pf);
    /* two nodes on the ring: shown, not judged (which end is slow?) */
    const char *two[] = {"preflight gflops=10 mem_gbps=20 tcp_out_mbps=10 tcp_in_mbps=1000",
                         "preflight gflops=10 mem_gbps=20 tcp_out_mbps=1000 tcp_in_mbps=10",
                         "preflight gflops=10 mem_gbps=20"};
    assert_int_equal(p3d_preflight_gathered(&o, names, two, 3, &pf), 0);
    assert_false(pf.tcp_judged);
    assert_int_equal(pf.nexcluded, 0);
    table_of(&pf, buf, sizeof buf);
    assert_non_null(strstr(buf, "not judged with fewer than 3 nodes on it"));
    p3d_preflight_free(&pf);
    /* the line of --bench-tcp-only: TCP figures required, compute absent */
    p3d_preflight_node nd;
    char why[200];
    memset(&nd, 0, sizeof nd);
    assert_int_equal(
        p3d_preflight_parse_tcp("x\npreflight backend=cpu tcp_out_mbps=812.5 tcp_in_mbps=790 links=skipped\n", &nd, why,
                                sizeof why),
        0);
    assert_true(nd.tcp_out_mbps > 812.4 && nd.tcp_out_mbps < 812.6 && nd.tcp_in_mbps > 789.9);
    assert_true(nd.gflops < 0);
    assert_true(
        p3d_preflight_parse_tcp("preflight backend=cpu tcp_out_mbps=812.5 links=skipped", &nd, why, sizeof why) < 0);
    assert_non_null(strstr(why, "lacks tcp_out_mbps or tcp_in_mbps"));
    assert_true(p3d_preflight_parse_tcp("preflight tcp_out_mbps=nan tcp_in_mbps=1", &nd, why, sizeof why) < 0);
    assert_true(p3d_preflight_parse_tcp("preflight tcp_out_mbps=-3 tcp_in_mbps=1", &nd, why, sizeof why) < 0);
}

/* Nodes that benchmarked their GPUs (the worker's CUDA path, lines as it
 * prints them): the slowest GPU's figures and the slowest peer link are
 * judged like the CPU's; a node with a degraded link is excluded for it,
 * one whose benchmark found no GPU among GPU nodes says so; the table
 * grows its GPU columns and the JSON its fields; gpus is a whole number. */
static void gathered_gpus(void **st)
{
    (void)st;
    p3d_opts o = {.slow_factor = 1.3, .preflight_timeout = 30};
    const char *names[] = {"g:0", "g:1", "g:2", "g:3"};
    const char *lines[] = {
        "preflight backend=cuda gpus=8 gflops=51000 mem_gbps=1510 p2p_gbps=380 gemm_maxrel=2.1e-07 links=measured",
        "preflight backend=cuda gpus=8 gflops=50500 mem_gbps=1490 p2p_gbps=122 gemm_maxrel=1.9e-07 links=measured",
        "preflight backend=cuda gpus=8 gflops=50800 mem_gbps=1500 p2p_gbps=379 gemm_maxrel=2e-07 links=measured",
        "preflight backend=cpu gflops=6.3 mem_gbps=37 links=skipped"};
    p3d_preflight pf;
    assert_int_equal(p3d_preflight_gathered(&o, names, lines, 4, &pf), 0);
    assert_true(pf.any_gpu);
    assert_int_equal(pf.nodes[0].gpus, 8);
    assert_int_equal(pf.nodes[3].gpus, 0);
    assert_true(pf.median_p2p_gbps > 378 && pf.median_p2p_gbps < 381);
    assert_int_equal(pf.nexcluded, 2);
    assert_false(pf.nodes[0].excluded);
    assert_true(pf.nodes[1].excluded);
    assert_non_null(strstr(pf.nodes[1].why, "GPU peer link bandwidth (its slowest pair) 122 GB/s is 3.11x below the "
                                            "median 379"));
    assert_null(strstr(pf.nodes[1].why, "compute"));
    assert_true(pf.nodes[3].excluded);
    assert_non_null(strstr(pf.nodes[3].why, "compute (no usable GPU: its benchmark ran on the CPU) 6.3 GFLOP/s"));
    assert_non_null(strstr(pf.nodes[0].links, "measured: peer copies between its GPUs"));
    char buf[8192];
    table_of(&pf, buf, sizeof buf);
    assert_non_null(strstr(buf, "GPUs   GFLOP/s  mem GB/s  P2P GB/s   TCP out    TCP in  why"));
    assert_non_null(strstr(buf, "g:1   EXCLUDED    8     50500      1490       122         -         -  GPU peer"));
    assert_non_null(strstr(buf, "\nmedian                    50500      1490       379\n"));
    char *js = p3d_preflight_json(&pf);
    assert_non_null(js);
    assert_non_null(strstr(js, "\"gpus\": 8, \"p2p_gbps\": 122"));
    assert_non_null(strstr(js, "\"gpus\": 0, \"p2p_gbps\": null"));
    free(js);
    p3d_preflight_free(&pf);
    /* one GPU: no link to measure, nothing judged on it */
    const char *one[] = {"preflight backend=cuda gpus=1 gflops=51000 mem_gbps=1510 gemm_maxrel=2e-07 links=none",
                         "preflight backend=cuda gpus=1 gflops=51000 mem_gbps=1510 gemm_maxrel=2e-07 links=none"};
    assert_int_equal(p3d_preflight_gathered(&o, names, one, 2, &pf), 0);
    assert_int_equal(pf.nexcluded, 0);
    assert_true(pf.median_p2p_gbps < 0);
    assert_string_equal(pf.nodes[0].links, "none: one GPU");
    p3d_preflight_free(&pf);
    p3d_preflight_node nd;
    char why[200];
    assert_true(p3d_preflight_parse("preflight gpus=2.5 gflops=1 mem_gbps=1", &nd, why, sizeof why) < 0);
    assert_non_null(strstr(why, "gpus=2.5"));
    assert_true(p3d_preflight_parse("preflight gpus=-1 gflops=1 mem_gbps=1", &nd, why, sizeof why) < 0);
    assert_true(p3d_preflight_parse("preflight gflops=1 mem_gbps=1 p2p_gbps=inf", &nd, why, sizeof why) < 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_good),     cmocka_unit_test(parse_bad),     cmocka_unit_test(judge_rules),
        cmocka_unit_test(judge_robust),   cmocka_unit_test(judge_pick),    cmocka_unit_test(json_and_table),
        cmocka_unit_test(gathered_lines), cmocka_unit_test(gathered_ring), cmocka_unit_test(gathered_gpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
