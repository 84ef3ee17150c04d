/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cluster.c — cluster description files: loading, topology resolution,
 * link classes, restriction to a node list, bad input, scale.
 *
 * Cluster files are written into a fresh temp dir; node topologies are the
 * real `nvidia-smi topo -m` fixtures (DGX A100: one 8-GPU NVLink domain;
 * 8x A6000: NVLink pairs), so no bundled topology is needed except in the
 * last case, which skips when helper-made topologies are not there yet. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "p3d/p3d.h"

static char tmpdir[256];
static char a100[512], pairs[512];

static void write_file(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void write_file(const char *name, const char *fmt, ...)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fclose(f);
}

static char *tpath(const char *name)
{
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static void copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    assert_non_null(a);
    assert_non_null(b);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, a)) > 0)
        fwrite(buf, 1, n, b);
    fclose(a);
    fclose(b);
}

static int setup(void **state)
{
    (void)state;
    const char *fx = getenv("P3D_FIXTURES");
    if (!fx)
        fx = "fixtures";
    snprintf(tmpdir, sizeof tmpdir, "/tmp/p3d-test-cluster-XXXXXX");
    if (!mkdtemp(tmpdir))
        return -1;
    snprintf(a100, sizeof a100, "%s/realdata/topo/dgx-a100_12nic.txt", fx);
    snprintf(pairs, sizeof pairs, "%s/realdata/topo/a6000x8_nvlink-bridge-pairs_pytorch79299.txt", fx);
    copy_file(a100, tpath("a100.txt"));
    copy_file(pairs, tpath("pairs.txt"));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Loads name from tmpdir and expects failure with every fragment. */
static void load_fails(const char *name, const char *f1, const char *f2)
{
    p3d_cluster *c = NULL;
    char *err = NULL;
    if (p3d_cluster_load(tpath(name), &c, &err) == 0)
        fail_msg("%s should not load", name);
    assert_null(c);
    assert_non_null(err);
    if (f1 && !strstr(err, f1))
        fail_msg("%s: message '%s' lacks '%s'", name, err, f1);
    if (f2 && !strstr(err, f2))
        fail_msg("%s: message '%s' lacks '%s'", name, err, f2);
    free(err);
}

static p3d_cluster *load_ok(const char *path)
{
    p3d_cluster *c = NULL;
    char *err = NULL;
    if (p3d_cluster_load(path, &c, &err) != 0)
        fail_msg("%s: %s", path, err);
    assert_non_null(c);
    return c;
}

static int has_warning(const p3d_cluster *c, const char *f1, const char *f2)
{
    for (size_t i = 0; i < c->nwarnings; i++)
        if (strstr(c->warnings[i], f1) && (!f2 || strstr(c->warnings[i], f2)))
            return 1;
    return 0;
}

static void test_basic(void **state)
{
    (void)state;
    write_file("basic.json",
               "{\n"
               "  \"description\": \"two racks\",\n"
               "  \"nodes\": [\n"
               "    {\"name\": \"n[01-04]\", \"topology\": \"a100.txt\", \"rack\": \"r1\"},\n"
               "    {\"name\": \"n[05-07],n08\", \"topology\": \"./a100.txt\", \"rack\": \"r2\"},\n"
               "    {\"name\": \"p1\", \"topology\": \"%s\", \"rack\": \"r1\"}\n"
               "  ]\n}\n",
               pairs);
    p3d_cluster *c = load_ok(tpath("basic.json"));
    assert_int_equal(c->nnodes, 9);
    assert_string_equal(c->nodes[0].name, "n01");
    assert_string_equal(c->nodes[7].name, "n08");
    assert_string_equal(c->nodes[8].name, "p1");
    /* "a100.txt" and "./a100.txt" are one file: loaded once, shared */
    assert_int_equal(c->ntopos, 2);
    assert_ptr_equal(c->nodes[0].topo, c->nodes[7].topo);
    assert_int_equal(c->nracks, 2);
    assert_string_equal(c->racks[c->nodes[0].rack], "r1");
    assert_string_equal(c->racks[c->nodes[4].rack], "r2");
    assert_int_equal(c->nodes[8].rack, c->nodes[0].rack);
    assert_int_equal(c->nnvl_domains, 0);
    assert_int_equal(c->nodes[0].nvl_domain, -1);
    assert_int_equal(p3d_cluster_gpus(c), 72);
    assert_string_equal(c->source, tpath("basic.json"));
    assert_int_equal(c->nwarnings, 0);
    /* link classes */
    assert_int_equal(p3d_cluster_link(c, 0, 3, 0, 3), P3D_LINK_SELF);
    assert_int_equal(p3d_cluster_link(c, 0, 0, 0, 7), P3D_LINK_NVLINK);
    assert_int_equal(p3d_cluster_link(c, 8, 0, 8, 1), P3D_LINK_NVLINK);
    assert_true(p3d_cluster_link(c, 8, 0, 8, 2) > P3D_LINK_MNNVL);
    assert_true(p3d_cluster_link(c, 8, 0, 8, 2) < P3D_LINK_RACK);
    assert_int_equal(p3d_cluster_link(c, 0, 0, 1, 0), P3D_LINK_RACK);
    assert_int_equal(p3d_cluster_link(c, 0, 0, 8, 0), P3D_LINK_RACK);
    assert_int_equal(p3d_cluster_link(c, 0, 0, 4, 0), P3D_LINK_XRACK);
    /* bad indices answer the worst class */
    assert_int_equal(p3d_cluster_link(c, 0, 0, 99, 0), P3D_LINK_XRACK);
    assert_int_equal(p3d_cluster_link(c, 0, 0, 0, 8), P3D_LINK_XRACK);
    /* defaults from DOMAIN.md */
    assert_true(c->link_gbps[P3D_LINK_NVLINK] == 450);
    assert_true(c->link_gbps[P3D_LINK_RACK] == 50);
    p3d_cluster_free(c);
}

static void test_domains_and_gbps(void **state)
{
    (void)state;
    write_file("nvl.json", "{\"link_gbps\": {\"RACK\": 40, \"xrack\": 12.5, \"MNNVL\": 800},\n"
                           " \"nodes\": [\n"
                           "  {\"name\": \"t[01-02]\", \"topology\": \"a100.txt\", \"nvlink_domain\": \"nvl0\"},\n"
                           "  {\"name\": \"t[03-04]\", \"topology\": \"a100.txt\", \"nvlink_domain\": \"nvl1\"},\n"
                           "  {\"name\": \"t05\", \"topology\": \"a100.txt\"}\n"
                           "]}\n");
    p3d_cluster *c = load_ok(tpath("nvl.json"));
    assert_int_equal(c->nracks, 1);
    assert_string_equal(c->racks[0], "default");
    assert_int_equal(c->nnvl_domains, 2);
    assert_int_equal(p3d_cluster_link(c, 0, 1, 1, 2), P3D_LINK_MNNVL);
    assert_int_equal(p3d_cluster_link(c, 1, 1, 2, 2), P3D_LINK_RACK);
    assert_int_equal(p3d_cluster_link(c, 3, 1, 4, 2), P3D_LINK_RACK);
    assert_true(c->link_gbps[P3D_LINK_RACK] == 40);
    assert_true(c->link_gbps[P3D_LINK_XRACK] == 12.5);
    assert_true(c->link_gbps[P3D_LINK_MNNVL] == 800);
    assert_true(c->link_gbps[P3D_LINK_NVLINK] == 450);
    p3d_cluster_free(c);

    write_file("gbps1.json", "{\"link_gbps\": {\"FAST\": 1}, \"nodes\": "
                             "[{\"name\": \"a\", \"topology\": \"a100.txt\"}]}");
    load_fails("gbps1.json", "unknown link class 'FAST'", "XRACK");
    write_file("gbps2.json", "{\"link_gbps\": {\"RACK\": -5}, \"nodes\": "
                             "[{\"name\": \"a\", \"topology\": \"a100.txt\"}]}");
    load_fails("gbps2.json", "link_gbps.RACK", "positive");
    write_file("gbps3.json", "{\"link_gbps\": [50], \"nodes\": "
                             "[{\"name\": \"a\", \"topology\": \"a100.txt\"}]}");
    load_fails("gbps3.json", "link_gbps", "found an array");
}

static void test_warnings(void **state)
{
    (void)state;
    write_file("warn.json", "{\"nodes\": [\n"
                            "  {\"name\": \"w1\", \"topology\": \"a100.txt\", \"rack\": \"r1\", \"gpus\": 8},\n"
                            "  {\"name\": \"w2\", \"topology\": \"a100.txt\"}\n"
                            "], \"version\": 2}\n");
    p3d_cluster *c = load_ok(tpath("warn.json"));
    assert_true(has_warning(c, "warn.json:2: nodes[0]", "unknown key 'gpus'"));
    assert_true(has_warning(c, "unknown key 'version'", NULL));
    assert_true(has_warning(c, "no \"rack\"", "'default'"));
    assert_int_equal(c->nracks, 2);
    p3d_cluster_free(c);
}

static void test_errors(void **state)
{
    (void)state;
    write_file("missing.json", "{\"nodes\": [\n"
                               "  {\"name\": \"a1\", \"topology\": \"a100.txt\"},\n"
                               "  {\"name\": \"a2\",\n"
                               "   \"topology\": \"dgx-h200.xml\"}\n"
                               "]}\n");
    load_fails("missing.json",
               "missing.json:4: nodes[1].topology: no such "
               "file 'dgx-h200.xml'",
               "bundled:");
    write_file("dup.json", "{\"nodes\": [\n"
                           "  {\"name\": \"d[1-4]\", \"topology\": \"a100.txt\"},\n"
                           "  {\"name\": \"d[4-5]\", \"topology\": \"a100.txt\"}\n"
                           "]}\n");
    load_fails("dup.json",
               "dup.json:3: nodes[1].name: node 'd4' is already "
               "listed in nodes[0]",
               NULL);
    write_file("dup2.json", "{\"nodes\": [{\"name\": \"x[1,1]\", "
                            "\"topology\": \"a100.txt\"}]}");
    load_fails("dup2.json", "node 'x1' is already listed in nodes[0]", NULL);
    write_file("empty.json", "{\"nodes\": []}");
    load_fails("empty.json", "nodes: empty", NULL);
    write_file("nonodes.json", "{\"racks\": []}");
    load_fails("nonodes.json", "missing \"nodes\"", NULL);
    write_file("blank.json", "  \n");
    load_fails("blank.json", "empty file", NULL);
    write_file("arr.json", "[1, 2]");
    load_fails("arr.json", "expected a JSON object", "found an array");
    write_file("nodesobj.json", "{\"nodes\": {\"name\": \"a\"}}");
    load_fails("nodesobj.json", "nodes: expected an array", "found an object");
    write_file("type.json", "{\"nodes\": [\n {\"name\": 7, \"topology\": \"a100.txt\"}]}");
    load_fails("type.json", "type.json:2: nodes[0].name: expected a string", "found a number");
    write_file("type2.json", "{\"nodes\": [{\"name\": \"a\", \"topology\": "
                             "\"a100.txt\", \"rack\": 3}]}");
    load_fails("type2.json", "nodes[0].rack: expected a string", NULL);
    write_file("entry.json", "{\"nodes\": [\"node1\"]}");
    load_fails("entry.json", "nodes[0]: expected an object", "found a string");
    write_file("notopo.json", "{\"nodes\": [{\"name\": \"a\"}]}");
    load_fails("notopo.json", "nodes[0]: missing \"topology\"", NULL);
    write_file("twice.json", "{\"nodes\": [{\"name\": \"a\", \"name\": \"b\", "
                             "\"topology\": \"a100.txt\"}]}");
    load_fails("twice.json", "nodes[0].name: key given twice", NULL);
    write_file("hl.json", "{\"nodes\": [\n\n {\"name\": \"n[1-\", "
                          "\"topology\": \"a100.txt\"}]}");
    load_fails("hl.json", "hl.json:3: nodes[0].name: hostlist 'n[1-'", "column 2: '[' at column 2 is never closed");
    write_file("huge.json", "{\"nodes\": [{\"name\": \"n[0-9999999999]\", "
                            "\"topology\": \"a100.txt\"}]}");
    load_fails("huge.json", "expands to 10000000000 names", "limit is 1048576");
    write_file("syntax.json", "{\"nodes\": [\n  {\"name\": \"a\",,}\n]}");
    load_fails("syntax.json", "syntax.json:2:", "invalid JSON");
    write_file("trunc.json", "{\"nodes\": [\n  {\"name\": \"a\"");
    load_fails("trunc.json", "trunc.json:2:", "end of file");
    write_file("trail.json", "{\"nodes\": []}\n\n]");
    load_fails("trail.json", "trail.json:3: unexpected text after", NULL);
    write_file("badtopo.json", "{\"nodes\": [{\"name\": \"a\", \"topology\": "
                               "\"junk.txt\"}]}");
    write_file("junk.txt", "this is not a topology\n");
    load_fails("badtopo.json", "nodes[0].topology: ", "junk.txt");
    load_fails("does-not-exist.json", "cannot open cluster file", NULL);
    mkdir(tpath("dir.json"), 0700);
    load_fails("dir.json", "not a regular file", NULL);
}

static void test_deep_nesting(void **state)
{
    (void)state;
    size_t depth = 5000;
    char *s = malloc(2 * depth + 64);
    size_t k = (size_t)sprintf(s, "{\"nodes\": ");
    for (size_t i = 0; i < depth; i++)
        s[k++] = '[';
    for (size_t i = 0; i < depth; i++)
        s[k++] = ']';
    strcpy(s + k, "}");
    write_file("deep.json", "%s", s);
    free(s);
    load_fails("deep.json", "nested deeper than 1000 levels", NULL);
}

/* The size cap is checked before reading: a sparse 300 MiB file costs no
 * disk and must fail at once. */
static void test_huge_file(void **state)
{
    (void)state;
    int fd = open(tpath("big.json"), O_CREAT | O_WRONLY | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)300 << 20), 0);
    close(fd);
    load_fails("big.json", "limit is 256 MiB", NULL);
    unlink(tpath("big.json"));
}

