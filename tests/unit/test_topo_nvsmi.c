/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_topo_nvsmi.c — the `nvidia-smi topo -m` text parser against every
 * real file in tests/fixtures/realdata/topo/ (facts from its INDEX.md) and
 * against damaged texts, which must fail with one line naming file and line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo_internal.h"

static char *slurp_fixture(const char *name)
{
    const char *dir = getenv("P3D_FIXTURES");
    char path[1024];
    snprintf(path, sizeof path, "%s/realdata/topo/%s", dir && *dir ? dir : "fixtures", name);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)len + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
    buf[len] = 0;
    fclose(f);
    return buf;
}

static p3d_node *load_fixture(const char *name)
{
    char *text = slurp_fixture(name), *err = NULL;
    p3d_node *n = NULL;
    assert_int_equal(p3d_topo_looks_nvsmi(text), 1);
    int rc = p3d_topo_parse_nvsmi(name, text, &n, &err);
    if (rc != 0)
        fail_msg("%s: %s", name, err ? err : "(no message)");
    assert_null(err);
    assert_non_null(n);
    assert_string_equal(n->source_kind, "nvidia-smi");
    free(text);
    return n;
}

static int nic_index(const p3d_node *n, const char *name)
{
    for (int k = 0; k < n->nnics; k++)
        if (!strcmp(n->nics[k].name, name))
            return k;
    fail_msg("no NIC %s", name);
    return -1;
}

static void expect_numa(const p3d_node *n, const int *numa)
{
    for (int g = 0; g < n->ngpus; g++)
        if (n->gpus[g].numa != numa[g])
            fail_msg("GPU%d: NUMA %d, expected %d", g, n->gpus[g].numa, numa[g]);
}

static void expect_nearest(const p3d_node *n, const char *const *names)
{
    for (int g = 0; g < n->ngpus; g++) {
        int k = n->gpus[g].nearest_nic;
        const char *got = k >= 0 ? n->nics[k].name : "(none)";
        if (strcmp(got, names[g]))
            fail_msg("GPU%d: nearest NIC %s, expected %s", g, got, names[g]);
    }
}

/* domains given as "0123|4567" style strings: GPU digits per domain */
static void expect_domains(const p3d_node *n, const char *spec)
{
    int nd = 1;
    for (const char *p = spec; *p; p++)
        nd += *p == '|';
    assert_int_equal(n->ndomains, nd);
    int d = 0;
    for (const char *p = spec; *p; p++) {
        if (*p == '|') {
            d++;
            continue;
        }
        int g = *p - '0';
        if (n->gpus[g].domain != d)
            fail_msg("GPU%d in domain %d, expected %d (%s)", g, n->gpus[g].domain, d, spec);
    }
}

static double bw(const p3d_node *n, int a, int b)
{
    return n->nvlink[a * n->ngpus + b];
}
static int gg(const p3d_node *n, int a, int b)
{
    return n->gg_class[a * n->ngpus + b];
}
static int gn(const p3d_node *n, int g, const char *nic)
{
    return n->gn_class[g * n->nnics + nic_index(n, nic)];
}

