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
 *   leader    = "PORT HOST TOKEN"   put by node rank 0 once all N ranks
 *                          are taken
 * Every key is attached to its agent's lease. A thread keeps the lease
 * alive until close(), which revokes it: the keys go with it, and an agent
 * that dies leaves nothing behind after the lease's TTL.
 *
 * etcd is the barrier: the leader publishes its endpoint only when all N
 * ranks have registered, the others poll for it. So a timeout names the
 * node ranks that never registered on every agent, and an etcd that goes
 * away mid-rendezvous is noticed by everybody waiting on it. Then the
 * common TCP rendezvous (rdzv_tcp.c) carries node records, the placement
 * and the job's fate.
 *
 * Plugins cannot call p3d_* functions (the executable does not export
 * them): this is libc + libcurl + cJSON. Exit codes (docs/multinode.md):
 * etcd unreachable or refusing at the start -> detect() fails -> 2; lost
 * or timed out during the rendezvous -> publish() fails -> 1.
 */
#include "p3d/plugin.h"

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

#define LEASE_TTL 10        /* s: how long keys outlive a dead agent */
#define KEEPALIVE_EVERY 3   /* s: well inside the TTL on a loaded host */
#define REPLY_MAX (16u << 20)

typedef struct etcd_state {
    char url[512];           /* base URL, no trailing '/' */
    char prefix[200];        /* /par3drun/<job-id>/ */
    char host[256];          /* gethostname, the value of rank/<i> */
    long long lease;         /* 0: none granted */
    int nnodes, rank;
    int lost;                /* etcd went away: no revoke warning at close */
    double deadline;         /* monotonic seconds: detect() + timeout */
    double timeout;
    CURL *h;                 /* the main thread's handle (owned) */
    /* keepalive thread: uses its own handle; stop under mu */
    pthread_t ka;
    int ka_up, stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} etcd_state;

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void nap(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* ---- base64 (etcd's JSON gateway carries keys and values as bytes) -------- */

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* malloc'd, NUL-terminated */
static char *b64_enc(const char *s, size_t n)
{
    char *o = malloc(4 * ((n + 2) / 3) + 1), *p = o;
    if (!o)
        return NULL;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned char)s[i] << 16;
        if (i + 1 < n)
            v |= (unsigned char)s[i + 1] << 8;
        if (i + 2 < n)
            v |= (unsigned char)s[i + 2];
        *p++ = B64[v >> 18 & 63];
        *p++ = B64[v >> 12 & 63];
        *p++ = i + 1 < n ? B64[v >> 6 & 63] : '=';
        *p++ = i + 2 < n ? B64[v & 63] : '=';
    }
    *p = 0;
    return o;
}

/* malloc'd, NUL-terminated; NULL when s is not base64 or decodes to a NUL */
static char *b64_dec(const char *s)
{
    size_t n = strlen(s), k = 0;
    char *o = malloc(n / 4 * 3 + 4);
    unsigned v = 0;
    int bits = 0;
    if (!o)
        return NULL;
    for (size_t i = 0; i < n && s[i] != '='; i++) {
        const char *c = strchr(B64, s[i]);
        if (!c || !*c) {
            free(o);
            return NULL;
        }
        v = (v << 6 | (unsigned)(c - B64)) & 0xffffff;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            o[k] = (char)(v >> bits & 255);
            if (!o[k++]) {
                free(o);
                return NULL;
            }
        }
    }
    o[k] = 0;
    return o;
}

/* ---- one JSON request -------------------------------------------------------- */

typedef struct reply {
    char *p;
    size_t len;
    int over;
} reply;

static size_t on_data(char *d, size_t sz, size_t nm, void *u)
{
    reply *r = u;
    size_t n = sz * nm;
    if (r->len + n + 1 > REPLY_MAX) {
        r->over = 1;
        return 0;
    }
    char *q = realloc(r->p, r->len + n + 1);
    if (!q)
        return 0;
    memcpy(q + r->len, d, n);
    r->len += n;
    q[r->len] = 0;
    r->p = q;
    return n;
}

/* POSTs body to url + path. 0 with *out (the parsed reply, caller frees),
 * or -1 with msg naming the URL and what went wrong. tmo: seconds. */