/* Resolution order: next to the cluster file, then $P3D_DATA_DIR's
 * examples/topologies/ (the bundled ones). */
static void test_bundled_lookup(void **state)
{
    (void)state;
    char dd[512], cmd[1200];
    snprintf(dd, sizeof dd, "%s/data", tmpdir);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/examples/topologies' '%s/sub'", dd, tmpdir);
    assert_int_equal(system(cmd), 0);
    char bt[600];
    snprintf(bt, sizeof bt, "%s/examples/topologies/bundled-a100.txt", dd);
    copy_file(a100, bt);
    char *old = getenv("P3D_DATA_DIR") ? strdup(getenv("P3D_DATA_DIR")) : NULL;
    setenv("P3D_DATA_DIR", dd, 1);
    write_file("sub/b.json", "{\"nodes\": [{\"name\": \"b1\", \"topology\": "
                             "\"bundled-a100.txt\"}]}");
    p3d_cluster *c = load_ok(tpath("sub/b.json"));
    assert_int_equal(c->topos[0]->ngpus, 8);
    p3d_cluster_free(c);
    write_file("sub/c.json", "{\"nodes\": [{\"name\": \"b1\", \"topology\": "
                             "\"nope.xml\"}]}");
    load_fails("sub/c.json", "no such file 'nope.xml'", "bundled: bundled-a100.txt)");
    if (old) {
        setenv("P3D_DATA_DIR", old, 1);
        free(old);
    } else {
        unsetenv("P3D_DATA_DIR");
    }
}

