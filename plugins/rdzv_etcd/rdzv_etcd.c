/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rdzv_etcd.c — p3d_rdzv_etcd.so: the rendezvous bootstrap over etcd's v3
 * JSON gateway (`--rdzv etcd:http://HOST:2379 --nnodes N --job-id ID`).
 *
 * Everything lives under the job prefix /par3drun/<job-id>/:
 *   rank/<i>  = hostname   one per agent; created by a transaction
 *                          "create if absent" (compare CREATE
 *                          create_revision == 0), trying i = 0, 1, 2... so
 *                          node ranks are first come, first served
 *   leader    = "PORT HOST sig=HEX" put by node rank 0 once all N ranks
 *                          are taken; later the leadership itself, taken
 *                          by a successor's campaign (etcd_elect.c)
 *   state     = one line of text the leader keeps current for its
 *                          successor (keep(); etcd_elect.c)
 * Every key is attached to its agent's lease (TTL: --node-timeout, else
 * 10 s). A thread keeps the lease alive until close(), which revokes it:
 * the keys go with it, and an agent that dies leaves nothing behind after
 * the lease's TTL. A lease that expires all the same is news (LEASE_LOST).
 *
 * etcd is the barrier: the leader publishes its endpoint only when all N
 * ranks have registered, the others poll for it. So a timeout names the
 * node ranks that never registered on every agent, and an etcd that goes
 * away mid-rendezvous is noticed by everybody waiting on it. Then the
 * common TCP rendezvous (rdzv_tcp.c) carries node records, the placement
 * and the job's fate.
 *
 * When the leader dies, its successor is elected in etcd: leader is free
 * once the dead leader's lease is gone, and a campaign takes it only
 * while no node rank ahead in the succession is still registered, in one
 * transaction (etcd_elect.c).
 *
 * Plugins cannot call p3d_* functions (the executable does not export
 * them): this is libc + libcurl + cJSON. Exit codes (docs/multinode.md):
 * etcd unreachable or refusing at the start -> detect() fails -> 2; lost
 * or timed out during the rendezvous -> publish() fails -> 1.
 */
#include "p3d/plugin.h"
#include "etcd_int.h"
#include "etcd_join.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TTL_DEFAULT 10 /* s: how long keys outlive a dead agent */
#define TTL_MIN 2
#define TTL_MAX 3600

double etcd_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

struct timespec etcd_abstime(double t)
{
    struct timespec ts = {(time_t)t, (long)((t - (double)(time_t)t) * 1e9)};
    if (ts.tv_nsec >= 1000000000L)
        ts.tv_nsec = 999999999L;
    return ts;
}