static void test_dgx_a100(void **state)
{
    (void)state;
    p3d_node *n = load_fixture("dgx-a100_12nic.txt");
    assert_int_equal(n->ngpus, 8);
    assert_int_equal(n->nnics, 12);
    static const char *const names[12] = {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4",  "mlx5_5",
                                          "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9", "mlx5_10", "mlx5_11"};
    for (int k = 0; k < 12; k++) {
        assert_string_equal(n->nics[k].name, names[k]);
        assert_string_equal(n->nics[k].kind, "ib");
    }
    static const int numa[8] = {3, 3, 1, 1, 7, 7, 5, 5};
    expect_numa(n, numa);
    expect_domains(n, "01234567");
    assert_int_equal(n->nvlink_connected_not_clique, 0);
    for (int a = 0; a < 8; a++)
        for (int b = 0; b < 8; b++)
            assert_true(bw(n, a, b) == (a == b ? 0.0 : 300.0)); /* NV12 x 25 */
    assert_int_equal(gg(n, 0, 7), P3D_LINK_NVLINK);
    assert_int_equal(gn(n, 0, "mlx5_0"), P3D_LINK_PXB);
    assert_int_equal(gn(n, 0, "mlx5_4"), P3D_LINK_SYS);
    /* GPU pairs share two NICs: the pair takes one each */
    static const char *const near[8] = {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"};
    expect_nearest(n, near);
    for (int g = 0; g < 8; g++)
        assert_int_equal(n->gpus[g].nic_same_numa, 1);
    /* NIC NUMA from the GPUs behind the same switches; SYS-only NICs unknown */
    assert_int_equal(n->nics[nic_index(n, "mlx5_0")].numa, 3);
    assert_int_equal(n->nics[nic_index(n, "mlx5_9")].numa, 5);
    assert_int_equal(n->nics[nic_index(n, "mlx5_4")].numa, -1);
    assert_int_equal(n->nics[nic_index(n, "mlx5_11")].numa, -1);
    assert_string_equal(n->gpus[0].cpus, "48-63,176-191");
    assert_string_equal(n->gpus[4].cpus, "112-127,240-255");
    assert_string_equal(n->gpus[0].pci, "");
    p3d_node_free(n);
}

static void test_dgx1_v100(void **state)
{
    (void)state;
    p3d_node *n = load_fixture("dgx1-v100_4nic.txt");
    assert_int_equal(n->ngpus, 8);
    assert_int_equal(n->nnics, 4);
    /* columns are mlx5_0, mlx5_2, mlx5_1, mlx5_3; the record is in name order */
    assert_string_equal(n->nics[1].name, "mlx5_1");
    assert_string_equal(n->nics[2].name, "mlx5_2");
    static const int numa[8] = {-1, -1, -1, -1, -1, -1, -1, -1}; /* no column */
    expect_numa(n, numa);
    expect_domains(n, "0123|4567");
    assert_int_equal(n->nvlink_connected_not_clique, 1);
    assert_true(bw(n, 0, 1) == 25.0);
    assert_true(bw(n, 0, 3) == 50.0);
    assert_true(bw(n, 0, 4) == 50.0);
    assert_true(bw(n, 1, 5) == 50.0);
    assert_true(bw(n, 2, 6) == 25.0);
    assert_true(bw(n, 3, 7) == 25.0);
    assert_true(bw(n, 0, 5) == 0.0);
    assert_int_equal(gg(n, 0, 5), P3D_LINK_SYS);
    /* header order honoured: GPU2 is PIX to mlx5_1 (third column) */
    assert_int_equal(gn(n, 2, "mlx5_1"), P3D_LINK_PIX);
    assert_int_equal(gn(n, 2, "mlx5_2"), P3D_LINK_SYS);
    assert_int_equal(gn(n, 0, "mlx5_1"), P3D_LINK_PHB);
    static const char *const near[8] = {"mlx5_0", "mlx5_0", "mlx5_1", "mlx5_1", "mlx5_2", "mlx5_2", "mlx5_3", "mlx5_3"};
    expect_nearest(n, near);
    assert_string_equal(n->gpus[5].cpus, "20-39,60-79");
    assert_non_null(strstr(n->notes, "no NUMA Affinity column"));
    p3d_node_free(n);
}

static void test_dgx1_topo_mp(void **state)
{
    (void)state;
    p3d_node *n = load_fixture("dgx1_topo-mp_pcie-only.txt");
    assert_int_equal(n->ngpus, 8);
    assert_int_equal(n->nnics, 4);
    static const int numa[8] = {0, 0, 0, 0, 1, 1, 1, 1};
    expect_numa(n, numa);
    expect_domains(n, "0|1|2|3|4|5|6|7"); /* no NVLink invented */
    for (int a = 0; a < 8; a++)
        for (int b = 0; b < 8; b++)
            assert_true(bw(n, a, b) == 0.0);
    assert_int_equal(gg(n, 0, 1), P3D_LINK_PIX);
    assert_int_equal(gg(n, 0, 2), P3D_LINK_PHB);
    assert_int_equal(gg(n, 3, 4), P3D_LINK_SYS);
    static const char *const near[8] = {"mlx5_0", "mlx5_0", "mlx5_1", "mlx5_1", "mlx5_2", "mlx5_2", "mlx5_3", "mlx5_3"};
    expect_nearest(n, near);
    assert_int_equal(n->nics[3].numa, 1);
    assert_non_null(strstr(n->notes, "no NV# cells"));
    p3d_node_free(n);
}

static void test_a6000_pairs(void **state)
{
    (void)state;
    p3d_node *n = load_fixture("a6000x8_nvlink-bridge-pairs_pytorch79299.txt");
    assert_int_equal(n->ngpus, 8);
    assert_int_equal(n->nnics, 0);
    static const int numa[8] = {0, 0, 0, 0, 1, 1, 1, 1};
    expect_numa(n, numa);
    expect_domains(n, "01|23|45|67");
    assert_true(bw(n, 0, 1) == 100.0); /* NV4 */
    assert_true(bw(n, 1, 2) == 0.0);
    assert_int_equal(gg(n, 1, 2), P3D_LINK_NODE);
    assert_int_equal(gg(n, 3, 4), P3D_LINK_SYS);
    static const char *const near[8] = {"(none)", "(none)", "(none)", "(none)", "(none)", "(none)", "(none)", "(none)"};
    expect_nearest(n, near);
    assert_string_equal(n->gpus[7].cpus, "64-127,192-254");
    p3d_node_free(n);
}

static void test_rtx4090(void **state)
{
    (void)state;
    p3d_node *n = load_fixture("rtx4090x8_pcie-only_2nic_go-gpuallocator17.txt");
    assert_int_equal(n->ngpus, 8);
    assert_int_equal(n->nnics, 2);
    assert_string_equal(n->nics[0].name, "NIC0"); /* no NIC Legend in the file */
    static const int numa[8] = {0, 0, 0, 0, 1, 1, 1, 1};
    expect_numa(n, numa);
    expect_domains(n, "0|1|2|3|4|5|6|7");
    for (int a = 0; a < 8; a++)
        for (int b = 0; b < 8; b++)
            if (a != b)
                assert_int_equal(gg(n, a, b), P3D_LINK_SYS);
    for (int g = 0; g < 8; g++)
        assert_int_equal(gn(n, g, "NIC0"), g == 6 ? P3D_LINK_PHB : P3D_LINK_SYS);
    /* NIC NUMA derived from GPU6 (PHB), the only GPU not SYS to them */
    assert_int_equal(n->nics[0].numa, 1);
    assert_int_equal(n->nics[1].numa, 1);
    /* every GPU has the same candidates; node.c spreads them in turn */
    static const char *const near[8] = {"NIC0", "NIC1", "NIC0", "NIC1", "NIC0", "NIC1", "NIC0", "NIC1"};
    expect_nearest(n, near);
    assert_int_equal(n->gpus[6].nic_same_numa, 1);
    assert_int_equal(n->gpus[0].nic_same_numa, 0);
    p3d_node_free(n);
}

/* Spaces instead of tabs, CRLF line ends, a NIC Legend (driver >= 535):
 * the legend renames NIC0/NIC1. */
static void test_nic_legend_crlf(void **state)
{
    (void)state;
    const char *t = "        GPU0    GPU1    NIC0    NIC1    CPU Affinity    NUMA Affinity    GPU NUMA ID\r\n"
                    "GPU0     X      NV18    PIX     SYS     0-55,112-167    0               N/A\r\n"
                    "GPU1    NV18     X      SYS     PIX     56-111,168-223  1               N/A\r\n"
                    "NIC0    PIX     SYS      X      SYS\r\n"
                    "NIC1    SYS     PIX     SYS      X\r\n"
                    "\r\n"
                    "Legend:\r\n"
                    "\r\n"
                    "  X    = Self\r\n"
                    "  NV#  = Connection traversing a bonded set of # NVLinks\r\n"
                    "\r\n"
                    "NIC Legend:\r\n"
                    "\r\n"
                    "  NIC0: mlx5_3\r\n"
                    "  NIC1: mlx5_10\r\n";
    p3d_node *n = NULL;
    char *err = NULL;
    assert_int_equal(p3d_topo_looks_nvsmi(t), 1);
    if (p3d_topo_parse_nvsmi("h100.txt", t, &n, &err) != 0)
        fail_msg("%s", err);
    assert_int_equal(n->ngpus, 2);
    assert_int_equal(n->nnics, 2);
    assert_string_equal(n->nics[0].name, "mlx5_3");
    assert_string_equal(n->nics[1].name, "mlx5_10");
    assert_true(bw(n, 0, 1) == 450.0);
    expect_domains(n, "01");
    static const char *const near[2] = {"mlx5_3", "mlx5_10"};
    expect_nearest(n, near);
    assert_int_equal(n->gpus[1].numa, 1);
    p3d_node_free(n);
}

/* A damaged text must fail with one line that names file and line. */
static void expect_fail(const char *text, const char *where, const char *what)
{
    p3d_node *n = NULL;
    char *err = NULL;
    assert_int_equal(p3d_topo_parse_nvsmi("bad.txt", text, &n, &err), -1);
    assert_null(n);
    assert_non_null(err);
    assert_null(strchr(err, '\n'));
    if (strncmp(err, where, strlen(where)) || !strstr(err, what))
        fail_msg("message '%s': expected to start with '%s' and mention '%s'", err, where, what);
    free(err);
}

#define HDR "\tGPU0\tGPU1\tGPU2\tmlx5_0\tCPU Affinity\tNUMA Affinity\n"
#define R0 "GPU0\t X \tNV2\tSYS\tPIX\t0-7\t0\n"
#define R1 "GPU1\tNV2\t X \tSYS\tPIX\t0-7\t0\n"
#define R2 "GPU2\tSYS\tSYS\t X \tSYS\t8-15\t1\n"
#define RN "mlx5_0\tPIX\tPIX\tSYS\t X \n"

static void test_good_synthetic(void **state)
{
    (void)state;
    p3d_node *n = NULL;
    char *err = NULL;
    if (p3d_topo_parse_nvsmi("ok.txt", "# nvidia-smi topo -m\n" HDR R0 R1 R2 RN, &n, &err))
        fail_msg("%s", err);
    expect_domains(n, "01|2");
    assert_int_equal(n->nics[0].numa, 0);
    assert_int_equal(n->gpus[2].nearest_nic, 0);
    assert_int_equal(n->gpus[2].nic_same_numa, 0);
    p3d_node_free(n);
}

static void test_bad_inputs(void **state)
{
    (void)state;
    /* header wrapped by a terminal mid-word */
    expect_fail("# title\n\tGPU0\tGPU1\tGPU2\tmlx5_0\tCPU Affi\nnity\n" R0 R1 R2 RN, "bad.txt:2:", "mangled header");
    /* header lost its first column name: the line above the rows is named */
    expect_fail("\tPU0\tGPU1\tGPU2\tmlx5_0\tCPU Affinity\tNUMA Affinity\n" R0 R1 R2 RN, "bad.txt:1:", "mangled header");
    /* GPU columns out of order */
    expect_fail("\tGPU0\tGPU2\tGPU1\tmlx5_0\tCPU Affinity\tNUMA Affinity\n" R0, "bad.txt:1:", "GPU1");
    /* rows without any header */
    expect_fail(R0 R1 R2, "bad.txt:1:", "before any header");
    /* wrong column count */
    expect_fail(HDR R0 "GPU1\tNV2\t X \tSYS\t0-7\t0\n" R2 RN, "bad.txt:3:", "has 5 fields, expected 6");
    expect_fail(HDR R0 R1 R2 "mlx5_0\tPIX\tPIX\tSYS\n", "bad.txt:5:", "fields");
    /* unknown cell */
    expect_fail(HDR R0 "GPU1\tNV2\t X \tPCI\tPIX\t0-7\t0\n" R2 RN, "bad.txt:3:", "unknown cell 'PCI'");
    expect_fail(HDR R0 "GPU1\tNV2\t X \tRACK\tPIX\t0-7\t0\n" R2 RN, "bad.txt:3:", "unknown cell 'RACK'");
    /* X off the diagonal, NV to a NIC, NV without a count */
    expect_fail(HDR R0 "GPU1\tX\t X \tSYS\tPIX\t0-7\t0\n" R2 RN, "bad.txt:3:", "diagonal");
    expect_fail(HDR R0 R1 "GPU2\tSYS\tSYS\t X \tNV1\t8-15\t1\n" RN, "bad.txt:4:", "NV#");
    expect_fail(HDR R0 R1 "GPU2\tNV\tSYS\t X \tSYS\t8-15\t1\n" RN, "bad.txt:4:", "NV#");
    /* asymmetric NV cells, asymmetric classes, GPU<->NIC disagreement */
    expect_fail(HDR R0 "GPU1\tNV1\t X \tSYS\tPIX\t0-7\t0\n" R2 RN, "bad.txt:3:", "asymmetric");
    expect_fail(HDR R0 R1 "GPU2\tSYS\tPHB\t X \tSYS\t8-15\t1\n" RN, "bad.txt:4:", "asymmetric");
    expect_fail(HDR R0 R1 R2 "mlx5_0\tPIX\tPXB\tSYS\t X \n", "bad.txt:5:", "asymmetric");
    /* a GPU row missing, a duplicated row, an unknown row label */
    expect_fail(HDR R0 R2 RN, "bad.txt:", "no row for GPU1");
    expect_fail(HDR R0 R1 R1 R2 RN, "bad.txt:4:", "second row");
    expect_fail(HDR R0 R1 R2 "mlx5_9\tPIX\tPIX\tSYS\t X \n", "bad.txt:5:", "mlx5_9");
    /* bad affinity values */
    expect_fail(HDR R0 R1 "GPU2\tSYS\tSYS\t X \tSYS\tcpus\t1\n" RN, "bad.txt:4:", "CPU Affinity");
    expect_fail(HDR R0 R1 "GPU2\tSYS\tSYS\t X \tSYS\t8-15\tone\n" RN, "bad.txt:4:", "NUMA Affinity");
    /* empty or text-free files */
    expect_fail("", "bad.txt:", "empty");
    expect_fail("\n \n\t\n", "bad.txt:", "empty");
    expect_fail("# SOURCE: nothing\nhello\n", "bad.txt:", "no header");
}

static void test_looks(void **state)
{
    (void)state;
    assert_int_equal(p3d_topo_looks_nvsmi(""), 0);
    assert_int_equal(p3d_topo_looks_nvsmi(NULL), 0);
    assert_int_equal(p3d_topo_looks_nvsmi("<?xml version=\"1.0\"?>\n<topology "
                                          "version=\"2.0\">\n</topology>\n"),
                     0);
    assert_int_equal(p3d_topo_looks_nvsmi("GPU0 GPU1\n"), 0);
    /* a mangled header still counts, so the parser can name the line */
    assert_int_equal(p3d_topo_looks_nvsmi("\tPU0\tGPU1\n" R0 R1), 1);
    assert_int_equal(p3d_topo_looks_nvsmi("    GPU0     X      NV4\n"), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dgx_a100),       cmocka_unit_test(test_dgx1_v100),
        cmocka_unit_test(test_dgx1_topo_mp),   cmocka_unit_test(test_a6000_pairs),
        cmocka_unit_test(test_rtx4090),        cmocka_unit_test(test_nic_legend_crlf),
        cmocka_unit_test(test_good_synthetic), cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_looks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
