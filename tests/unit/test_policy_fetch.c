/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_policy_fetch.c — --policy http(s) URLs through the p3d_policy_fetch
 * plugin, against a tiny HTTP server forked by the test itself (no network
 * needed): a fetched policy runs, the SHA-256 pin is checked on the fetched
 * bytes, HTTP errors read clearly. Skips (77) when the plugin was not built
 * (no libcurl).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "p3d/plugin.h"
#include "policy_fixture.h"
#include "policy_internal.h"
#include "sha256.h"

static const char policy_text[] =
    "function place(cluster, job)\n"
    "  local m = par3d.mesh(job); local res = {}\n"
    "  for r = 0, m.world - 1 do res[r + 1] = {rank = r, node = r // 8 + 1, gpu = r % 8} end\n"
    "  return res, 'fetched'\n"
    "end\n";

static pid_t server;
static int port;

/* Serves GET /p.lua with the policy and 404 for anything else, forever. */
static void serve(int ls)
{
    for (;;) {
        int s = accept(ls, NULL, NULL);
        if (s < 0)
            continue;
        char req[2048];
        ssize_t n = read(s, req, sizeof req - 1);
        req[n > 0 ? n : 0] = 0;
        char head[256];
        if (strncmp(req, "GET /p.lua ", 11) == 0) {
            int hl = snprintf(head, sizeof head, "HTTP/1.0 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                              strlen(policy_text));
            if (write(s, head, (size_t)hl) < 0 || write(s, policy_text, strlen(policy_text)) < 0)
                _exit(1);
        } else {
            const char *nf = "HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
            if (write(s, nf, strlen(nf)) < 0)
                _exit(1);
        }
        close(s);
    }
}

static int setup(void **state)
{
    (void)state;
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) < 0 || listen(ls, 8) < 0 ||
        getsockname(ls, (struct sockaddr *)&a, &al) < 0)
        return -1;
    port = ntohs(a.sin_port);
    server = fork();
    if (server == 0)
        serve(ls);
    close(ls);
    return server > 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    if (server > 0) {
        kill(server, SIGKILL);
        waitpid(server, NULL, 0);
    }
    return 0;
}

static void test_fetch(void **state)
{
    (void)state;
    p3d_cluster *c = fx_simple(2, 8, 8, 0);
    p3d_job j;
    fx_job(&j, 2, 1, 1, 4, 2, NULL);
    char url[128], hex[65];
    p3d_placement *pl = NULL;
    char *msg = NULL;
    snprintf(url, sizeof url, "http://127.0.0.1:%d/p.lua", port);
    /* FIPS 180-2 test vector first: the pin is not checked against itself */
    assert_int_equal(p3d_sha256_hex("abc", 3, hex), 0);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    assert_int_equal(p3d_sha256_hex(policy_text, strlen(policy_text), hex), 0);
    if (p3d_policy_run(url, hex, c, &j, &pl, &msg) < 0)
        fprintf(stderr, "%s\n", msg);
    assert_non_null(pl);
    assert_string_equal(pl->policy, "p");
    assert_string_equal(pl->policy_source, url);
    assert_string_equal(pl->notes[0], "fetched");
    p3d_placement_free(pl);
    /* the pin is checked on the fetched bytes */
    hex[5] = hex[5] == 'a' ? 'b' : 'a';
    assert_int_equal(p3d_policy_run(url, hex, c, &j, &pl, &msg), -1);
    assert_non_null(strstr(msg, "refusing to run it"));
    P3D_FREE(&msg);
    /* HTTP errors */
    snprintf(url, sizeof url, "http://127.0.0.1:%d/missing.lua", port);
    assert_int_equal(p3d_policy_run(url, NULL, c, &j, &pl, &msg), -1);
    assert_non_null(strstr(msg, "HTTP status 404"));
    P3D_FREE(&msg);
    fx_free(c);
}

int main(void)
{
    const char *dir = getenv("P3D_PLUGIN_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir ? dir : ".", "p3d_policy_fetch.so");
    if (access(path, R_OK) != 0) {
        printf("skipped: %s not built (no libcurl?)\n", path);
        return 77;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_fetch)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
