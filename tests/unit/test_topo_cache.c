/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_topo_cache.c — the topology cache (placement/topo/topo_cache.c):
 *  - the key: gathered from a fake /proc + /sys tree, it changes when any
 *    one component changes (boot id, each PCI device's vendor, device and
 *    NUMA node, the device list, memory nodes, allowed CPUs, HWLOC_* env,
 *    hwloc's version and library, host, par3drun's version) and comes back
 *    when the component does (vendor, device and driver from uevent);
 *  - the record: encode -> decode -> encode is the identity on every hwloc
 *    fixture, and decode refuses every truncation and bad field;
 *  - the trimmed live discovery (hwloc type filters) gives the same record
 *    as the untrimmed one on every fixture and on this machine;
 *  - a cache hit still runs the NVML plugin live (the stand-in NVML library
 *    fills the NVLink matrix of a cached 4-GPU record).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "read_file.h"
#include "topo_cache.h"

static char root[256];

static void put(const char *rel, const char *text)
{
    char p[1024], d[1100];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    snprintf(d, sizeof d, "mkdir -p \"$(dirname '%s')\"", p);
    assert_int_equal(system(d), 0);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

#define UE_GPU "DRIVER=nvidia\nPCI_CLASS=30200\nPCI_ID=10DE:2330\nPCI_SLOT_NAME=0000:18:00.0\n"

static void fake_tree(void)
{
    snprintf(root, sizeof root, "/tmp/p3d-topokey-%d", (int)getpid());
    put("proc/sys/kernel/random/boot_id", "11111111-2222-3333-4444-555555555555\n");
    put("proc/self/status", "Name:\tx\nCpus_allowed_list:\t0-3\nMems_allowed_list:\t0-1\nVmRSS:\t1 kB\n");
    put("sys/bus/pci/devices/0000:00:00.0/uevent", "PCI_CLASS=60000\nPCI_ID=8086:0D57\n");
    put("sys/bus/pci/devices/0000:00:00.0/numa_node", "-1\n");
    put("sys/bus/pci/devices/0000:18:00.0/uevent", UE_GPU);
    put("sys/bus/pci/devices/0000:18:00.0/numa_node", "0\n");
}

static char *key_now(void)
{
    p3d_topo_key k;
    char *err = NULL;
    if (p3d_topo_key_gather(&k, root, &err) != 0)
        fail_msg("%s", err);
    char *t = p3d_topo_key_text(&k);
    p3d_topo_key_clear(&k);
    assert_non_null(t);
    return t;
}

/* Changing rel to changed makes a new key; putting orig back, the old. */
static void expect_file_matters(const char *base, const char *rel, const char *changed, const char *orig)
{
    put(rel, changed);
    char *t = key_now();
    if (!strcmp(t, base))
        fail_msg("changing %s did not change the key", rel);
    char *n1 = p3d_topo_cache_name(t), *n0 = p3d_topo_cache_name(base);
    assert_string_not_equal(n1, n0);
    free(n1);
    free(n0);
    free(t);
    put(rel, orig);
    t = key_now();
    assert_string_equal(t, base);
    free(t);
}

static void test_key_files(void **s)
{
    (void)s;
    fake_tree();
    char *base = key_now(), *again = key_now();
    assert_string_equal(base, again);
    free(again);
    assert_non_null(strstr(base, "key boot_id 11111111-2222-3333-4444-555555555555\n"));
    assert_non_null(strstr(base, "key mems 0-1\n"));
    assert_non_null(strstr(base, "0000:18:00.0:10DE_2330:0:nvidia"));
    expect_file_matters(base, "proc/sys/kernel/random/boot_id", "99999999-2222-3333-4444-555555555555\n",
                        "11111111-2222-3333-4444-555555555555\n");
    /* vendor, device, driver (bound or not) */
    expect_file_matters(base, "sys/bus/pci/devices/0000:18:00.0/uevent",
                        "DRIVER=nvidia\nPCI_CLASS=30200\nPCI_ID=1002:2330\n", UE_GPU);
    expect_file_matters(base, "sys/bus/pci/devices/0000:18:00.0/uevent",
                        "DRIVER=nvidia\nPCI_CLASS=30200\nPCI_ID=10DE:2331\n", UE_GPU);
    expect_file_matters(base, "sys/bus/pci/devices/0000:18:00.0/uevent", "PCI_CLASS=30200\nPCI_ID=10DE:2330\n", UE_GPU);
    expect_file_matters(base, "sys/bus/pci/devices/0000:18:00.0/numa_node", "1\n", "0\n");
    expect_file_matters(base, "proc/self/status", "Name:\tx\nMems_allowed_list:\t0\n",
                        "Name:\tx\nCpus_allowed_list:\t0-3\nMems_allowed_list:\t0-1\nVmRSS:\t1 kB\n");
    /* a device that appears (hot plug, a VF) */
    put("sys/bus/pci/devices/0000:19:00.0/uevent", "PCI_ID=15B3:1021\n");
    char *t = key_now();
    assert_string_not_equal(t, base);
    free(t);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/sys/bus/pci/devices/0000:19:00.0'", root);
    assert_int_equal(system(cmd), 0);
    t = key_now();
    assert_string_equal(t, base);
    free(t);
    /* HWLOC_* changes what hwloc finds */
    setenv("HWLOC_COMPONENTS", "-linuxio", 1);
    t = key_now();
    assert_string_not_equal(t, base);
    free(t);
    unsetenv("HWLOC_COMPONENTS");
    /* no boot id: no key (the cache is then not used) */
    snprintf(cmd, sizeof cmd, "rm -f '%s/proc/sys/kernel/random/boot_id'", root);
    assert_int_equal(system(cmd), 0);
    p3d_topo_key k;
    char *err = NULL;
    assert_int_equal(p3d_topo_key_gather(&k, root, &err), -1);
    assert_non_null(strstr(err, "boot_id"));
    free(err);
    free(base);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
}

/* Fields that are not files: each changed alone changes the text. */
static void test_key_fields(void **s)
{
    (void)s;
    fake_tree();
    p3d_topo_key k;
    char *err = NULL;
    assert_int_equal(p3d_topo_key_gather(&k, root, &err), 0);
    char *base = p3d_topo_key_text(&k);
#define EXPECT_FIELD(field, val)                                                                                       \
    do {                                                                                                               \
        char *old = k.field;                                                                                           \
        k.field = strdup(val);                                                                                         \
        char *t = p3d_topo_key_text(&k);                                                                               \
        if (!strcmp(t, base))                                                                                          \
            fail_msg("changing " #field " did not change the key");                                                    \
        free(t);                                                                                                       \
        free(k.field);                                                                                                 \
        k.field = old;                                                                                                 \
    } while (0)
    EXPECT_FIELD(version, "0.1.1");
    EXPECT_FIELD(hwloc_lib, "/lib/libhwloc.so.15:1:2");
    EXPECT_FIELD(host, "other-node");
    EXPECT_FIELD(cpus, "0");
    k.hwloc_api ^= 0x100;
    char *t = p3d_topo_key_text(&k);
    assert_string_not_equal(t, base);
    free(t);
    k.hwloc_api ^= 0x100;
    t = p3d_topo_key_text(&k);
    assert_string_equal(t, base);
    free(t);
    p3d_topo_key_clear(&k);
    /* the real affinity: dropping a CPU changes the gathered key */
    cpu_set_t all, one;
    if (sched_getaffinity(0, sizeof all, &all) == 0 && CPU_COUNT(&all) > 1) {
        CPU_ZERO(&one);
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &all)) {
                CPU_SET(c, &one);
                break;
            }
        assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
        t = key_now();
        assert_string_not_equal(t, base);
        free(t);
        assert_int_equal(sched_setaffinity(0, sizeof all, &all), 0);
        t = key_now();
        assert_string_equal(t, base);
        free(t);
    } else {
        printf("note: one CPU only: the affinity change was not exercised\n");
    }
    free(base);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
}

