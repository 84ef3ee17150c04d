/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_topo_nccl.c — the NCCL topology XML source (topo_nccl.c) against the
 * four real files of tests/fixtures/realdata/nccl/ (facts from its INDEX.md
 * and the files themselves) and against small texts for what the real files
 * do not show: direct GPU pairs, NVLink to a CPU, sm 8.6 bridges, NICs
 * outside the PCI tree, entities and comments, and refusals.
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

static p3d_node *load_fixture(const char *name)
{
    const char *dir = getenv("P3D_FIXTURES");
    char path[1024], *err = NULL;
    p3d_node *n = NULL;
    snprintf(path, sizeof path, "%s/realdata/nccl/%s", dir && *dir ? dir : "fixtures", name);
    if (p3d_topo_load(path, &n, &err) != 0)
        fail_msg("%s: %s", path, err ? err : "(no message)");
    assert_string_equal(n->source_kind, "nccl-xml");
    return n;
}

static p3d_node *parse(const char *text, char **err)
{
    p3d_node *n = NULL;
    *err = NULL;
    assert_int_equal(p3d_topo_looks_nccl(text, strlen(text)), 1);
    if (p3d_topo_parse_nccl("t.xml", text, strlen(text), 0, &n, err) < 0)
        return NULL;
    return n;
}

static int has_note(const p3d_node *n, const char *s)
{
    return n->notes && strstr(n->notes, s);
}

static void test_azure_ndv4(void **state)
{
    (void)state;
    p3d_node *n = load_fixture("azure-ndv4-topo.xml");
    assert_int_equal(n->ngpus, 8);
    assert_int_equal(n->nnics, 8);
    assert_int_equal(n->nnuma, 4);
    assert_int_equal(n->npus, 96);
    /* PCI bus order: 0001 (NUMA 1) first */
    assert_string_equal(n->gpus[0].pci, "0001:00:00.0");
    assert_int_equal(n->gpus[0].numa, 1);
    assert_string_equal(n->gpus[0].cpus, "24-47");
    assert_string_equal(n->gpus[2].pci, "0003:00:00.0");
    assert_int_equal(n->gpus[2].numa, 0);
    /* two GPUs and two NICs behind each virtual bridge */
    assert_int_equal(n->gg_class[0 * 8 + 1], P3D_LINK_PIX);
    assert_int_equal(n->gg_class[0 * 8 + 2], P3D_LINK_SYS);
    assert_string_equal(n->nics[n->gpus[0].nearest_nic].pci, "0101:00:00.0");
    assert_string_equal(n->nics[0].kind, "ib");
    assert_int_equal(n->gpus[0].nic_same_numa, 1);
    /* no <nvlink>: said, not passed silently as a PCIe machine */
    assert_int_equal(n->ndomains, 8);
    assert_true(has_note(n, "no <nvlink> elements"));
    assert_true(has_note(n, "Azure"));
    p3d_node_free(n);
}

static void test_azure_ndv5(void **state)
{
    (void)state;
    p3d_node *n = load_fixture("azure-ndv5-topo.xml");
    assert_int_equal(n->ngpus, 8);
    assert_int_equal(n->nnics, 8);
    assert_int_equal(n->nnuma, 2);
    for (int i = 0; i < 8; i++) {
        /* one GPU and one NIC per bridge */
        int k = n->gpus[i].nearest_nic;
        assert_int_equal(n->gn_class[(size_t)i * 8 + (size_t)k], P3D_LINK_PIX);
        assert_int_equal(n->gpus[i].numa, i < 4 ? 0 : 1);
    }
    assert_int_equal(n->gg_class[0 * 8 + 1], P3D_LINK_NODE);
    assert_int_equal(n->gg_class[0 * 8 + 4], P3D_LINK_SYS);
    assert_true(has_note(n, "no <nvlink> elements"));
    p3d_node_free(n);
}

