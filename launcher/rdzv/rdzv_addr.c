/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rdzv_addr.c — which address a node's listening sockets bind (rdzv.h):
 * the one the rendezvous uses, never every interface (docs/multinode.md,
 * "Security"). The leader's is the address its rendezvous port is bound
 * to; another node's the local end of the route to the leader, which the
 * kernel picks for a connected UDP socket without sending a packet, the
 * same address the rendezvous connection gets, known before that
 * connection exists (the ring and failover ports go in the JOIN). On a
 * multi-homed node --bind-addr (P3D_BIND_ADDR) names it instead.
 */
#include "rdzv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int p3d_sock_addr(int fd, char *out, size_t cap)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
        return -1;
    return getnameinfo((struct sockaddr *)&ss, sl, out, (socklen_t)cap, NULL, 0, NI_NUMERICHOST) ? -1 : 0;
}

int p3d_route_addr(const char *host, int port, char *out, size_t cap, char **err)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM}, *ai = NULL;
    char ps[16];
    int rc = -1, e = 0;
    snprintf(ps, sizeof ps, "%d", port > 0 ? port : 9);
    int g = getaddrinfo(host, ps, &hints, &ai);
    if (g != 0)
        return p3d_err(err, "rendezvous: cannot resolve the leader address '%s': %s", host, gai_strerror(g));
    for (struct addrinfo *a = ai; a && rc < 0; a = a->ai_next) {
        int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) == 0 && p3d_sock_addr(fd, out, cap) == 0)
            rc = 0;
        else
            e = errno;
        if (fd >= 0)
            close(fd);
    }
    freeaddrinfo(ai);
    if (rc < 0)
        p3d_err(err, "rendezvous: no route from this node to the leader at %s:%d: %s (give --bind-addr ADDR)", host,
                port, strerror(e));
    return rc;
}

int p3d_bind_addr_check(const char *what, const char *addr, char **err)
{
    unsigned char buf[sizeof(struct in6_addr)];
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICHOST | AI_PASSIVE},
                    *ai = NULL;
    if (!*addr || getaddrinfo(addr, "0", &hints, &ai) != 0)
        return p3d_err(err,
                       "%s '%s': expected one numeric IPv4 or IPv6 address of this node (e.g. 10.0.0.5 or "
                       "fd00::5; no brackets, no port, no name)",
                       what, addr);
    int any = (inet_pton(AF_INET, addr, buf) == 1 && !memcmp(buf, "\0\0\0\0", 4)) ||
              (inet_pton(AF_INET6, addr, buf) == 1 && !memcmp(buf, &in6addr_any, sizeof in6addr_any));
    int fd = any ? -1 : socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int ok = fd >= 0 && bind(fd, ai->ai_addr, ai->ai_addrlen) == 0, e = errno;
    if (fd >= 0)
        close(fd);
    freeaddrinfo(ai);
    if (any)
        return p3d_err(err,
                       "%s '%s': every interface is what this option keeps the listeners off; give one "
                       "address of this node",
                       what, addr);
    if (!ok)
        return p3d_err(err, "%s '%s': cannot bind it: %s%s", what, addr, strerror(e),
                       e == EADDRNOTAVAIL ? " (not an address of this node)" : "");
    return 0;
}
