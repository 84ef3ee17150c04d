/* SPDX-License-Identifier: BSD-3-Clause */
/* test_etcd_join.c — where par3drun --join --rdzv etcd:URL finds the
 * job's leader (plugins/rdzv_etcd/etcd_join.c): the first leader's value
 * names its rendezvous port, a successor's its join port after "join";
 * a successor's value without one, a join port 0, malformed fields and an
 * overlong host are refused with a message saying which. The plugin is a
 * .so that links no p3d library: its pure file is compiled in here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../../plugins/rdzv_etcd/etcd_join.c"

static void ok(const char *fields, const char *host, int port)
{
    char h[64] = "", msg[300] = "";
    int p = -1;
    if (etcd_join_endpoint(fields, h, sizeof h, &p, msg, sizeof msg) != 0)
        fail_msg("\"%s\": refused: %s", fields, msg);
    assert_string_equal(h, host);
    assert_int_equal(p, port);
}

static void refused(const char *fields, size_t hcap, const char *says)
{
    char h[64] = "", msg[300] = "";
    int p = -1;
    assert_true(hcap <= sizeof h);
    if (etcd_join_endpoint(fields, h, hcap, &p, msg, sizeof msg) == 0)
        fail_msg("\"%s\": accepted as %s:%d", fields, h, p);
    if (!strstr(msg, says))
        fail_msg("\"%s\": message \"%s\" does not say \"%s\"", fields, msg, says);
    assert_int_equal(p, -1);
}

static void first_leader(void **st)
{
    (void)st;
    ok("29400 10.0.0.5", "10.0.0.5", 29400);
    ok("1 node001.example", "node001.example", 1);
    ok("65535 ::1", "::1", 65535);
}

static void successor(void **st)
{
    (void)st;
    /* the failover port comes first; joiners go to the join port */
    ok("40001 10.0.0.6 restart 1 node 1 join 29400", "10.0.0.6", 29400);
    ok("0 127.0.0.1 restart 0 node 3 join 41234", "127.0.0.1", 41234);
}

static void refusals(void **st)
{
    (void)st;
    refused("40001 10.0.0.6 restart 1 node 1", 64, "without its join port");
    refused("40001 10.0.0.6 restart 1 node 1 join 0", 64, "could not open a join port");
    refused("40001 10.0.0.6 restart 1 node 1 join 70000", 64, "without its join port");
    refused("40001 10.0.0.6 restart 1 node 1 join 12x", 64, "without its join port");
    refused("0 10.0.0.5", 64, "port is 0");
    refused("", 64, "malformed");
    refused("29400", 64, "malformed");
    refused("29400 ", 64, "malformed");
    refused("x 10.0.0.5", 64, "malformed");
    refused("99999 10.0.0.5", 64, "malformed");
    refused("29400 a-host-name-longer-than-sixteen", 16, "over 15 bytes");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(first_leader),
        cmocka_unit_test(successor),
        cmocka_unit_test(refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