static void test_restrict(void **state)
{
    (void)state;
    write_file("r.json", "{\"nodes\": [\n"
                         "  {\"name\": \"n[01-04]\", \"topology\": \"a100.txt\", \"rack\": \"r1\"},\n"
                         "  {\"name\": \"n[05-08]\", \"topology\": \"pairs.txt\", \"rack\": \"r2\",\n"
                         "   \"nvlink_domain\": \"d\"},\n"
                         "  {\"name\": \"m[1-2]\", \"topology\": \"pairs.txt\", \"rack\": \"r3\"}\n"
                         "]}\n");
    p3d_cluster *c = load_ok(tpath("r.json"));
    char *err = NULL;
    assert_int_equal(p3d_cluster_restrict(c, "n[07,02-03]", &err), 0);
    assert_int_equal(c->nnodes, 3);
    assert_string_equal(c->nodes[0].name, "n07");
    assert_string_equal(c->nodes[1].name, "n02");
    assert_string_equal(c->nodes[2].name, "n03");
    /* racks renumbered by first use; r3 and its topology's only user gone */
    assert_int_equal(c->nracks, 2);
    assert_string_equal(c->racks[0], "r2");
    assert_string_equal(c->racks[c->nodes[1].rack], "r1");
    assert_int_equal(c->nnvl_domains, 1);
    assert_int_equal(c->nodes[0].nvl_domain, 0);
    assert_int_equal(c->nodes[1].nvl_domain, -1);
    assert_int_equal(c->ntopos, 2);
    assert_int_equal(p3d_cluster_gpus(c), 24);
    assert_int_equal(p3d_cluster_restrict(c, "n[02-04]", &err), -1);
    assert_non_null(strstr(err, "1 node is not described in"));
    assert_non_null(strstr(err, "n04"));
    P3D_FREE(&err);
    assert_int_equal(p3d_cluster_restrict(c, "n02,n02", &err), -1);
    assert_non_null(strstr(err, "'n02' is listed twice"));
    P3D_FREE(&err);
    assert_int_equal(p3d_cluster_restrict(c, " ", &err), -1);
    assert_non_null(strstr(err, "empty"));
    P3D_FREE(&err);
    assert_int_equal(p3d_cluster_restrict(c, "n[1-", &err), -1);
    assert_non_null(strstr(err, "column"));
    P3D_FREE(&err);
    /* failures leave the cluster as it was */
    assert_int_equal(c->nnodes, 3);
    assert_int_equal(p3d_cluster_restrict(c, "n02", &err), 0);
    assert_int_equal(c->nnodes, 1);
    assert_int_equal(c->ntopos, 1);
    assert_int_equal(c->nnvl_domains, 0);
    p3d_cluster_free(c);
}