static void test_a100_nvswitch_dump(void **state)
{
    (void)state;
    p3d_node *n = load_fixture("simai-topo_8A100_4CX6.xml");
    assert_int_equal(n->ngpus, 8);
    assert_int_equal(n->nnics, 5);
    /* six NVSwitches, two links to each: NV12, one domain */
    assert_int_equal(n->ndomains, 1);
    for (int a = 0; a < 8; a++)
        for (int b = 0; b < 8; b++)
            if (a != b)
                assert_true(n->nvlink[a * 8 + b] == 12 * 25.0);
    /* bonded RoCE NICs, one per GPU pair next to the odd GPU */
    assert_string_equal(n->nics[1].name, "mlx5_bond_1");
    assert_string_equal(n->nics[1].kind, "eth");
    assert_string_equal(n->nics[n->gpus[0].nearest_nic].name, "mlx5_bond_1");
    assert_string_equal(n->nics[n->gpus[7].nearest_nic].name, "mlx5_bond_4");
    assert_int_equal(n->gn_class[1 * 5 + 1], P3D_LINK_PXB);
    assert_int_equal(n->gn_class[0 * 5 + 0], P3D_LINK_NODE);
    assert_int_equal(n->gn_class[0 * 5 + 3], P3D_LINK_SYS);
    assert_string_equal(n->gpus[4].cpus, "32-63,96-127");
    assert_true(has_note(n, "25 GB/s per link per direction (sm 80)"));
    p3d_node_free(n);
}

static void test_rtx3090_dump(void **state)
{
    (void)state;
    p3d_node *n = load_fixture("panlichen-nccl-tests-topo_8xRTX3090_1IB.xml");
    assert_int_equal(n->ngpus, 8); /* class 0x030000 (VGA) with a <gpu> inside */
    assert_int_equal(n->nnics, 1);
    assert_string_equal(n->nics[0].name, "mlx5_0");
    assert_int_equal(n->nics[0].numa, 1);
    assert_int_equal(n->ndomains, 8);
    assert_int_equal(n->gg_class[0 * 8 + 3], P3D_LINK_PIX);
    assert_int_equal(n->gpus[0].nic_same_numa, 0);
    assert_int_equal(n->gn_class[4], P3D_LINK_PIX);
    assert_true(has_note(n, "no <nvlink> elements"));
    p3d_node_free(n);
}

/* Four GPUs in NVLink bridge pairs (sm 8.6), one NVLink to a CPU, a NIC
 * straight under a <cpu>, comments, a prolog and an entity. */
static void test_pairs_and_oddities(void **state)
{
    (void)state;
    static const char text[] =
        "<?xml version=\"1.0\"?>\n<!-- hand-written -->\n"
        "<system version='1'>\n"
        "  <cpu numaid=\"0\" affinity=\"000000ff\">\n"
        "    <pci busid=\"0000:01:00.0\" class=\"0x030000\" vendor=\"0x10de\">\n"
        "      <gpu dev=\"0\" sm=\"86\"><nvlink target=\"0000:02:00.0\" count=\"4\" tclass=\"0x030000\"/>"
        "<nvlink target=\"0000:00:00.0\" count=\"2\" tclass=\"0x060400\"/></gpu>\n"
        "    </pci>\n"
        "    <pci busid=\"0000:02:00.0\" class=\"0x030000\"><gpu dev=\"1\" sm=\"86\"/></pci>\n"
        "    <pci busid=\"0000:03:00.0\" class=\"0x030000\" vendor=\"0x1a03\"/>\n"
        "    <nic><net name=\"eth&amp;0\" speed=\"100000\"/></nic>\n"
        "  </cpu>\n"
        "  <cpu numaid=\"1\" affinity=\"0000ff00\">\n"
        "    <pci busid=\"0000:81:00.0\" class=\"0x030200\"><gpu dev=\"2\" sm=\"86\">"
        "<nvlink target=\"0000:82:00.0\" count=\"4\"/></gpu></pci>\n"
        "    <pci busid=\"0000:82:00.0\" class=\"0x030200\"><gpu dev=\"3\" sm=\"86\"/></pci>\n"
        "    <c2c bw=\"1\"/>\n"
        "  </cpu>\n"
        "</system>\n";
    char *err = NULL;
    p3d_node *n = parse(text, &err);
    if (!n)
        fail_msg("%s", err);
    /* the ASPEED VGA (0x1a03) is no GPU */
    assert_int_equal(n->ngpus, 4);
    assert_int_equal(n->ndomains, 2);
    /* one direction listed is enough; 4 links x 14.0625 GB/s */
    assert_true(n->nvlink[0 * 4 + 1] == 56.25 && n->nvlink[1 * 4 + 0] == 56.25);
    assert_true(n->nvlink[2 * 4 + 3] == 56.25);
    assert_true(n->nvlink[0 * 4 + 2] == 0);
    assert_int_equal(n->gg_class[0 * 4 + 2], P3D_LINK_SYS);
    assert_int_equal(n->gg_class[0 * 4 + 1], P3D_LINK_NVLINK);
    assert_int_equal(n->nnics, 1);
    assert_string_equal(n->nics[0].name, "eth&0");
    assert_string_equal(n->nics[0].pci, "");
    assert_int_equal(n->gn_class[0], P3D_LINK_NODE);
    assert_int_equal(n->gn_class[2], P3D_LINK_SYS);
    assert_true(has_note(n, "14.0625 GB/s per link per direction (sm 86)"));
    p3d_node_free(n);
}