static void nap(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static double left(const etcd_state *s)
{
    return s->deadline - etcd_mono();
}

/* ---- keys ---------------------------------------------------------------------- */

/* Reads the keys in [key, range_end) (range_end NULL: the one key). Returns
 * the number of kvs (0 when none) with the decoded keys/values in kv[]
 * (each malloc'd; up to max), or -1 with msg. */
static int range(etcd_state *s, const char *key, const char *range_end, char **keys, char **vals, long long *leases,
                 int max, char *msg, size_t cap)
{
    int n = -1;
    char *k = etcd_b64_enc(key, strlen(key)), *e = range_end ? etcd_b64_enc(range_end, strlen(range_end)) : NULL;
    char *body = NULL;
    cJSON *j = NULL;
    if (!k || (range_end && !e) ||
        asprintf(&body, "{\"key\":\"%s\"%s%s%s}", k, e ? ",\"range_end\":\"" : "", e ? e : "", e ? "\"" : "") < 0) {
        body = NULL;
        p3d_plugin_say(msg, cap, "out of memory");
        goto out;
    }
    if (etcd_post(s->h, s->url, "/v3/kv/range", body, left(s), &j, msg, cap) < 0)
        goto out;
    const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(j, "kvs"), *kv;
    n = 0;
    cJSON_ArrayForEach(kv, kvs)
    {
        if (n >= max)
            break;
        const cJSON *kk = cJSON_GetObjectItemCaseSensitive(kv, "key");
        const cJSON *vv = cJSON_GetObjectItemCaseSensitive(kv, "value");
        keys[n] = cJSON_IsString(kk) ? etcd_b64_dec(kk->valuestring) : NULL;
        vals[n] = cJSON_IsString(vv) ? etcd_b64_dec(vv->valuestring) : strdup(""); /* empty value: omitted */
        if (!keys[n] || !vals[n]) {
            free(keys[n]);
            free(vals[n]);
            continue; /* not ours (not text) */
        }
        leases[n] = etcd_num(kv, "lease"); /* 0: held by no lease (etcd omits it) */
        n++;
    }
out:
    free(k);
    free(e);
    free(body);
    cJSON_Delete(j);
    return n;
}

/* Writes key = val under our lease. only_new: a transaction that writes
 * only if the key does not exist yet. 1 written, 0 taken (only_new), -1
 * with msg. */
static int kv_write(etcd_state *s, const char *key, const char *val, int only_new, char *msg, size_t cap)
{
    int rc = -1, n;
    char *k = etcd_b64_enc(key, strlen(key)), *v = etcd_b64_enc(val, strlen(val)), *body = NULL;
    cJSON *j = NULL;
    if (!k || !v)
        goto oom;
    if (only_new)
        n = asprintf(&body,
                     "{\"compare\":[{\"key\":\"%s\",\"result\":\"EQUAL\",\"target\":\"CREATE\","
                     "\"create_revision\":\"0\"}],"
                     "\"success\":[{\"request_put\":{\"key\":\"%s\",\"value\":\"%s\",\"lease\":\"%lld\"}}]}",
                     k, k, v, s->lease);
    else
        n = asprintf(&body, "{\"key\":\"%s\",\"value\":\"%s\",\"lease\":\"%lld\"}", k, v, s->lease);
    if (n < 0) {
        body = NULL;
        goto oom;
    }
    if (etcd_post(s->h, s->url, only_new ? "/v3/kv/txn" : "/v3/kv/put", body, left(s), &j, msg, cap) < 0)
        goto out;
    /* proto3 omits false: no "succeeded" means the key was there */
    rc = !only_new || cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "succeeded")) ? 1 : 0;
    goto out;
oom:
    p3d_plugin_say(msg, cap, "out of memory");
out:
    free(k);
    free(v);
    free(body);
    cJSON_Delete(j);
    return rc;
}

/* ---- the lease's keepalive thread ------------------------------------------------ */

const char *etcd_why(const etcd_state *s, const char *msg)
{
    size_t n = strlen(s->url);
    if (!strncmp(msg, "etcd at ", 8) && !strncmp(msg + 8, s->url, n) && !strncmp(msg + 8 + n, ": ", 2))
        return msg + 10 + n;
    return msg;
}

/* The threads must not take the agent's signals: par3drun blocks
 * SIGCHLD/SIGTERM... in its main thread and reads them from a signalfd,
 * and a thread with them unblocked would swallow them. A new thread
 * inherits the creator's mask: block all around the create. */
int etcd_thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int pe = pthread_create(t, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return pe;
}

/* ---- leases (the agent's, and etcd_elect.c's job lease) ----------------------- */

long long etcd_lease_grant(const etcd_state *s, CURL *h, int ttl, double tmo, int *got, char *msg, size_t cap)
{
    char body[64];
    cJSON *j = NULL;
    snprintf(body, sizeof body, "{\"TTL\":%d}", ttl);
    if (etcd_post(h, s->url, "/v3/lease/grant", body, tmo, &j, msg, cap) < 0)
        return -1;
    long long id = etcd_num(j, "ID"), t = etcd_num(j, "TTL");
    if (id <= 0 || t <= 0) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
        snprintf(msg, cap, "etcd at %s: /v3/lease/grant: no lease granted%s%s", s->url, cJSON_IsString(e) ? ": " : "",
                 cJSON_IsString(e) ? e->valuestring : "");
        id = 0;
    } else if (got) {
        *got = t > TTL_MAX ? TTL_MAX : (int)t; /* etcd may round a TTL up to its minimum */
    }
    cJSON_Delete(j);
    return id;
}

