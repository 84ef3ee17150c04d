/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hub_link.c — what every file of the hub uses to reach out: its own lines
 * to the user (hub_say, hub_note, through the output sink), one packet to
 * one agent's link (hub_send_one), and a link watched on the loop
 * (hub_watch, with the reader supervise.c set in h->on_link). Below
 * supervise.c and the hub_*.c files, so none of them calls back up.
 */
#include "hub_int.h"
#include "say.h"
#include "termsafe.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* The supervisor's own lines: they quote the job id, node names and the
 * run directory, which came from outside, so every line is escaped here
 * (newlines kept: a line is ours) before it meets the output sink. */
void hub_say(void *ctx, const char *text)
{
    hub *h = ctx;
    size_t n = strlen(text);
    if (p3d_term_clean(text, n, P3D_TERM_KEEP_NL | P3D_TERM_KEEP_TAB)) {
        p3d_sink_write(&h->sink, 1, text, n);
        return;
    }
    char *e = p3d_term_dup(text, n, n, P3D_TERM_KEEP_NL | P3D_TERM_KEEP_TAB);
    if (e)
        p3d_sink_write(&h->sink, 1, e, strlen(e));
    free(e);
}

void hub_note(hub *h, const char *text)
{
    if (!p3d_say_quiet())
        hub_say(h, text);
}

void hub_send_one(hub *h, int a, const char *pkt, size_t len)
{
    alink *l = &h->ln[a];
    if (l->fd < 0 || l->broken)
        return;
    if (!l->remote) {
        while (send(l->fd, pkt, len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno == EINTR)
            ;
    } else if (p3d_fate_send(l->ch, pkt, len) < 0) {
        l->broken = 1;
    }
}

/* Link a's fd is read from the loop. */
void hub_watch(hub *h, int a)
{
    if (h->ln[a].fd >= 0 && p3d_loop_watch(h->loop, h->ln[a].fd, P3D_LOOP_IN, h->on_link, &h->lc[a]) < 0)
        h->ln[a].broken = 1; /* out of memory: it cannot be heard, so it is lost */
}
