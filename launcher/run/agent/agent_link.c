/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * agent_link.c — how the hub reaches an agent and hears of it: fate
 * packets over a rendezvous connection, forking a local agent on a socket
 * pair.
 */
#include "agent.h"
#include "ranks.h"
#include "rdzv.h"
#include "termsafe.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

int p3d_fate_send(p3d_chan *ch, const char *pkt, size_t len)
{
    p3d_wbuf b = {0};
    p3d_wbuf_begin(&b, P3D_MSG_FATE);
    p3d_wbuf_bytes(&b, pkt, len);
    int rc = ch && p3d_wbuf_end(&b) == 0 ? p3d_chan_send(ch, &b, P3D_FATE_STALL, NULL) : -1;
    p3d_wbuf_free(&b);
    return rc;
}

void p3d_fate_forged(const char *peer, int down, const char *why)
{
    p3d_fate_complain(peer,
                      down ? "nothing more is taken from it: the local ranks stop, exit 1"
                           : "disconnecting: the node counts as lost",
                      "a frame failed its tag check: %s", why ? why : "?");
}

int p3d_fate_take(const char *peer, int down, int type, unsigned char *body, size_t n, p3d_amsg *m)
{
    const char *why = NULL;
    if (down && (type == P3D_MSG_CPLACE || type == P3D_MSG_CDELTA))
        return 2;
    if (type != P3D_MSG_FATE) {
        p3d_fate_complain(peer, "dropped", "an unexpected frame of type 0x%02x (%zu bytes) on the fate channel",
                          (unsigned)type & 0xff, n);
        return 0;
    }
    if (n > P3D_AMSG_MAX) {
        p3d_fate_complain(peer, "dropped", "a fate packet of %zu bytes (at most %d)", n, P3D_AMSG_MAX);
        return 0;
    }
    /* the tag's bytes followed the packet: room for the decoder's NUL */
    if (p3d_amsg_decode_why((char *)body, n, m, &why) < 0) {
        char *q = p3d_term_dup((const char *)body, n, 40, 0);
        p3d_fate_complain(peer, "dropped", "a fate packet that does not parse (%s): \"%s\"", why, q ? q : "?");
        free(q);
        return 0;
    }
    if (!p3d_amsg_dir_ok(m->type, down)) {
        p3d_fate_complain(peer, "dropped", "a fate packet '%c' that only travels %s", m->type,
                          down ? "from an agent to the leader" : "from the leader to an agent");
        return 0;
    }
    return 1;
}

int p3d_fate_read(p3d_chan *ch, const char *peer, void (*fn)(void *ctx, const p3d_amsg *m), void *ctx, char **err)
{
    int got = p3d_chan_fill(ch, err);
    unsigned char *body;
    size_t len;
    int type;
    char *e = NULL;
    while ((type = p3d_chan_take(ch, &body, &len, &e)) > 0) {
        p3d_amsg m;
        if (p3d_fate_take(peer, 0, type, body, len, &m) == 1)
            fn(ctx, &m);
        free(body);
    }
    if (type < 0) {
        /* the caller drops the connection: the node is lost */
        p3d_fate_forged(peer, 0, e);
        if (err) {
            free(*err);
            *err = e;
        } else {
            free(e);
        }
        return -1;
    }
    free(e);
    return got < 0 ? -1 : 0;
}

int p3d_agent_fork(const p3d_launch *L, int node, const int *close_fds, int nclose, pid_t *pid, int *sock)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return -1;
    pid_t me = getpid();
    fflush(NULL);
    pid_t c = fork();
    if (c < 0) {
        int e = errno;
        close(sv[0]);
        close(sv[1]);
        errno = e;
        return -1;
    }
    if (c == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != me)
            _exit(P3D_EXIT_FAIL);
        /* a session of its own (and so its own process group): everything
         * the agent starts stays in it, even what its ranks leave behind
         * when they die, so that once the agent is lost the hub can end
         * all of it before a replacement starts (p3d_kill_session) */
        setsid();
        p3d_proctitle_set("p3d-agent", "par3drun [agent %s]", L->job->cluster->nodes[node].name);
        close(sv[0]);
        for (int k = 0; k < nclose; k++)
            if (close_fds[k] >= 0)
                close(close_fds[k]);
        /* the failover port is the node's, not its agent's: a fork keeps
         * it open (close-on-exec acts only at an exec), and an agent
         * holding it would keep taking connections after its node lost
         * it (issue #44) */
        if (L->mn && L->mn->gate)
            close(p3d_fgate_fd(L->mn->gate));
        if (L->mn && L->mn->jport) /* the leader's join port (--join): the same */
            close(p3d_jport_fd(L->mn->jport));
        int rc = p3d_agent_run(L, node, sv[1]);
        fflush(NULL);
        _exit(rc);
    }
    /* no setpgid(c, c) here: made a group leader first, the child could
     * not make its session; p3d_kill_tree reaches it by pid meanwhile */
    close(sv[1]);
    *pid = c;
    *sock = sv[0];
    return 0;
}
