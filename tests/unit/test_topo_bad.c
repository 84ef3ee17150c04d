/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_topo_bad.c — bad topology inputs give one line naming the file and
 * the problem, never a crash: missing/unreadable/empty/binary files, a
 * directory, malformed or truncated XML, an XML that makes hwloc 2.9
 * segfault (missing complete_* sets; also caught by the child-process
 * probe on its own), a 1.x XML, a damaged NCCL topology XML (a good one is
 * read, not refused), an asymmetric NVLinkBandwidth matrix.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "topo_internal.h"

static char tmpdir[] = "/tmp/p3d_topo_bad.XXXXXX";

static char *fixture_text(const char *name, size_t *len)
{
    const char *dir = getenv("P3D_FIXTURES");
    char path[1024];
    snprintf(path, sizeof path, "%s/realdata/%s", dir && *dir ? dir : "fixtures", name);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long l = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)l + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)l, f), (size_t)l);
    buf[l] = 0;
    fclose(f);
    *len = (size_t)l;
    return buf;
}

static char *write_tmp(const char *name, const char *text, size_t len)
{
    char *path = NULL;
    assert_true(asprintf(&path, "%s/%s", tmpdir, name) > 0);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    fclose(f);
    return path;
}

/* Loads path, expects failure with a one-line message containing both the
 * file name and want. */
static void expect_fail(const char *path, const char *want)
{
    p3d_node *n = NULL;
    char *err = NULL;
    int rc = p3d_topo_load(path, &n, &err);
    if (rc == 0)
        fail_msg("%s: loaded, expected an error with '%s'", path, want);
    assert_null(n);
    assert_non_null(err);
    if (!strstr(err, path) || !strstr(err, want))
        fail_msg("%s: message '%s' lacks the path or '%s'", path, err, want);
    assert_null(strchr(err, '\n'));
    free(err);
}

/* Replaces every occurrence of attribute name="..." in text (in place). */
static void drop_attr(char *text, const char *name)
{
    char pat[64];
    snprintf(pat, sizeof pat, " %s=\"", name);
    char *p;
    while ((p = strstr(text, pat))) {
        char *q = strchr(p + strlen(pat), '"');
        memmove(p, q + 1, strlen(q + 1) + 1);
    }
}

static void test_files(void **s)
{
    (void)s;
    char *path = NULL;
    expect_fail("/nonexistent/dir/topo.xml", "no such file");
    expect_fail(tmpdir, "is a directory");
    path = write_tmp("empty.xml", "", 0);
    expect_fail(path, "empty file");
    free(path);
    path = write_tmp("bin.dat", "\x01\x02\0\x03GPU0", 8);
    expect_fail(path, "binary");
    free(path);
    path = write_tmp("notes.txt", "hello world\n", 12);
    expect_fail(path, "neither an hwloc XML");
    free(path);
    /* a path through a regular file: ENOTDIR, as root too */
    path = write_tmp("plain", "x", 1);
    char *sub = NULL;
    assert_true(asprintf(&sub, "%s/topo.xml", path) > 0);
    expect_fail(sub, "Not a directory");
    free(sub);
    if (geteuid() != 0) { /* root reads mode-000 files anyway */
        chmod(path, 0);
        expect_fail(path, "cannot open");
    }
    free(path);
}

static void test_malformed_xml(void **s)
{
    (void)s;
    size_t len;
    char *good = fixture_text("hwloc/hwloc-tests-power8gpudistances.xml", &len);
    char *path;
    /* truncated in the middle of a tag */
    path = write_tmp("trunc.xml", good, len / 3);
    expect_fail(path, "not well-formed XML: ");
    expect_fail(path, "(truncated file?)");
    free(path);
    path = write_tmp("html.xml", "<html><body/></html>", 20);
    expect_fail(path, "expected <topology>");
    free(path);
    /* NCCL's format is read by its own reader (topo_nccl.c), never by
     * hwloc: a good one loads, a damaged one gets that reader's message */
    const char *nccl = "<system version=\"1\"><cpu numaid=\"0\"/></system>";
    path = write_tmp("nccl.xml", nccl, strlen(nccl));
    p3d_node *nd = NULL;
    char *nerr = NULL;
    assert_int_equal(p3d_topo_load(path, &nd, &nerr), 0);
    assert_string_equal(nd->source_kind, "nccl-xml");
    p3d_node_free(nd);
    free(path);
    const char *nccl_bad = "<system version=\"1\"><cpu/></system>";
    path = write_tmp("nccl-bad.xml", nccl_bad, strlen(nccl_bad));
    expect_fail(path, "<cpu> has no numaid attribute");
    free(path);
    const char *badq = "<topology version=\"2.0><object/></topology>";
    path = write_tmp("quote.xml", badq, strlen(badq));
    expect_fail(path, "quote.xml:1: not well-formed XML: Unescaped '<' not allowed in attributes values");
    free(path);
    const char *mism = "<topology version=\"2.0\">\n<a>\n</b>\n</topology>";
    path = write_tmp("mism.xml", mism, strlen(mism));
    expect_fail(path, "mism.xml:3: not well-formed XML: Opening and ending tag mismatch: a line 2 and b");
    free(path);
    char *v1 = strdup(good);
    char *ver = strstr(v1, "version=\"2.0\"");
    assert_non_null(ver);
    ver[9] = '1';
    path = write_tmp("v1.xml", v1, len);
    expect_fail(path, "expected version=\"2.0\"");
    free(path);
    free(v1);
    free(good);
}