/* ---- records of every fixture ------------------------------------------ */

static int fixture_paths(char *paths[], int cap)
{
    const char *fx = getenv("P3D_FIXTURES"), *src = getenv("P3D_SRC");
    char dirs[2][1024];
    snprintf(dirs[0], sizeof dirs[0], "%s/realdata/hwloc", fx && *fx ? fx : "fixtures");
    snprintf(dirs[1], sizeof dirs[1], "%s/examples/topologies", src && *src ? src : "..");
    int n = 0;
    for (int d = 0; d < 2; d++) {
        DIR *D = opendir(dirs[d]);
        if (!D)
            fail_msg("%s: cannot list it", dirs[d]);
        struct dirent *e;
        while ((e = readdir(D)) && n < cap) {
            size_t l = strlen(e->d_name);
            if (l > 4 && !strcmp(e->d_name + l - 4, ".xml"))
                assert_true(asprintf(&paths[n++], "%s/%s", dirs[d], e->d_name) > 0);
        }
        closedir(D);
    }
    assert_true(n >= 10);
    return n;
}

static p3d_node *raw_of(const char *path, int trim, p3d_topo_extra *x)
{
    char *text = NULL, *err = NULL;
    size_t len = 0;
    p3d_node *n = NULL;
    if (p3d_read_small_file(path, "xml", 64 << 20, &text, &len, &err) < 0 ||
        p3d_topo_hwloc_xml_raw(path, text, len, trim, &n, x, &err) < 0)
        fail_msg("%s: %s", path, err);
    free(text);
    return n;
}

