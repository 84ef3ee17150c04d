/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * etcd_int.h — private to p3d_rdzv_etcd.so: the agent's state and the
 * helpers that rdzv_etcd.c (lease, node ranks, the leader's endpoint),
 * etcd_elect.c (the leadership: campaign, keep, news) and etcd_http.c
 * (base64, one JSON request) share. Nothing here is exported: the
 * plugin's one public face is p3d/plugin.h.
 */
#ifndef P3D_ETCD_INT_H
#define P3D_ETCD_INT_H

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stddef.h>
#include <time.h>

#define ETCD_NEWS_MAX 8     /* queued news; the oldest goes when full */
#define ETCD_NEWS_MSG 4608  /* a WON carries the kept text (<= 4096 bytes) */
#define ETCD_BEFORE_MAX 64  /* campaign(): node ranks ahead of this one */
#define ETCD_VALUE_MAX 1024 /* campaign(): the leadership's value */
#define ETCD_KEEP_MAX 4096  /* keep(): the leader's state text */
#define ETCD_SIG_LEN 69     /* " sig=" and 64 hex digits after a signed value */

typedef struct etcd_news_item {
    int kind; /* P3D_RDZV_NEWS_* */
    char msg[ETCD_NEWS_MSG];
} etcd_news_item;

/* A bid of campaign(): copied in, so the caller's arrays may go at once. */
typedef struct etcd_bid {
    int before[ETCD_BEFORE_MAX];
    int nbefore;
    char value[ETCD_VALUE_MAX + 1];
    double until; /* CLOCK_MONOTONIC seconds */
} etcd_bid;

typedef struct etcd_state {
    char url[512];    /* base URL, no trailing '/' */
    char prefix[200]; /* /par3drun/<job-id>/ */
    char host[256];   /* gethostname, the value of rank/<i> */
    long long lease;  /* 0: none granted; set before any thread starts */
    int ttl;          /* s: the lease's TTL (boot->lease_ttl or 10) */
    int nnodes, rank;
    char key[256];                  /* the job key (boot->token), set by publish():
                              * signs and checks the leader key's value */
    char mine[ETCD_VALUE_MAX + 80]; /* the leader value this agent put (signed),
                              * "" until it leads: the keepalive thread
                              * checks the key still holds it (under mu) */
    int lost;                       /* etcd went away: no revoke warning at close */
    double deadline;                /* monotonic seconds: detect() + timeout */
    double timeout;
    CURL *h; /* the main thread's handle (owned) */
    /* Everything below is shared with the threads: under mu. Each thread
     * uses its own CURL handle. */
    pthread_mutex_t mu;
    pthread_t ka; /* the keepalive thread; it also puts keep()'s text */
    int ka_up, stop;
    pthread_cond_t cv; /* wakes the keepalive thread: stop, pending */
    char *pending;     /* keep()'s newest text not yet put (owned) */
    long long jlease;  /* the job lease that holds state (0 none):
                              * granted by the first keep(), adopted by
                              * the successor that wins, renewed by the
                              * keepalive thread; it outlives a leader */
    int leads;         /* this agent holds the leadership: it revokes
                              * the job lease at close */
    int lease_lost;    /* LEASE_LOST was queued (it is said once) */
    pthread_t camp;    /* the campaign thread, started by the first bid */
    int camp_up, camp_stop;
    pthread_cond_t camp_cv; /* wakes it: a new bid, stop */
    etcd_bid bid;
    unsigned bid_gen; /* bumped by each campaign(): replaces the bid */
    int bid_on;       /* a bid is running */
    etcd_news_item news[ETCD_NEWS_MAX];
    int news_head, news_n; /* FIFO: oldest at news_head */
    int pipe_rd, pipe_wr;  /* notify_fd(): readable while news_n > 0 */
} etcd_state;

/* etcd_elect.c: the live leader checks its own key and puts it back
 * (the keepalive thread, each period) */
void etcd_leader_check(etcd_state *s, CURL *h, long long *said);

/* etcd_sign.c: the leader key's value. sign: fields + " sig=HEX" into
 * out (0, or -1: too long, no key). verify: 0 with the fields before the
 * signature in fields, -1 when the value is unsigned or the signature is
 * not the job key's for this prefix. */
int etcd_sign(const etcd_state *s, const char *fields, char *out, size_t cap);
int etcd_verify(const etcd_state *s, const char *val, char *fields, size_t cap);

/* rdzv_etcd.c */
double etcd_mono(void);
/* CLOCK_MONOTONIC seconds as the absolute timespec of a timed wait on a
 * cond var made with CLOCK_MONOTONIC */
struct timespec etcd_abstime(double t);
/* msg past its "etcd at <url>: ", for a message that names the URL itself */
const char *etcd_why(const etcd_state *s, const char *msg);
/* pthread_create with every signal blocked in the new thread */
int etcd_thread_start(pthread_t *t, void *(*fn)(void *), void *arg);
/* Leases through handle h. grant: a lease of ttl s (request bound tmo s):
 * its ID, with *got (may be NULL) the TTL etcd granted; 0 when etcd
 * granted none, -1 when the request failed (msg either way). renew: one
 * keepalive of lease id: 1 renewed, 0 failed (msg), -1 the lease is gone
 * in etcd, expired or revoked (msg). revoke: 0, or -1 with msg. */
long long etcd_lease_grant(const etcd_state *s, CURL *h, int ttl, double tmo, int *got, char *msg, size_t cap);
int etcd_lease_renew(const etcd_state *s, CURL *h, long long id, char *msg, size_t cap);
int etcd_lease_revoke(const etcd_state *s, CURL *h, long long id, char *msg, size_t cap);

/* etcd_http.c */
/* base64 of n bytes / back to text; malloc'd, NULL on no memory (and,
 * decoding, on something that is not base64 of text) */
char *etcd_b64_enc(const char *s, size_t n);
char *etcd_b64_dec(const char *s);
/* POSTs body to url + path: 0 with *out (the parsed reply, caller frees),
 * or -1 with msg naming the URL and what went wrong. tmo: seconds. */
int etcd_post(CURL *h, const char *url, const char *path, const char *body, double tmo, cJSON **out, char *msg,
              size_t cap);
/* proto3 JSON's 64-bit number o[k]; 0 when absent */
long long etcd_num(const cJSON *o, const char *k);

/* etcd_elect.c */
/* The news queue's pipe: 0, or -1 with msg. */
int etcd_elect_init(etcd_state *s, char *msg, size_t cap);
/* Stops and joins the campaign thread, closes the pipe, frees the pending
 * text. Before the lease is revoked. */
void etcd_elect_free(etcd_state *s);
/* Queues one piece of news; the caller holds mu. */
void etcd_news_push(etcd_state *s, int kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Keepalive thread, mu not held: puts text as <prefix>state with the job
 * lease (granted first when there is none) through h; warns once
 * (*warned) when it cannot. */
void etcd_keep_put(etcd_state *s, CURL *h, const char *text, int *warned);
/* Keepalive thread, mu not held: renews the job lease, if any (one whose
 * TTL is gone is forgotten: the next keep() grants another). */
void etcd_job_renew(etcd_state *s, CURL *h);
/* close(), the threads joined: revokes the job lease when this agent
 * leads (its state key goes with it). */
void etcd_job_revoke(etcd_state *s);

int etcd_campaign(void *state, const int *before, int nbefore, const char *value, double until, char *msg, size_t cap);
int etcd_keep(void *state, const char *text, char *msg, size_t cap);
int etcd_notify_fd(void *state);
int etcd_news(void *state, char *msg, size_t cap);

#endif