static void expect_err(const char *text, const char *want)
{
    char *err = NULL;
    p3d_node *n = parse(text, &err);
    assert_null(n);
    assert_non_null(err);
    if (!strstr(err, want))
        fail_msg("expected '%s' in: %s", want, err);
    free(err);
}

static void test_refusals(void **state)
{
    (void)state;
    expect_err("<system>\n</system>\n", "t.xml:1: <system> has no version attribute");
    expect_err("<system version=\"x\"></system>", "<system version=\"x\">: expected version=\"1\"");
    expect_err("<system version=\"1\"><cpu numaid=\"0\"></system>",
               "t.xml:1: not well-formed XML: Opening and ending tag mismatch: cpu line 1 and system");
    expect_err("<system version=\"1\"></system>\n<system version=\"1\"/>",
               "t.xml:2: not well-formed XML: Extra content at the end of the document");
    expect_err("<system version=\"1\">hello</system>", "text 'hello' between elements");
    expect_err("<system version=\"1\"><!DOCTYPE x></system>", "t.xml:1: not well-formed XML");
    expect_err("<!DOCTYPE system>\n<system version=\"1\"/>", "t.xml:1: a DTD (<!DOCTYPE ...>): not expected");
    /* entity declarations never reach libxml2: no expansion, however nested */
    expect_err("<?xml version=\"1.0\"?>\n<!DOCTYPE system [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;\">]>\n"
               "<system version=\"1\" x=\"&b;\"/>",
               "t.xml:2: an entity declaration (<!ENTITY): not expected");
    expect_err("<system version=\"1\"><![CDATA[x]]></system>", "text 'x' between elements");
    expect_err("<system version=\"1\" version=\"1\"/>", "Attribute version redefined");
    expect_err("<system version=\"1\"><cpu numaid=\"0\" affinity=\"zz\"/></system>",
               "<cpu affinity=\"zz\">: expected a CPU mask");
    expect_err("<system version=\"1\"><pci busid=\"0000:01:00.0\"/></system>", "<pci> inside <system>: expected it "
                                                                               "inside <cpu pci>");
    expect_err("<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\"/>"
               "<pci busid=\"0000:01:00.0\"/></cpu></system>",
               "<pci busid=\"0000:01:00.0\"> appears twice (first at line 1)");
    expect_err("<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\" class=\"0x0302\">"
               "<gpu sm=\"80\"><nvlink target=\"0000:01:00.0\" count=\"2\"/></gpu></pci></cpu></system>",
               "links the GPU to itself");
    expect_err("<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\"><nic><net name=\"a b\"/>"
               "</nic></pci></cpu></system>",
               "<net name=\"a b\">: expected a device name");
    expect_err("<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\" class=\"0x3020000\"/>"
               "</cpu></system>",
               "expected a 24-bit PCI class");
    expect_err("<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\"><nic><net name=\"a\"/></nic>"
               "</pci><pci busid=\"0000:02:00.0\"><nic><net name=\"a\"/></nic></pci></cpu></system>",
               "NIC 'a' appears twice");
    expect_err("<system version=\"1\" a=\"&foo;\"/>", "Entity 'foo' not defined");
    expect_err("<system version=\"1\" a=\"x", "t.xml:1: not well-formed XML: AttValue: ' expected");
    /* the hwloc reader is not asked: a <topology> is not NCCL's */
    assert_int_equal(p3d_topo_looks_nccl("<topology version=\"2.0\"/>", 25), 0);
    assert_int_equal(p3d_topo_looks_nccl("<?xml version=\"1.0\"?><!-- c --><system version=\"1\"/>", 52), 1);
    assert_int_equal(p3d_topo_looks_nccl("<systemx/>", 10), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_azure_ndv4),         cmocka_unit_test(test_azure_ndv5),
        cmocka_unit_test(test_a100_nvswitch_dump), cmocka_unit_test(test_rtx3090_dump),
        cmocka_unit_test(test_pairs_and_oddities), cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