int etcd_lease_renew(const etcd_state *s, CURL *h, long long id, char *msg, size_t cap)
{
    char body[64];
    cJSON *j = NULL;
    int rc = 0;
    if (!h) {
        snprintf(msg, cap, "etcd at %s: curl_easy_init failed", s->url);
        return 0;
    }
    snprintf(body, sizeof body, "{\"ID\":\"%lld\"}", id);
    if (etcd_post(h, s->url, "/v3/lease/keepalive", body, 2.0, &j, msg, cap) == 0) {
        /* an expired or revoked lease answers without a TTL */
        rc = etcd_num(cJSON_GetObjectItemCaseSensitive(j, "result"), "TTL") > 0 ? 1 : -1;
        if (rc < 0)
            snprintf(msg, cap, "etcd at %s: lease %lld has expired or was revoked", s->url, id);
    }
    cJSON_Delete(j);
    return rc;
}

int etcd_lease_revoke(const etcd_state *s, CURL *h, long long id, char *msg, size_t cap)
{
    char body[64];
    cJSON *j = NULL;
    snprintf(body, sizeof body, "{\"ID\":\"%lld\"}", id);
    int rc = etcd_post(h, s->url, "/v3/lease/revoke", body, 2.0, &j, msg, cap);
    cJSON_Delete(j);
    return rc;
}

/* LEASE_LOST, once: etcd says the lease is gone (r < 0), or nothing renewed
 * it for a whole TTL (r == 0), after which etcd has dropped it and with it
 * this agent's keys, the leadership among them. */
static void lease_check(etcd_state *s, int r, double last_ok, const char *msg)
{
    double quiet = etcd_mono() - last_ok;
    if (r > 0 || (r == 0 && quiet < s->ttl))
        return;
    pthread_mutex_lock(&s->mu);
    if (!s->lease_lost) {
        s->lease_lost = 1;
        s->leads = 0; /* whatever this agent led, it leads no more */
        if (r < 0)
            etcd_news_push(s, P3D_RDZV_NEWS_LEASE_LOST, "%s: this agent's keys under %s are gone", msg, s->prefix);
        else
            etcd_news_push(s, P3D_RDZV_NEWS_LEASE_LOST,
                           "etcd at %s: lease %lld not renewed for %.1f s (its TTL is %d s), so this agent's keys "
                           "under %s are gone: %s",
                           s->url, s->lease, quiet, s->ttl, s->prefix, etcd_why(s, msg));
    }
    pthread_mutex_unlock(&s->mu);
}

/* fork() while this thread is inside curl, malloc or stdio would leave
 * the child with the lock the thread held, forever: par3drun forks its
 * node's agent, which runs on without an exec. Under ASan that hung a
 * leader's own agent from its first allocation (no heartbeat from the
 * start, the node lost after --node-timeout; e2e/multinode_etcd_sign and
 * multinode_etcd_failover, sanitizer runs only). So the thread holds
 * fork_mu while it works, and a fork in this process waits for it (an
 * atfork handler): at every fork the thread is asleep on its condition. */
static pthread_mutex_t fork_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void fork_prepare(void)
{
    pthread_mutex_lock(&fork_mu);
}

static void fork_done(void)
{
    pthread_mutex_unlock(&fork_mu);
}

static void fork_register(void)
{
    pthread_atfork(fork_prepare, fork_done, fork_done);
}

/* Renews the lease every ttl/3 s and puts keep()'s text as soon as it is
 * handed over. keep() wakes the thread early: the renewal's deadline is
 * set once per period, so wakeups do not push it back. */