static char *finished_json(p3d_node *n)
{
    char *err = NULL;
    if (p3d_node_finish(n, &err) < 0)
        fail_msg("%s", err);
    return p3d_topo_json(n);
}

static void test_record_roundtrip(void **s)
{
    (void)s;
    char *paths[64];
    int np = fixture_paths(paths, 64), gpus = 0;
    for (int i = 0; i < np; i++) {
        p3d_topo_extra x, y;
        p3d_node *a = raw_of(paths[i], 1, &x), *b = NULL;
        char *ea = p3d_topo_raw_encode(a, &x), *why = NULL;
        if (p3d_topo_raw_decode(ea, &b, &y, &why) != 0)
            fail_msg("%s: %s", paths[i], why);
        char *eb = p3d_topo_raw_encode(b, &y);
        assert_string_equal(ea, eb);
        assert_int_equal(x.had_matrix, y.had_matrix);
        gpus += a->ngpus;
        /* the same finished record, names aside */
        b->hostname = strdup(a->hostname);
        b->source = strdup(a->source);
        b->source_kind = strdup(a->source_kind);
        char *ja = finished_json(a), *jb = finished_json(b);
        assert_string_equal(ja, jb);
        free(ja);
        free(jb);
        free(ea);
        free(eb);
        p3d_node_free(a);
        p3d_node_free(b);
        free(paths[i]);
    }
    assert_true(gpus >= 40); /* the fixtures do hold GPUs */
}