static void test_from_node(void **state)
{
    (void)state;
    p3d_node *n = NULL;
    char *err = NULL;
    if (p3d_topo_load(a100, &n, &err) != 0)
        fail_msg("%s", err);
    p3d_cluster *c = NULL;
    assert_int_equal(p3d_cluster_from_node(n, &c, &err), 0);
    assert_int_equal(c->nnodes, 1);
    assert_int_equal(c->nracks, 1);
    assert_int_equal(p3d_cluster_gpus(c), 8);
    assert_non_null(c->nodes[0].name);
    assert_int_equal(p3d_cluster_link(c, 0, 0, 0, 1), P3D_LINK_NVLINK);
    p3d_cluster_warn(c, "note %d", 42);
    assert_int_equal(c->nwarnings, 1);
    assert_string_equal(c->warnings[0], "note 42");
    p3d_cluster_free(c);
    assert_int_equal(p3d_cluster_from_node(NULL, &c, &err), -1);
    free(err);
    p3d_cluster_free(NULL);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* 16,384 nodes (131,072 GPUs), one entry per rack and one entry per node:
 * both must load far below the 2 s budget of the whole dry run. */
static void test_scale(void **state)
{
    (void)state;
    FILE *f = fopen(tpath("big1.json"), "w");
    FILE *g = fopen(tpath("big2.json"), "w");
    fprintf(f, "{\"nodes\": [\n");
    fprintf(g, "{\"nodes\": [\n");
    for (int r = 0; r < 512; r++)
        fprintf(f,
                "%s{\"name\": \"node[%05d-%05d]\", \"topology\": "
                "\"a100.txt\", \"rack\": \"r%03d\"}\n",
                r ? "," : "", r * 32 + 1, r * 32 + 32, r);
    for (int i = 0; i < 16384; i++)
        fprintf(g,
                "%s{\"name\": \"node%05d\", \"topology\": \"a100.txt\", "
                "\"rack\": \"r%03d\"}\n",
                i ? "," : "", i + 1, i / 32);
    fprintf(f, "]}\n");
    fprintf(g, "]}\n");
    fclose(f);
    fclose(g);
    for (int k = 1; k <= 2; k++) {
        double t0 = now();
        p3d_cluster *c = load_ok(tpath(k == 1 ? "big1.json" : "big2.json"));
        double t1 = now();
        char *err = NULL;
        assert_int_equal(p3d_cluster_restrict(c, "node[16384-00001]", &err), -1);
        free(err);
        err = NULL;
        /* the whole list, reversed in two halves */
        assert_int_equal(p3d_cluster_restrict(c, "node[08193-16384],node[00001-08192]", &err), 0);
        double t2 = now();
        assert_int_equal(c->nnodes, 16384);
        assert_int_equal(p3d_cluster_gpus(c), 131072);
        assert_int_equal(c->nracks, 512);
        assert_string_equal(c->nodes[0].name, "node08193");
        assert_string_equal(c->racks[c->nodes[0].rack], "r256");
        print_message("16384 nodes, %s: load %.3f s, restrict %.3f s\n",
                      k == 1 ? "one entry per rack" : "one entry per node", t1 - t0, t2 - t1);
        p3d_cluster_free(c);
    }
}

/* What each bundled example promises in its name. */
static void check_example(const char *name, const p3d_cluster *c)
{
    if (!strcmp(name, "2x-dgx-h100.json")) {
        assert_int_equal(c->nnodes, 2);
        assert_int_equal(p3d_cluster_gpus(c), 16);
        assert_int_equal(p3d_cluster_link(c, 0, 0, 0, 7), P3D_LINK_NVLINK);
        assert_int_equal(p3d_cluster_link(c, 0, 0, 1, 0), P3D_LINK_RACK);
    } else if (!strcmp(name, "64x-dgx-h100-4racks.json")) {
        assert_int_equal(c->nnodes, 64);
        assert_int_equal(p3d_cluster_gpus(c), 512);
        assert_int_equal(c->nracks, 4);
        for (size_t i = 0; i < 64; i++)
            assert_int_equal(c->nodes[i].rack, (int)(i / 16));
    } else if (!strcmp(name, "16x-dgx-a100-interleaved.json")) {
        assert_int_equal(c->nnodes, 16);
        assert_int_equal(c->nracks, 2);
        for (size_t i = 0; i + 1 < 16; i++)
            assert_int_not_equal(c->nodes[i].rack, c->nodes[i + 1].rack);
        assert_true(c->link_gbps[P3D_LINK_NVLINK] == 300);
    } else if (!strcmp(name, "8x-pcie-nvlink-pairs.json")) {
        assert_int_equal(c->nnodes, 8);
        assert_int_equal(p3d_cluster_gpus(c), 64);
        assert_int_equal(p3d_cluster_link(c, 0, 0, 0, 1), P3D_LINK_NVLINK);
        assert_true(p3d_cluster_link(c, 0, 1, 0, 2) > P3D_LINK_MNNVL);
    } else if (!strcmp(name, "gb200-nvl72-2domains.json")) {
        assert_int_equal(c->nnodes, 36);
        assert_int_equal(p3d_cluster_gpus(c), 144);
        assert_int_equal(c->nnvl_domains, 2);
        assert_int_equal(p3d_cluster_link(c, 0, 0, 17, 3), P3D_LINK_MNNVL);
        assert_int_equal(p3d_cluster_link(c, 0, 0, 18, 0), P3D_LINK_XRACK);
    }
}

/* Every bundled example cluster loads (once the bundled topologies exist). */
static void test_examples(void **state)
{
    (void)state;
    const char *src = getenv("P3D_SRC");
    char dir[600], path[1200];
    snprintf(dir, sizeof dir, "%s/examples/clusters", src ? src : "..");
    DIR *d = opendir(dir);
    if (!d)
        skip();
    struct dirent *e;
    int n = 0, skipped = 0;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".json") != 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        p3d_cluster *c = NULL;
        char *err = NULL;
        if (p3d_cluster_load(path, &c, &err) != 0) {
            if (strstr(err, "no such file")) {
                print_message("skip %s: bundled topology missing: %s\n", e->d_name, err);
                skipped++;
                free(err);
                continue;
            }
            fail_msg("%s", err);
        }
        assert_true(c->nnodes > 0);
        assert_true(p3d_cluster_gpus(c) > 0);
        check_example(e->d_name, c);
        if (c->nwarnings)
            fail_msg("%s: unexpected warning: %s", e->d_name, c->warnings[0]);
        n++;
        p3d_cluster_free(c);
    }
    closedir(d);
    if (n == 0 && skipped)
        skip();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),          cmocka_unit_test(test_domains_and_gbps),
        cmocka_unit_test(test_warnings),       cmocka_unit_test(test_errors),
        cmocka_unit_test(test_deep_nesting),   cmocka_unit_test(test_huge_file),
        cmocka_unit_test(test_bundled_lookup), cmocka_unit_test(test_restrict),
        cmocka_unit_test(test_from_node),      cmocka_unit_test(test_scale),
        cmocka_unit_test(test_examples),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