static void *keepalive(void *arg)
{
    etcd_state *s = arg;
    CURL *h = curl_easy_init();
    char msg[600];
    int warned = 0, kwarned = 0;
    long long squat_said = 0; /* etcd_leader_check(): the squatter's revision said */
    double period = s->ttl / 3 > 1 ? s->ttl / 3 : 1, last_ok = etcd_mono(), next = last_ok + period;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        struct timespec ts = etcd_abstime(next);
        while (!s->stop && !s->pending && pthread_cond_timedwait(&s->cv, &s->mu, &ts) == 0)
            ;
        if (s->stop)
            break;
        char *text = s->pending;
        s->pending = NULL;
        pthread_mutex_unlock(&s->mu);
        pthread_mutex_lock(&fork_mu);
        if (text)
            etcd_keep_put(s, h, text, &kwarned);
        free(text);
        if (etcd_mono() >= next) {
            int r = etcd_lease_renew(s, h, s->lease, msg, sizeof msg);
            if (r > 0)
                last_ok = etcd_mono();
            /* The job's fate travels over the TCP channel, not etcd: losing
             * etcd after the rendezvous only costs the cleanup, so warn once. */
            if (r <= 0 && !warned) {
                fprintf(stderr,
                        "par3drun: warning: %s: cannot keep the rendezvous lease alive (the job goes on; "
                        "its keys under %s expire after %d s)\n",
                        msg, s->prefix, s->ttl);
                warned = 1;
            }
            lease_check(s, r, last_ok, msg);
            etcd_job_renew(s, h);
            etcd_leader_check(s, h, &squat_said);
            next = etcd_mono() + period;
        }
        pthread_mutex_unlock(&fork_mu);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    if (h)
        curl_easy_cleanup(h);
    return NULL;
}

static void state_free(etcd_state *s)
{
    if (!s)
        return;
    if (s->ka_up) {
        pthread_mutex_lock(&s->mu);
        s->stop = 1;
        pthread_cond_signal(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->ka, NULL);
    }
    /* the campaign thread, too, before the revoke: a bid that won after
     * it would leave a leader key nobody holds */
    etcd_elect_free(s);
    etcd_job_revoke(s);
    if (s->lease && s->h) {
        /* revoking deletes every key attached to the lease */
        char msg[600];
        /* the threads are joined: lease_lost is ours to read; a lease
         * already gone took the keys with it, nothing to warn about */
        if (etcd_lease_revoke(s, s->h, s->lease, msg, sizeof msg) < 0 && !s->lost && !s->lease_lost)
            fprintf(stderr, "par3drun: warning: %s (the job's keys expire after %d s)\n", msg, s->ttl);
    }
    if (s->h)
        curl_easy_cleanup(s->h);
    pthread_cond_destroy(&s->camp_cv);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    curl_global_cleanup();
    free(s);
}

/* ---- the backend ---------------------------------------------------------------- */

/* The agent's state before any request: 0, or -1 with msg (*out NULL). */
static int state_new(const char *url, const char *job, int nnodes, double timeout, etcd_state **out, char *msg,
                     size_t cap)
{
    etcd_state *s = calloc(1, sizeof *s);
    *out = NULL;
    if (!s)
        return p3d_plugin_say(msg, cap, "out of memory");
    s->pipe_rd = s->pipe_wr = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &ca);
    pthread_cond_init(&s->camp_cv, &ca);
    pthread_condattr_destroy(&ca);
    snprintf(s->url, sizeof s->url, "%s", url);
    for (size_t n = strlen(s->url); n > 0 && s->url[n - 1] == '/'; n--)
        s->url[n - 1] = 0;
    snprintf(s->prefix, sizeof s->prefix, "/par3drun/%s/", job);
    gethostname(s->host, sizeof s->host - 1);
    s->nnodes = nnodes;
    s->timeout = timeout;
    s->deadline = etcd_mono() + timeout;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
        pthread_cond_destroy(&s->camp_cv);
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->mu);
        free(s);
        return p3d_plugin_say(msg, cap, "etcd: curl_global_init failed");
    }
    *out = s;
    return 0;
}