static void test_record_rejects(void **s)
{
    (void)s;
    char path[1024];
    const char *src = getenv("P3D_SRC");
    snprintf(path, sizeof path, "%s/examples/topologies/dgx-h100.xml", src && *src ? src : "..");
    p3d_topo_extra x, y;
    p3d_node *a = raw_of(path, 1, &x), *b = NULL;
    assert_true(a->ngpus == 8 && a->nnics > 0);
    char *good = p3d_topo_raw_encode(a, &x), *why = NULL;
    size_t len = strlen(good);
    /* every truncation, at every byte */
    for (size_t cut = 0; cut < len; cut++) {
        char *t = strndup(good, cut);
        if (p3d_topo_raw_decode(t, &b, &y, &why) == 0)
            fail_msg("a record cut at byte %zu of %zu was accepted", cut, len);
        assert_non_null(why);
        free(why);
        why = NULL;
        free(t);
    }
    /* a bad token in every line, and a line too many */
    int lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += good[i] == '\n';
    for (int ln = 0; ln < lines; ln++) {
        char *t = strdup(good), *p = t;
        for (int k = 0; k < ln; k++)
            p = strchr(p, '\n') + 1;
        char *sp = strchr(p, ' ');
        assert_non_null(sp);
        /* the token after the tag becomes "x%zz", which no field takes */
        size_t tl = strcspn(sp + 1, " \n");
        char *bad = NULL;
        assert_true(asprintf(&bad, "%.*s x%%zz%s", (int)(sp - t), t, sp + 1 + tl) > 0);
        if (p3d_topo_raw_decode(bad, &b, &y, &why) == 0)
            fail_msg("line %d with a bad field was accepted:\n%s", ln + 1, bad);
        free(why);
        why = NULL;
        free(bad);
        free(t);
    }
    /* an asymmetric NVLink matrix passes the parser but not
     * p3d_node_finish: the decoder refuses it so a forged entry is
     * rediscovered instead of failing the load */
    {
        char *t = strdup(good), *row = strstr(t, "\nnvlink ") + 8;
        char *tok2 = strchr(row, ' ') + 1;
        size_t tl = strcspn(tok2, " \n");
        char *bad = NULL;
        assert_true(asprintf(&bad, "%.*s0x1.5p+9%s", (int)(tok2 - t), t, tok2 + tl) > 0);
        assert_int_equal(p3d_topo_raw_decode(bad, &b, &y, &why), -1);
        assert_non_null(strstr(why, "not symmetric"));
        free(why);
        why = NULL;
        free(bad);
        free(t);
    }
    /* Issue 44: a CPU list over the CPUs that exist (2^31 of them: 20 s
     * and 514 MB of bitmap once bound) is refused at once */
    {
        char *t = strdup(good), *gl = strstr(t, "\ngpu ") + 1, *eol = strchr(gl, '\n'), *last = eol;
        while (last[-1] != ' ')
            last--;
        char *bad = NULL;
        assert_true(asprintf(&bad, "%.*s0-2147483647%s", (int)(last - t), t, eol) > 0);
        assert_int_equal(p3d_topo_raw_decode(bad, &b, &y, &why), -1);
        assert_non_null(strstr(why, "the CPU list '0-2147483647' is not a list of CPUs below"));
        free(why);
        why = NULL;
        free(bad);
        free(t);
    }
    char *more = NULL;
    assert_true(asprintf(&more, "%sgn 1 2 3\n", good) > 0);
    assert_int_equal(p3d_topo_raw_decode(more, &b, &y, &why), -1);
    assert_non_null(strstr(why, "after the record"));
    free(why);
    free(more);
    free(good);
    p3d_node_free(a);
}

/* The type filters of live discovery leave the record as it was. */
static void test_filters_change_nothing(void **s)
{
    (void)s;
    char *paths[64];
    int np = fixture_paths(paths, 64);
    for (int i = 0; i < np; i++) {
        p3d_topo_extra x, y;
        p3d_node *a = raw_of(paths[i], 0, &x), *b = raw_of(paths[i], 1, &y);
        char *ea = p3d_topo_raw_encode(a, &x), *eb = p3d_topo_raw_encode(b, &y);
        if (strcmp(ea, eb))
            fail_msg("%s: the trimmed record differs:\n%s\n---\n%s", paths[i], ea, eb);
        char *ja = finished_json(a), *jb = finished_json(b);
        assert_string_equal(ja, jb);
        free(ja);
        free(jb);
        free(ea);
        free(eb);
        p3d_node_free(a);
        p3d_node_free(b);
        free(paths[i]);
    }
    p3d_topo_extra x, y;
    p3d_node *a = NULL, *b = NULL;
    char *err = NULL;
    if (p3d_topo_hwloc_local_raw(0, &a, &x, &err) != 0 || p3d_topo_hwloc_local_raw(1, &b, &y, &err) != 0)
        fail_msg("local: %s", err);
    char *ea = p3d_topo_raw_encode(a, &x), *eb = p3d_topo_raw_encode(b, &y);
    assert_string_equal(ea, eb);
    free(ea);
    free(eb);
    p3d_node_free(a);
    p3d_node_free(b);
}