/* The crash hwloc 2.9 has on exports without complete_* sets. */
static void test_missing_complete_sets(void **s)
{
    (void)s;
    size_t len;
    static const char *const attrs[] = {"complete_cpuset", "complete_nodeset", "nodeset", "cpuset"};
    for (size_t a = 0; a < 4; a++) {
        char *t = fixture_text("hwloc/psmgmt-topo.jwb0004.xml", &len);
        drop_attr(t, attrs[a]);
        char name[64];
        snprintf(name, sizeof name, "no_%s.xml", attrs[a]);
        char *path = write_tmp(name, t, strlen(t));
        char want[64];
        snprintf(want, sizeof want, "has no %s attribute", attrs[a]);
        expect_fail(path, want);
        free(path);
        free(t);
    }
}

/* The child-process probe alone (scan skipped) turns the same segfault into
 * an error message: the safety net for crashes the scan does not know. */
static void test_probe_catches_crash(void **s)
{
    (void)s;
    size_t len;
    char *t = fixture_text("hwloc/hwloc-tests-power8gpudistances.xml", &len);
    char *err = NULL;
    assert_int_equal(p3d_topo_xml_probe("p8.xml", t, len, &err), 0);
    drop_attr(t, "complete_cpuset");
    assert_int_equal(p3d_topo_xml_probe("p8.xml", t, strlen(t), &err), -1);
    assert_non_null(strstr(err, "p8.xml: hwloc crashed reading this XML"));
    free(err);
    free(t);
}

/* An NVLinkBandwidth matrix whose two directions disagree. */
static void test_asymmetric_nvlink(void **s)
{
    (void)s;
    size_t len;
    char *t = fixture_text("hwloc/hwloc-tests-power8gpudistances.xml", &len);
    /* first row: "1000000 40000 0 0 40000 0" -> GPU0->GPU1 = 30000; the
     * length attribute stays exact because the digit count is unchanged */
    char *row = strstr(t, "<u64values length=\"44\">1000000 40000");
    assert_non_null(row);
    row[strlen("<u64values length=\"44\">1000000 ")] = '3';
    char *path = write_tmp("asym.xml", t, len);
    expect_fail(path, "not symmetric");
    free(path);
    free(t);
}

/* No GPUs is not an error: the CPU facts are still worth showing. */
static void test_no_gpus(void **s)
{
    (void)s;
    const char *dir = getenv("P3D_FIXTURES");
    char path[1024], *err = NULL;
    p3d_node *n = NULL;
    snprintf(path, sizeof path, "%s/realdata/hwloc/mpibind-eas-tioga.xml", dir && *dir ? dir : "fixtures");
    assert_int_equal(p3d_topo_load(path, &n, &err), 0);
    assert_int_equal(n->ngpus, 0);
    char *t = p3d_topo_text(n, 0);
    assert_non_null(strstr(t, "128 PUs"));
    assert_non_null(strstr(t, "no NVIDIA GPU found"));
    free(t);
    p3d_node_free(n);
}

static int setup(void **s)
{
    (void)s;
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **s)
{
    (void)s;
    char *cmd = NULL;
    if (asprintf(&cmd, "chmod -R u+rw '%s' && rm -rf '%s'", tmpdir, tmpdir) > 0)
        (void)!system(cmd);
    free(cmd);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_files),
        cmocka_unit_test(test_malformed_xml),
        cmocka_unit_test(test_missing_complete_sets),
        cmocka_unit_test(test_probe_catches_crash),
        cmocka_unit_test(test_asymmetric_nvlink),
        cmocka_unit_test(test_no_gpus),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