/* The lease, TTL ttl s: everything this agent writes dies with it. 0 with
 * s->lease and s->ttl (what etcd granted), or -1 with msg. */
static int grant(etcd_state *s, int ttl, char *msg, size_t cap)
{
    char m2[700];
    long long id = etcd_lease_grant(s, s->h, ttl, left(s), &s->ttl, m2, sizeof m2);
    if (id < 0)
        return p3d_plugin_say(msg, cap, "%s (is etcd running and reachable at this URL?)", m2);
    if (id == 0)
        return p3d_plugin_say(msg, cap, "%s", m2);
    s->lease = id;
    return 0;
}

static int etcd_detect(const char *arg, int o_nnodes, int o_node_rank, double timeout, p3d_rdzv_boot *b, void **state,
                       char *msg, size_t cap)
{
    etcd_state *s = NULL;
    int rc = -1;
    *state = NULL;
    if (strncmp(arg, "http://", 7) && strncmp(arg, "https://", 8))
        return p3d_plugin_say(msg, cap,
                              "--rdzv etcd:%s: expected etcd:http://HOST:PORT (etcd's client URL, e.g. "
                              "etcd:http://10.0.0.5:2379)",
                              arg);
    if (strlen(arg) >= sizeof s->url)
        return p3d_plugin_say(msg, cap, "--rdzv etcd:URL: the URL is over %zu bytes", sizeof s->url - 1);
    /* o_nnodes 0, o_node_rank -1: par3drun --join (nothing registered;
     * publish() reads the job's current leader) */
    int joins = o_nnodes == 0 && o_node_rank == -1;
    if (o_nnodes < 1 && !joins)
        return p3d_plugin_say(msg, cap, "--rdzv etcd needs --nnodes N (how many agents meet)");
    if (o_node_rank >= o_nnodes)
        return p3d_plugin_say(msg, cap, "--node-rank %d: expected 0..%d for --nnodes %d", o_node_rank, o_nnodes - 1,
                              o_nnodes);
    /* rdzv.c hands --job-id over in b->job_id; inside Slurm its job id */
    const char *job = b->job_id[0] ? b->job_id : getenv("SLURM_JOB_ID");
    if (!job || !*job)
        return p3d_plugin_say(msg, cap,
                              "--rdzv etcd needs --job-id ID: the same on every node, new for every job (it names "
                              "the etcd prefix /par3drun/ID/)");
    size_t jl = strlen(job);
    for (const char *p = job; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("._-", *p))
            return p3d_plugin_say(msg, cap, "--job-id %s: expected letters, digits, '.', '_' and '-' only", job);
    if (jl > 100)
        return p3d_plugin_say(msg, cap, "--job-id: %zu characters, expected at most 100", jl);

    if (state_new(arg, job, o_nnodes, timeout, &s, msg, cap) < 0)
        return -1;
    s->h = curl_easy_init();
    if (!s->h) {
        p3d_plugin_say(msg, cap, "etcd: curl_easy_init failed");
        goto out;
    }
    if (joins) {
        b->nnodes = 0;
        b->node_rank = -1;
        snprintf(b->job_id, sizeof b->job_id, "%s", job);
        s->rank = -1;
        *state = s;
        return 1;
    }
    if (etcd_elect_init(s, msg, cap) < 0)
        goto out;
    int ttl = b->lease_ttl <= 0        ? TTL_DEFAULT
              : b->lease_ttl < TTL_MIN ? TTL_MIN
              : b->lease_ttl > TTL_MAX ? TTL_MAX
                                       : b->lease_ttl;
    if (grant(s, ttl, msg, cap) < 0)
        goto out;
    pthread_once(&fork_once, fork_register);
    if (etcd_thread_start(&s->ka, keepalive, s) != 0) {
        p3d_plugin_say(msg, cap, "etcd: cannot start the lease keepalive thread");
        goto out;
    }
    s->ka_up = 1;

    /* node ranks: the first free rank/<i>, claimed by a transaction */
    s->rank = -1;
    int lo = o_node_rank >= 0 ? o_node_rank : 0, hi = o_node_rank >= 0 ? o_node_rank : o_nnodes - 1;
    for (int i = lo; i <= hi && s->rank < 0; i++) {
        char key[256];
        snprintf(key, sizeof key, "%srank/%d", s->prefix, i);
        int k = kv_write(s, key, s->host, 1, msg, cap);
        if (k < 0)
            goto out;
        if (k == 1)
            s->rank = i;
    }
    if (s->rank < 0) {
        if (o_node_rank >= 0)
            p3d_plugin_say(msg, cap,
                           "etcd at %s: node rank %d of job %s is taken (%srank/%d exists): another agent has it, "
                           "or a previous job with the same --job-id (its keys expire %d s after it ended)",
                           s->url, o_node_rank, job, s->prefix, o_node_rank, s->ttl);
        else
            p3d_plugin_say(msg, cap,
                           "etcd at %s: all %d node ranks of job %s are taken (%srank/0..%d): more agents than "
                           "--nnodes, or a previous job with the same --job-id (its keys expire %d s after it ended)",
                           s->url, o_nnodes, job, s->prefix, o_nnodes - 1, s->ttl);
        goto out;
    }
    b->nnodes = o_nnodes;
    b->node_rank = s->rank;
    snprintf(b->job_id, sizeof b->job_id, "%s", job);
    /* the leader listens on the address it reaches etcd from: the others
     * reach etcd too, so most likely that address as well */
    if (s->rank == 0 && !b->leader_host[0]) {
        char *ip = NULL;
        if (curl_easy_getinfo(s->h, CURLINFO_LOCAL_IP, &ip) == CURLE_OK && ip && *ip)
            snprintf(b->leader_host, sizeof b->leader_host, "%s", ip);
    }
    *state = s;
    rc = 1;
out:
    if (rc != 1)
        state_free(s);
    return rc;
}

