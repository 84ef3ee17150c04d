/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * agent_proto.h — the messages between an agent (one per node, the parent
 * of the node's workers) and the job controller (controller.c). The only
 * definition of that protocol; agent_proto.c encodes and decodes it.
 *
 * A message is one packet: on a node, a SOCK_SEQPACKET socket pair between
 * the agent and its parent; across nodes, the body of one P3D_MSG_FATE
 * frame of the rendezvous connection (rdzv.h), relayed unchanged. Text, so
 * that a packet can be read in a trace:
 *
 *   "<type> <field> <field> ...\n<text>"
 *
 * | type | direction       | fields             | meaning                                  |
 * |------|-----------------|--------------------|------------------------------------------|
 * | f    | agent -> ctl    | gen code rank sig  | first local failure of generation gen:   |
 * |      |                 | + text             | exit code (128+sig for a signal), the    |
 * |      |                 |                    | global rank (-1: the ranks could not be  |
 * |      |                 |                    | started), the signal (0 for an exit);    |
 * |      |                 |                    | text: the root-cause summary             |
 * | d    | agent -> ctl    | gen                | every local rank of gen exited 0         |
 * | a    | agent -> ctl    | gen nranks         | the local ranks of gen are all started   |
 * | s    | agent -> ctl    | sig                | the node (agent or relay) got a stop     |
 * |      |                 |                    | signal: stop the job                     |
 * | r    | ctl -> agent    | gen                | stop the local ranks, start generation   |
 * |      |                 |                    | gen (restart count gen)                  |
 * | t    | ctl -> agent    | sig code           | stop: forward sig (0: none, the ranks    |
 * |      |                 |                    | are done), grace, SIGKILL; the job's     |
 * |      |                 |                    | exit code is code                        |
 * | u    | ctl -> agent    | sig                | forward sig as is (SIGUSR1/2)            |
 * | q    | ctl -> relay    |                    | a node is replaced: end the local ranks  |
 * |      |                 |                    | (grace, SIGKILL), keep the connection,   |
 * |      |                 |                    | then await the new placement (CPLACE)    |
 * | y    | relay -> ctl    |                    | retired: the node's agent is gone        |
 * | c    | ctl -> relay    | seq                | run this node's own --health-check now   |
 * |      |                 |                    | (never a command: the node's own CMD)    |
 * | h    | relay -> ctl    | seq ok + text      | the check's result for request seq: ok 1 |
 * |      |                 |                    | passed (or no --health-check here), 0    |
 * |      |                 |                    | failed; text: how (at most               |
 * |      |                 |                    | P3D_HEALTH_HOW-1 bytes are kept)         |
 * | p    | agent -> ctl    | gen step busy ckpt | progress of the node's ranks in gen (one |
 * |      |                 | nranks             | per --progress-interval at most, only    |
 * |      |                 |                    | when a rank's step advanced): the lowest |
 * |      |                 |                    | step, the median busy time of the last   |
 * |      |                 |                    | step in microseconds, the newest         |
 * |      |                 |                    | checkpoint durable on every reporting    |
 * |      |                 |                    | rank (-1: none), how many ranks report;  |
 * |      |                 |                    | relays forward it unchanged              |
 * | b    | both ways       | ms                 | heartbeat (--node-timeout): the sender   |
 * |      |                 |                    | is alive; ms: the sender's node timeout  |
 * |      |                 |                    | in milliseconds (0: off). A relay takes  |
 * |      |                 |                    | the leader's. Any packet counts as       |
 * |      |                 |                    | heard; B is sent every                   |
 * |      |                 |                    | p3d_beat_interval(timeout) seconds       |
 *
 * The letters are lower case, frame types (wire.h, P3D_MSG_*) upper case:
 * a packet's letter never reads as a frame type, nor the other way round.
 *
 * Decoding checks every field's range. Across nodes a packet that does
 * not parse, or that travels the wrong way (a type of the other column),
 * is dropped with one line naming the peer and what was wrong
 * (p3d_fate_complain); a FATE frame whose integrity tag does not match
 * (rdzv.h, P3D_TAG_LEN) ends the connection instead (docs/multinode.md,
 * "Frame integrity").
 */
#ifndef P3D_AGENT_PROTO_H
#define P3D_AGENT_PROTO_H

#include <stddef.h>

/* The largest packet (header + root-cause text). */
#define P3D_AMSG_MAX 65536

enum {
    P3D_AM_FAIL = 'f',
    P3D_AM_DONE = 'd',
    P3D_AM_UP = 'a',
    P3D_AM_SIGNAL = 's',
    P3D_AM_RESTART = 'r',
    P3D_AM_STOP = 't',
    P3D_AM_FORWARD = 'u',
    P3D_AM_RETIRE = 'q',
    P3D_AM_RETIRED = 'y',
    P3D_AM_CHECK = 'c',
    P3D_AM_HEALTH = 'h',
    P3D_AM_BEAT = 'b',
    P3D_AM_PROGRESS = 'p',
};

typedef struct p3d_amsg {
    int type;          /* P3D_AM_* */
    int gen;           /* F D A R */
    int code;          /* F T */
    int rank;          /* F */
    int sig;           /* F S T U */
    int nranks;        /* A P */
    int seq;           /* C H */
    int ok;            /* H */
    int ms;            /* B */
    int step;          /* P */
    int busy_us;       /* P */
    int ckpt;          /* P, -1: none */
    const char *text;  /* F H; decoded: points into the packet (NUL-ended) */
} p3d_amsg;

/* --node-timeout: how often a heartbeat (B) is sent for a node timeout
 * of timeout seconds: a quarter of it, at most 5 s, at least 50 ms (0
 * when off). */
double p3d_beat_interval(double timeout);

/* Encodes m into buf (cap bytes, at least 64); the text is cut to fit.
 * Returns the packet length, or -1 for an unknown type. */
int p3d_amsg_encode(const p3d_amsg *m, char *buf, size_t cap);

/* Decodes a packet of len bytes; pkt[len] must be writable (a NUL is put
 * there: m->text points into pkt). 0, or -1 when malformed. */
int p3d_amsg_decode(char *pkt, size_t len, p3d_amsg *m);

/* p3d_amsg_decode that says why: on -1, *why (when why is not NULL) is
 * a short description of what was wrong (valid until the next call on the
 * same thread). */
int p3d_amsg_decode_why(char *pkt, size_t len, p3d_amsg *m, const char **why);
/* 1 when a packet of type may travel down (controller -> agent or
 * relay, down = 1) or up (down = 0), per the table above. */
int p3d_amsg_dir_ok(int type, int down);
/* One line on stderr, "par3drun: PEER: WHAT: OUTCOME", about a packet or
 * frame that was not taken; peer and the formatted what are escaped
 * (termsafe.h). Rate-limited per process: at most 5 lines every 10 s,
 * the lines held back counted in the next one said. */
void p3d_fate_complain(const char *peer, const char *outcome, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Receives one packet from a SOCK_SEQPACKET socket without waiting into
 * buf (cap bytes, one kept for the decoder's NUL). Returns its length,
 * 0 when none is queued, -1 at EOF or on an error. */
long p3d_amsg_recv(int fd, char *buf, size_t cap);

/* Sends a message on a SOCK_SEQPACKET socket (best effort; fd < 0: no-op). */
void p3d_amsg_send(int fd, const p3d_amsg *m);

#endif