static int post(CURL *h, const char *url, const char *path, const char *body, double tmo, cJSON **out, char *msg,
                size_t cap)
{
    char full[700];
    reply r = {0};
    int rc = -1;
    long code = 0;
    *out = NULL;
    snprintf(full, sizeof full, "%s%s", url, path);
    if (tmo < 0.2)
        tmo = 0.2;
    if (tmo > 5)
        tmo = 5;
    struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, full);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM */
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(tmo * 1000));
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(tmo * 1000 < 2000 ? tmo * 1000 : 2000));
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    CURLcode c = curl_easy_perform(h);
    curl_slist_free_all(hd);
    if (c != CURLE_OK) {
        p3d_plugin_say(msg, cap, "etcd at %s: %s: %s", url, path, r.over ? "reply over 16 MiB" : curl_easy_strerror(c));
        goto out;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    cJSON *j = r.p ? cJSON_Parse(r.p) : NULL;
    if (code != 200) {
        const cJSON *m = j ? cJSON_GetObjectItemCaseSensitive(j, "message") : NULL;
        if (!cJSON_IsString(m))
            m = j ? cJSON_GetObjectItemCaseSensitive(j, "error") : NULL;
        p3d_plugin_say(msg, cap, "etcd at %s: %s: HTTP %ld%s%s%s", url, path, code, cJSON_IsString(m) ? ": " : "",
            cJSON_IsString(m) ? m->valuestring : "", code == 404 ? " (is this etcd >= 3.4's client URL?)" : "");
        cJSON_Delete(j);
        goto out;
    }
    if (!j || !cJSON_IsObject(j)) {
        p3d_plugin_say(msg, cap, "etcd at %s: %s: the reply is not a JSON object", url, path);
        cJSON_Delete(j);
        goto out;
    }
    *out = j;
    rc = 0;
out:
    free(r.p);
    return rc;
}

/* 64-bit numbers arrive as strings (proto3 JSON); absent means 0 */
static long long num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (cJSON_IsString(v))
        return strtoll(v->valuestring, NULL, 10);
    if (cJSON_IsNumber(v))
        return (long long)v->valuedouble;
    return 0;
}

static double left(const etcd_state *s)
{
    return s->deadline - mono();
}

/* ---- keys ---------------------------------------------------------------------- */

/* Reads the keys in [key, range_end) (range_end NULL: the one key). Returns
 * the number of kvs (0 when none) with the decoded keys/values in kv[]
 * (each malloc'd; up to max), or -1 with msg. */