/* The leader key's value as read while waiting for the leader: believed
 * when a lease holds it (a par3drun leader puts it with its own, so it
 * goes with that agent) and the job key signed it; then val is cut to
 * its fields, "PORT HOST". Anything else is ignored (the wait goes on
 * for the real leader) and said once per value (*refused, malloc'd). */
static int leader_believed(etcd_state *s, char *val, long long lease, char **refused)
{
    char fields[ETCD_VALUE_MAX + 1];
    int ok = lease != 0 && etcd_verify(s, val, fields, sizeof fields) == 0;
    if (ok) {
        memcpy(val, fields, strlen(fields) + 1); /* fields is a prefix of val */
    } else if (!*refused || strcmp(*refused, val)) {
        fprintf(stderr,
                "par3drun: warning: etcd at %s: %sleader ignored: %s (a stranger's or another job's "
                "value; still waiting for this job's leader)\n",
                s->url, s->prefix, lease == 0 ? "held by no lease" : "not signed with this job's key");
        free(*refused);
        *refused = strdup(val);
    }
    return ok;
}

/* Polls the job prefix until all nnodes rank keys exist (leader) or the
 * leader key does (others). 1 done (*val: the leader key's value,
 * malloc'd), -1 with msg. Each poll reads the whole prefix. */