/* ---- a hit still reads NVML live ---------------------------------------- */

static void test_hit_reads_nvml_live(void **s)
{
    (void)s;
    const char *pd = getenv("P3D_PLUGIN_DIR");
    char fake[1024], dir[256], *err = NULL;
    if (!pd || !*pd) {
        printf("note: P3D_PLUGIN_DIR not set (run through ctest): NVML part skipped\n");
        return;
    }
    snprintf(fake, sizeof fake, "%s/libp3d_fake_nvml.so", pd);
    snprintf(dir, sizeof dir, "/tmp/p3d-topocache-%d", (int)getpid());
    setenv("P3D_TOPO_CACHE_DIR", dir, 1);
    p3d_topo_cache_configure(1, 0);
    /* a cached record of 4 GPUs at the stand-in library's addresses, under
     * this machine's key: what a GPU node's first run would have stored */
    p3d_node *n = p3d_node_new("h", "local", "local");
    assert_int_equal(p3d_node_alloc(n, 4, 0, &err), 0);
    for (int i = 0; i < 4; i++) {
        snprintf(n->gpus[i].pci, sizeof n->gpus[i].pci, "0000:%02x:00.0", 0x10 + i);
        n->gpus[i].cpus = strdup("0");
        n->gpus[i].numa = 0;
    }
    n->nnuma = n->npackages = 1;
    n->ncores = n->npus = 1;
    p3d_topo_extra x = {0, 0};
    char *enc = p3d_topo_raw_encode(n, &x), *key = NULL;
    p3d_node_free(n);
    p3d_topo_key k;
    assert_int_equal(p3d_topo_key_gather(&k, "", &err), 0);
    key = p3d_topo_key_text(&k);
    p3d_topo_key_clear(&k);
    p3d_topo_cache_store(key, enc);

    setenv("P3D_NVML_LIBRARY", fake, 1);
    p3d_node *live = NULL;
    if (p3d_topo_load("local", &live, &err) != 0)
        fail_msg("%s", err);
    assert_int_equal(live->ngpus, 4);    /* the cached record ... */
    assert_int_equal(live->ndomains, 1); /* ... with NVLink from NVML now */
    assert_int_equal(live->fabric_clique, 7);
    p3d_node_free(live);
    setenv("P3D_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
    assert_int_equal(p3d_topo_load("local", &live, &err), 0);
    assert_int_equal(live->ngpus, 4);
    assert_int_equal(live->ndomains, 4); /* NVML gone: no links now */
    assert_int_equal(live->fabric_clique, -1);
    p3d_node_free(live);
    unsetenv("P3D_NVML_LIBRARY");
    /* the cache off: this machine's own discovery, not the record */
    p3d_topo_cache_configure(0, 0);
    assert_int_equal(p3d_topo_load("local", &live, &err), 0);
    assert_true(live->ngpus != 4 || access("/dev/nvidia0", F_OK) == 0);
    p3d_node_free(live);
    p3d_topo_cache_configure(1, 0);
    free(enc);
    free(key);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_files),
        cmocka_unit_test(test_key_fields),
        cmocka_unit_test(test_record_roundtrip),
        cmocka_unit_test(test_record_rejects),
        cmocka_unit_test(test_filters_change_nothing),
        cmocka_unit_test(test_hit_reads_nvml_live),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