static int range(etcd_state *s, const char *key, const char *range_end, char **keys, char **vals, int max,
                 char *msg, size_t cap)
{
    int n = -1;
    char *k = b64_enc(key, strlen(key)), *e = range_end ? b64_enc(range_end, strlen(range_end)) : NULL;
    char *body = NULL;
    cJSON *j = NULL;
    if (!k || (range_end && !e) ||
        asprintf(&body, "{\"key\":\"%s\"%s%s%s}", k, e ? ",\"range_end\":\"" : "", e ? e : "", e ? "\"" : "") < 0) {
        body = NULL;
        p3d_plugin_say(msg, cap, "out of memory");
        goto out;
    }
    if (post(s->h, s->url, "/v3/kv/range", body, left(s), &j, msg, cap) < 0)
        goto out;
    const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(j, "kvs"), *kv;
    n = 0;
    cJSON_ArrayForEach(kv, kvs)
    {
        if (n >= max)
            break;
        const cJSON *kk = cJSON_GetObjectItemCaseSensitive(kv, "key");
        const cJSON *vv = cJSON_GetObjectItemCaseSensitive(kv, "value");
        keys[n] = cJSON_IsString(kk) ? b64_dec(kk->valuestring) : NULL;
        vals[n] = cJSON_IsString(vv) ? b64_dec(vv->valuestring) : strdup(""); /* empty value: omitted */
        if (!keys[n] || !vals[n]) {
            free(keys[n]);
            free(vals[n]);
            continue; /* not ours (not text) */
        }
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
    char *k = b64_enc(key, strlen(key)), *v = b64_enc(val, strlen(val)), *body = NULL;
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
    if (post(s->h, s->url, only_new ? "/v3/kv/txn" : "/v3/kv/put", body, left(s), &j, msg, cap) < 0)
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

static void *keepalive(void *arg)
{
    etcd_state *s = arg;
    CURL *h = curl_easy_init();
    char body[64], msg[600];
    int warned = 0;
    snprintf(body, sizeof body, "{\"ID\":\"%lld\"}", s->lease);
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += KEEPALIVE_EVERY;
        while (!s->stop && pthread_cond_timedwait(&s->cv, &s->mu, &ts) == 0)
            ;
        if (s->stop)
            break;
        pthread_mutex_unlock(&s->mu);
        cJSON *j = NULL;
        int ok = h && post(h, s->url, "/v3/lease/keepalive", body, 2.0, &j, msg, sizeof msg) == 0;
        if (ok) {
            /* an expired or revoked lease answers without a TTL */
            const cJSON *res = cJSON_GetObjectItemCaseSensitive(j, "result");
            if (num(res, "TTL") <= 0) {
                ok = 0;
                snprintf(msg, sizeof msg, "etcd at %s: lease %lld has expired", s->url, s->lease);
            }
        }
        cJSON_Delete(j);
        /* The job's fate travels over the TCP channel, not etcd: losing
         * etcd after the rendezvous only costs the cleanup, so warn once. */
        if (!ok && !warned) {
            fprintf(stderr, "par3drun: warning: %s: cannot keep the rendezvous lease alive (the job goes on; "
                            "its keys under %s expire after %d s)\n",
                    h ? msg : "curl_easy_init failed", s->prefix, LEASE_TTL);
            warned = 1;
        }
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
    if (s->lease && s->h) {
        /* revoking deletes every key attached to the lease */
        char body[64], msg[600];
        cJSON *j = NULL;
        snprintf(body, sizeof body, "{\"ID\":\"%lld\"}", s->lease);
        if (post(s->h, s->url, "/v3/lease/revoke", body, 2.0, &j, msg, sizeof msg) < 0 && !s->lost)
            fprintf(stderr, "par3drun: warning: %s (the job's keys expire after %d s)\n", msg, LEASE_TTL);
        cJSON_Delete(j);
    }
    if (s->h)
        curl_easy_cleanup(s->h);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    curl_global_cleanup();
    free(s);
}

/* ---- the backend ---------------------------------------------------------------- */

static int etcd_detect(const char *arg, int o_nnodes, int o_node_rank, double timeout, p3d_rdzv_boot *b,
                       void **state, char *msg, size_t cap)
{
    etcd_state *s = NULL;
    int rc = -1;
    cJSON *j = NULL;
    *state = NULL;
    if (strncmp(arg, "http://", 7) && strncmp(arg, "https://", 8))
        return p3d_plugin_say(msg, cap, "--rdzv etcd:%s: expected etcd:http://HOST:PORT (etcd's client URL, e.g. "
                             "etcd:http://10.0.0.5:2379)", arg);
    if (strlen(arg) >= sizeof s->url)
        return p3d_plugin_say(msg, cap, "--rdzv etcd:URL: the URL is over %zu bytes", sizeof s->url - 1);
    if (o_nnodes < 1)
        return p3d_plugin_say(msg, cap, "--rdzv etcd needs --nnodes N (how many agents meet)");
    if (o_node_rank >= o_nnodes)
        return p3d_plugin_say(msg, cap, "--node-rank %d: expected 0..%d for --nnodes %d", o_node_rank, o_nnodes - 1, o_nnodes);
    /* rdzv.c hands --job-id over in b->job_id; inside Slurm its job id */
    const char *job = b->job_id[0] ? b->job_id : getenv("SLURM_JOB_ID");
    if (!job || !*job)
        return p3d_plugin_say(msg, cap, "--rdzv etcd needs --job-id ID: the same on every node, new for every job (it names "
                             "the etcd prefix /par3drun/ID/)");
    size_t jl = strlen(job);
    for (const char *p = job; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("._-", *p))
            return p3d_plugin_say(msg, cap, "--job-id %s: expected letters, digits, '.', '_' and '-' only", job);
    if (jl > 100)
        return p3d_plugin_say(msg, cap, "--job-id: %zu characters, expected at most 100", jl);

    s = calloc(1, sizeof *s);
    if (!s)
        return p3d_plugin_say(msg, cap, "out of memory");
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    snprintf(s->url, sizeof s->url, "%s", arg);
    for (size_t n = strlen(s->url); n > 0 && s->url[n - 1] == '/'; n--)
        s->url[n - 1] = 0;
    snprintf(s->prefix, sizeof s->prefix, "/par3drun/%s/", job);
    gethostname(s->host, sizeof s->host - 1);
    s->nnodes = o_nnodes;
    s->timeout = timeout;
    s->deadline = mono() + timeout;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
        p3d_plugin_say(msg, cap, "etcd: curl_global_init failed");
        free(s);
        return -1;
    }
    s->h = curl_easy_init();
    if (!s->h) {
        p3d_plugin_say(msg, cap, "etcd: curl_easy_init failed");
        goto out;
    }

    /* the lease first: everything this agent writes dies with it */
    char body[64], m2[700];
    snprintf(body, sizeof body, "{\"TTL\":%d}", LEASE_TTL);
    if (post(s->h, s->url, "/v3/lease/grant", body, left(s), &j, m2, sizeof m2) < 0) {
        p3d_plugin_say(msg, cap, "%s (is etcd running and reachable at this URL?)", m2);
        goto out;
    }
    s->lease = num(j, "ID");
    if (s->lease <= 0 || num(j, "TTL") <= 0) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
        p3d_plugin_say(msg, cap, "etcd at %s: /v3/lease/grant: no lease granted%s%s", s->url, cJSON_IsString(e) ? ": " : "",
            cJSON_IsString(e) ? e->valuestring : "");
        s->lease = 0;
        goto out;
    }
    cJSON_Delete(j);
    j = NULL;
    /* The thread must not take the agent's signals: par3drun blocks
     * SIGCHLD/SIGTERM... in its main thread and reads them from a
     * signalfd, and a thread with them unblocked would swallow them. A new
     * thread inherits the creator's mask: block all around the create. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int pe = pthread_create(&s->ka, NULL, keepalive, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (pe != 0) {
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
            p3d_plugin_say(msg, cap, "etcd at %s: node rank %d of job %s is taken (%srank/%d exists): another agent has it, "
                          "or a previous job with the same --job-id (its keys expire %d s after it ended)",
                s->url, o_node_rank, job, s->prefix, o_node_rank, LEASE_TTL);
        else
            p3d_plugin_say(msg, cap, "etcd at %s: all %d node ranks of job %s are taken (%srank/0..%d): more agents than "
                          "--nnodes, or a previous job with the same --job-id (its keys expire %d s after it ended)",
                s->url, o_nnodes, job, s->prefix, o_nnodes - 1, LEASE_TTL);
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
    cJSON_Delete(j);
    if (rc != 1)
        state_free(s);
    return rc;
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
    char *seen = calloc((size_t)s->nnodes, 1);
    int rc = -1, nseen = 0;
    double pause = 0.01;
    if (!keys || !vals || !seen) {
        p3d_plugin_say(msg, cap, "out of memory");
        goto out;
    }
    for (;;) {
        int n = range(s, from, to, keys, vals, max, msg, cap);
        if (n < 0) {
            char m2[900];
            snprintf(m2, sizeof m2, "%s", msg);
            s->lost = 1;
            p3d_plugin_say(msg, cap, "lost etcd during the rendezvous (node rank %d, job prefix %s, waiting for %s): %s", s->rank,
                s->prefix, leader ? "the other nodes to register" : "the leader's endpoint", m2);
            goto out;
        }
        /* seen: every rank registered at some poll. An agent that went
         * away since is the TCP rendezvous's business; and a timeout must
         * not blame the ranks that timed out first and revoked. */
        for (int i = 0; i < n; i++) {
            if (!strcmp(keys[i], lkey) && !leader && !*val) {
                *val = vals[i];
                vals[i] = NULL;
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
        if (mono() + pause > s->deadline)
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
    p3d_plugin_say(msg, cap, "etcd at %s: timed out after %.1f s: %d/%d nodes registered under %srank/; never arrived: %s",
        s->url, s->timeout, nseen, s->nnodes, s->prefix,
        shown ? miss : "none (but the leader, node[0], never published its endpoint)");
out:
    free(keys);
    free(vals);
    free(seen);
    return rc;
}

static int etcd_publish(void *state, p3d_rdzv_boot *b, char *msg, size_t cap)
{
    etcd_state *s = state;
    char *val = NULL;
    if (b->node_rank == 0) {
        if (wait_for(s, 1, NULL, msg, cap) < 0)
            return -1;
        /* Anyone who can read this etcd prefix can read the token: see
         * docs/multinode.md, "Threat model" (use etcd auth/TLS or
         * --rdzv-token-file). */
        char lkey[256], blob[600];
        snprintf(lkey, sizeof lkey, "%sleader", s->prefix);
        snprintf(blob, sizeof blob, "%d %s %s", b->leader_port, b->leader_host, b->token);
        if (kv_write(s, lkey, blob, 0, msg, cap) < 0) {
            s->lost = 1;
            char m2[900];
            snprintf(m2, sizeof m2, "%s", msg);
            return p3d_plugin_say(msg, cap, "lost etcd during the rendezvous (publishing the leader's endpoint): %s", m2);
        }
        return 0;
    }
    if (wait_for(s, 0, &val, msg, cap) < 0)
        return -1;
    int port = 0;
    char host[256] = "", tok[256] = "";
    int n = sscanf(val, "%d %255s %255s", &port, host, tok);
    free(val);
    if (n < 2 || port < 1 || port > 65535)
        return p3d_plugin_say(msg, cap, "etcd at %s: %sleader: malformed (expected \"PORT HOST TOKEN\")", s->url, s->prefix);
    b->leader_port = port;
    snprintf(b->leader_host, sizeof b->leader_host, "%s", host);
    /* a token given locally (--rdzv-token-file, P3D_RDZV_TOKEN) wins: the
     * leader must then have the same one */
    if (!b->token[0])
        snprintf(b->token, sizeof b->token, "%s", tok);
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
};

P3D_PLUGIN_EXPORT(rdzv, etcd, P3D_PLUGIN_RDZV, &ops);