static int wait_for(etcd_state *s, int leader, char **val, char *msg, size_t cap)
{
    char from[256], to[256], lkey[256];
    snprintf(from, sizeof from, "%s", s->prefix);
    snprintf(to, sizeof to, "%s", s->prefix);
    to[strlen(to) - 1] = '0'; /* '0' follows '/': the end of the prefix range */
    snprintf(lkey, sizeof lkey, "%sleader", s->prefix);
    size_t rl = strlen(s->prefix) + 5; /* "<prefix>rank/" */
    int max = s->nnodes + 8;
    char **keys = calloc((size_t)max, sizeof *keys), **vals = calloc((size_t)max, sizeof *vals);
    long long *leases = calloc((size_t)max, sizeof *leases);
    char *seen = calloc((size_t)s->nnodes, 1);
    char *refused = NULL; /* the last leader value refused: said once */
    int rc = -1, nseen = 0;
    double pause = 0.01;
    if (!keys || !vals || !leases || !seen) {
        p3d_plugin_say(msg, cap, "out of memory");
        goto out;
    }
    for (;;) {
        int n = range(s, from, to, keys, vals, leases, max, msg, cap);
        if (n < 0) {
            char m2[900];
            snprintf(m2, sizeof m2, "%s", msg);
            s->lost = 1;
            p3d_plugin_say(msg, cap,
                           "lost etcd during the rendezvous (node rank %d, job prefix %s, waiting for %s): %s", s->rank,
                           s->prefix, leader ? "the other nodes to register" : "the leader's endpoint", m2);
            goto out;
        }
        /* seen: every rank registered at some poll. An agent that went
         * away since is the TCP rendezvous's business; and a timeout must
         * not blame the ranks that timed out first and revoked. */
        for (int i = 0; i < n; i++) {
            if (!strcmp(keys[i], lkey) && !leader && !*val) {
                if (leader_believed(s, vals[i], leases[i], &refused))
                    *val = vals[i], vals[i] = NULL;
            } else if (strlen(keys[i]) > rl && !strncmp(keys[i] + rl - 5, "rank/", 5) &&
                       isdigit((unsigned char)keys[i][rl])) {
                int r = atoi(keys[i] + rl);
                if (r >= 0 && r < s->nnodes && !seen[r])
                    seen[r] = 1, nseen++;
            }
            free(keys[i]);
            free(vals[i]);
            keys[i] = vals[i] = NULL;
        }
        if (leader ? nseen >= s->nnodes : *val != NULL) {
            rc = 1;
            goto out;
        }
        if (etcd_mono() + pause > s->deadline)
            break;
        nap(pause);
        if (pause < 0.1)
            pause *= 1.5;
    }
    /* timed out: name the node ranks that never registered */
    char miss[512] = "";
    size_t len = 0;
    int shown = 0;
    for (int i = 0; i < s->nnodes; i++) {
        if (seen[i])
            continue;
        if (shown < 16)
            len += (size_t)snprintf(miss + len, sizeof miss - len, "%snode[%d]", shown ? ", " : "", i);
        shown++;
    }
    if (shown > 16)
        snprintf(miss + len, sizeof miss - len, " and %d more", shown - 16);
    p3d_plugin_say(msg, cap,
                   "etcd at %s: timed out after %.1f s: %d/%d nodes registered under %srank/; never arrived: %s",
                   s->url, s->timeout, nseen, s->nnodes, s->prefix,
                   shown ? miss : "none (but the leader, node[0], never published its endpoint)");
out:
    free(keys);
    free(vals);
    free(leases);
    free(refused);
    free(seen);
    return rc;
}

/* par3drun --join: the job's current leader, read once from its key and
 * believed only when signed with the job key (as the nodes of the start
 * believe it): its join endpoint into b. 0, or -2 with msg (the joiner
 * exits 2: nothing to join, or a value not to be trusted). */
static int join_leader(etcd_state *s, p3d_rdzv_boot *b, char *msg, size_t cap)
{
    char lkey[256], *key = NULL, *val = NULL, fields[ETCD_VALUE_MAX + 1], why[300];
    long long lease = 0;
    snprintf(lkey, sizeof lkey, "%sleader", s->prefix);
    int n = range(s, lkey, NULL, &key, &val, &lease, 1, msg, cap);
    int rc = -2;
    if (n < 0) {
        char m2[900];
        snprintf(m2, sizeof m2, "%s", msg);
        p3d_plugin_say(msg, cap, "--join: cannot read the job's leader from etcd: %s", m2);
    } else if (n == 0) {
        p3d_plugin_say(msg, cap,
                       "--join: etcd at %s holds no leader for this job (no key %s): the job ended, or "
                       "none runs under this --job-id; nothing to join",
                       s->url, lkey);
    } else if (lease == 0 || etcd_verify(s, val, fields, sizeof fields) < 0) {
        p3d_plugin_say(msg, cap,
                       "--join: etcd at %s: %s is %s: refused (a forged value, another job's, or this "
                       "node's --rdzv-token-file is not the job's)",
                       s->url, lkey,
                       lease == 0 ? "held by no lease (no par3drun leader put it)" : "not signed with this job's key");
    } else if (etcd_join_endpoint(fields, b->leader_host, sizeof b->leader_host, &b->leader_port, why, sizeof why) <
               0) {
        p3d_plugin_say(msg, cap, "--join: etcd at %s: %s: %s", s->url, lkey, why);
    } else {
        rc = 0;
    }
    free(key);
    free(val);
    return rc;
}

static int etcd_publish(void *state, p3d_rdzv_boot *b, char *msg, size_t cap)
{
    etcd_state *s = state;
    char *val = NULL;
    /* the job key signs and checks the leader's value; etcd never sees it */
    snprintf(s->key, sizeof s->key, "%s", b->token);
    if (s->nnodes == 0)
        return join_leader(s, b, msg, cap);
    if (b->node_rank == 0) {
        if (wait_for(s, 1, NULL, msg, cap) < 0)
            return -1;
        /* signed, no token: see docs/multinode.md, "Security" */
        char lkey[256], fields[600], blob[sizeof s->mine];
        snprintf(lkey, sizeof lkey, "%sleader", s->prefix);
        snprintf(fields, sizeof fields, "%d %s", b->leader_port, b->leader_host);
        if (etcd_sign(s, fields, blob, sizeof blob) < 0)
            return p3d_plugin_say(msg, cap, "etcd: cannot sign the leader's endpoint (%s)", fields);
        if (kv_write(s, lkey, blob, 0, msg, cap) < 0) {
            s->lost = 1;
            char m2[900];
            snprintf(m2, sizeof m2, "%s", msg);
            return p3d_plugin_say(msg, cap, "lost etcd during the rendezvous (publishing the leader's endpoint): %s",
                                  m2);
        }
        pthread_mutex_lock(&s->mu);
        s->leads = 1; /* the first leadership: held with this agent's lease */
        snprintf(s->mine, sizeof s->mine, "%s", blob);
        pthread_mutex_unlock(&s->mu);
        return 0;
    }
    if (wait_for(s, 0, &val, msg, cap) < 0)
        return -1;
    int port = 0;
    char host[256] = "";
    int n = sscanf(val, "%d %255s", &port, host);
    free(val);
    if (n < 2 || port < 1 || port > 65535)
        return p3d_plugin_say(msg, cap, "etcd at %s: %sleader: malformed (expected \"PORT HOST sig=HEX\")", s->url,
                              s->prefix);
    b->leader_port = port;
    snprintf(b->leader_host, sizeof b->leader_host, "%s", host);
    return 0;
}

static void etcd_close(void *state)
{
    state_free(state);
}

static const p3d_rdzv_ops ops = {
    .name = "etcd",
    .detect = etcd_detect,
    .publish = etcd_publish,
    .close = etcd_close,
    .campaign = etcd_campaign,
    .keep = etcd_keep,
    .notify_fd = etcd_notify_fd,
    .news = etcd_news,
};

P3D_PLUGIN_EXPORT(rdzv, etcd, P3D_PLUGIN_RDZV, &ops);
