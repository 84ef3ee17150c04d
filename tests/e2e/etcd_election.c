/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * etcd_election.c — the harness of tests/e2e/etcd_election.sh: the etcd
 * rendezvous plugin's leadership ops (campaign, keep, notify_fd, news; see
 * p3d/plugin.h) against a real etcd, three agents (node ranks 0..2, lease
 * TTL 2 s) in one process.
 *
 *   etcd_election PLUGIN.so URL [ETCD_PID]
 *
 * The plugin is loaded with dlopen like par3drun does; the harness reads
 * and revokes behind the agents' backs through the plugin's own wire code
 * (etcd_http.c, linked in). With ETCD_PID the harness also freezes etcd
 * (SIGSTOP, then SIGCONT) for the "etcd away" cases. Prints one line per
 * check ("ok: ..." or "FAIL: ..."); exits 1 when any failed.
 */
#include "p3d/plugin.h"
#include "etcd_int.h"

#include <dlfcn.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TTL 2
#define KEPT "restart 0 hash abc lost - excluded - spares 2"
#define TOKEN "tok-secret"

typedef struct agent {
    void *st;
    p3d_rdzv_boot b;
    int rc;
    char msg[ETCD_NEWS_MSG];
} agent;

static const p3d_rdzv_ops *R;
static const char *URL;
static char PREFIX[160];
static CURL *H;
static agent A[3];
static int fails;

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...)
{
    va_list ap;
    printf("%s: ", ok ? "ok" : "FAIL");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    fails += !ok;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void pause_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* ---- etcd behind the agents' backs -------------------------------------------- */

/* <PREFIX>name: 1 with *val (malloc'd) and *lease, 0 absent, -1 error. */
static int kv_get(const char *name, char **val, long long *lease)
{
    char key[256], body[512], msg[700];
    cJSON *j = NULL;
    snprintf(key, sizeof key, "%s%s", PREFIX, name);
    char *k = etcd_b64_enc(key, strlen(key));
    snprintf(body, sizeof body, "{\"key\":\"%s\"}", k);
    free(k);
    *val = NULL;
    *lease = 0;
    if (etcd_post(H, URL, "/v3/kv/range", body, 2.0, &j, msg, sizeof msg) < 0) {
        printf("  (%s)\n", msg);
        return -1;
    }
    const cJSON *kv = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "kvs"), 0);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(kv, "value");
    int rc = kv != NULL;
    if (kv) {
        *val = cJSON_IsString(v) ? etcd_b64_dec(v->valuestring) : strdup("");
        *lease = etcd_num(kv, "lease");
    }
    cJSON_Delete(j);
    return rc;
}

/* POSTs {"ID": id} to path; the reply's field f (0 when absent or on error). */
static long long lease_call(const char *path, long long id, const char *f)
{
    char body[64], msg[700];
    cJSON *j = NULL;
    long long v = 0;
    snprintf(body, sizeof body, "{\"ID\":\"%lld\"}", id);
    if (etcd_post(H, URL, path, body, 2.0, &j, msg, sizeof msg) < 0)
        printf("  (%s)\n", msg);
    else
        v = etcd_num(j, f);
    cJSON_Delete(j);
    return v;
}

static long long lease_of_rank(int r)
{
    char name[32], *v = NULL;
    long long lease = 0;
    snprintf(name, sizeof name, "rank/%d", r);
    kv_get(name, &v, &lease);
    free(v);
    return lease;
}

/* Waits (<= secs) until <PREFIX>name holds want: 1 yes, 0 no (*got: the
 * last value seen, malloc'd or NULL). */
static int wait_value(const char *name, const char *want, double secs, char **got, long long *lease)
{
    double end = now() + secs;
    for (;;) {
        int k = kv_get(name, got, lease);
        if (k == 1 && !strcmp(*got, want))
            return 1;
        if (now() > end)
            return 0;
        free(*got);
        *got = NULL;
        pause_s(0.05);
    }
}

/* ---- the agents ------------------------------------------------------------------ */

/* Waits (<= secs) on notify_fd, then takes one piece of news into a->msg;
 * *took: the seconds it took. */
static int wait_news(agent *a, double secs, double *took)
{
    double t0 = now(), end = t0 + secs;
    int kind = P3D_RDZV_NEWS_NONE;
    struct pollfd p = {R->notify_fd(a->st), POLLIN, 0};
    a->msg[0] = 0;
    while (kind == P3D_RDZV_NEWS_NONE) {
        double left = end - now();
        if (left <= 0 || poll(&p, 1, (int)(left * 1000) + 1) <= 0)
            break;
        kind = R->news(a->st, a->msg, sizeof a->msg);
    }
    if (took)
        *took = now() - t0;
    return kind;
}

static int readable(agent *a)
{
    struct pollfd p = {R->notify_fd(a->st), POLLIN, 0};
    return poll(&p, 1, 0) > 0;
}

static const char *kind_name(int k)
{
    static const char *names[] = {"NONE", "WON", "NOT_WON", "LEASE_LOST"};
    return k >= 0 && k <= 3 ? names[k] : "?";
}

static void *publish_one(void *arg)
{
    agent *a = arg;
    a->rc = R->publish(a->st, &a->b, a->msg, sizeof a->msg);
    return NULL;
}

static int detect_all(const char *job)
{
    for (int i = 0; i < 3; i++) {
        agent *a = &A[i];
        a->b.lease_ttl = TTL;
        snprintf(a->b.job_id, sizeof a->b.job_id, "%s", job);
        if (i == 0) {
            a->b.leader_port = 4242;
            snprintf(a->b.leader_host, sizeof a->b.leader_host, "127.0.0.1");
        }
        /* every agent brings the job key: etcd holds none */
        snprintf(a->b.token, sizeof a->b.token, TOKEN);
        int rc = R->detect(URL, 3, i, 20.0, &a->b, &a->st, a->msg, sizeof a->msg);
        check(rc == 1 && a->b.node_rank == i, "detect node rank %d: %d (%s)", i, rc, rc == 1 ? "" : a->msg);
        if (rc != 1)
            return -1;
    }
    return 0;
}

static int publish_all(void)
{
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, publish_one, &A[i]);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    int ok = 1;
    for (int i = 0; i < 3; i++)
        ok = ok && A[i].rc == 0;
    check(ok && A[1].b.leader_port == 4242 && A[2].b.leader_port == 4242, "publish on all three: leader port %d",
          A[1].b.leader_port);
    return ok ? 0 : -1;
}

static void stop_agent(int i)
{
    if (A[i].st)
        R->close(A[i].st);
    A[i].st = NULL;
}

/* ---- the cases -------------------------------------------------------------------- */

/* before publish(): the agent has no job key yet to sign the leadership
 * with, so a campaign is refused at once (a par3drun agent always
 * publishes first) */
static void case_ahead(void)
{
    agent *a = &A[2];
    int one = 1;
    int rc = R->campaign(a->st, &one, 1, "6060 127.0.0.1", now() + 1.0, a->msg, sizeof a->msg);
    check(rc < 0 && strstr(a->msg, "before publish"), "campaign before publish() refused: %s", a->msg);
}

/* Puts <PREFIX>leader = val held by a lease of its own (a stranger that
 * can write etcd): 0, or -1. */
static int squat(const char *val)
{
    char key[256], *body = NULL, msg[700];
    cJSON *j = NULL;
    int rc = -1;
    if (etcd_post(H, URL, "/v3/lease/grant", "{\"TTL\":30}", 2.0, &j, msg, sizeof msg) < 0)
        return -1;
    long long id = etcd_num(j, "ID");
    cJSON_Delete(j);
    j = NULL;
    snprintf(key, sizeof key, "%sleader", PREFIX);
    char *k = etcd_b64_enc(key, strlen(key)), *v = etcd_b64_enc(val, strlen(val));
    if (k && v && asprintf(&body, "{\"key\":\"%s\",\"value\":\"%s\",\"lease\":\"%lld\"}", k, v, id) >= 0)
        rc = etcd_post(H, URL, "/v3/kv/put", body, 2.0, &j, msg, sizeof msg);
    cJSON_Delete(j);
    free(body);
    free(k);
    free(v);
    return rc < 0 ? -1 : 0;
}

/* (f) a squatter replaces the live leader's key (its own lease, a value
 * not signed with the job key, pointing elsewhere): the leader notices
 * within a keepalive period and puts its own signed value back */
static void case_squatter(void)
{
    char *mine = NULL, *got = NULL;
    long long lease = 0, l2 = 0;
    kv_get("leader", &mine, &lease);
    check(mine && squat("9999 10.0.0.9 restart 1 node 1") == 0, "(f) a stranger put %sleader with its own lease",
          PREFIX);
    int back = mine && wait_value("leader", mine, 3 * TTL + 2, &got, &l2);
    check(back && l2 == lease, "(f) the leader put its value back (\"%s\", lease %lld; want lease %lld)",
          got ? got : "(none)", l2, lease);
    free(mine);
    free(got);
}

static void case_bounds(void)
{
    agent *a = &A[2];
    char big[5000];
    int many[65] = {0}, five = 5;
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    check(R->campaign(a->st, many, 65, "v", now() + 1, a->msg, sizeof a->msg) < 0,
          "campaign with 65 node ranks ahead refused: %s", a->msg);
    check(R->campaign(a->st, &five, 1, "v", now() + 1, a->msg, sizeof a->msg) < 0,
          "campaign with node rank 5 of 3 ahead refused: %s", a->msg);
    big[1025] = 0;
    check(R->campaign(a->st, NULL, 0, big, now() + 1, a->msg, sizeof a->msg) < 0,
          "campaign with a 1025-byte value refused: %s", a->msg);
    big[1025] = 'x';
    big[4097] = 0;
    check(R->keep(a->st, big, a->msg, sizeof a->msg) < 0, "keep of 4097 bytes refused: %s", a->msg);
    check(R->notify_fd(a->st) >= 0 && !readable(a), "notify_fd %d, not readable without news", R->notify_fd(a->st));
    check(R->news(a->st, a->msg, sizeof a->msg) == P3D_RDZV_NEWS_NONE, "news: NONE before anything happened");
    long long l0 = lease_of_rank(0);
    long long ttl = lease_call("/v3/lease/timetolive", l0, "grantedTTL");
    check(ttl == TTL, "lease %lld of node rank 0 granted with TTL %lld s (lease_ttl %d)", l0, ttl, TTL);
}

/* (a) the leadership is held: no win, and a replaced bid says nothing */
static void case_held(void)
{
    agent *a = &A[2];
    int one = 1;
    double took;
    R->campaign(a->st, &one, 1, "6262 127.0.0.1 restart 1 node 2", now() + 60, a->msg, sizeof a->msg);
    int rc = R->campaign(a->st, &one, 1, "6262 127.0.0.1 restart 1 node 2", now() + 1.5, a->msg,
                         sizeof a->msg);
    int k = wait_news(a, 3.0, &took);
    check(rc == 0 && k == P3D_RDZV_NEWS_NOT_WON && took > 1.2 && took < 2.6,
          "(a) node rank 2 before={1}, leader alive: %s after %.2f s (the replacing bid's deadline, 1.5 s): %s",
          kind_name(k), took, a->msg);
    check(strstr(a->msg, "the leadership is held by 127.0.0.1:4242") && !strstr(a->msg, TOKEN),
          "(a) NOT_WON names the holder, not its token");
    check(!readable(a), "(a) notify_fd not readable once the news is taken");
    k = wait_news(a, 0.6, NULL);
    check(k == P3D_RDZV_NEWS_NONE, "(a) the replaced bid (60 s) says nothing: %s", kind_name(k));
}

/* (b) the leader keeps its state; the newest text wins; it is held with
 * the job lease, not the leader's own (that one goes with the leader) */
static long long job_lease;
static void case_keep(void)
{
    char *got = NULL;
    long long lease = 0;
    int r1 = R->keep(A[0].st, "restart 0 older", A[0].msg, sizeof A[0].msg);
    int r2 = R->keep(A[0].st, KEPT, A[0].msg, sizeof A[0].msg);
    int ok = wait_value("state", KEPT, 3.0, &got, &lease);
    check(r1 == 0 && r2 == 0 && ok && lease && lease != lease_of_rank(0),
          "(b) node rank 0 keep(): %sstate = \"%s\" with the job lease %lld (node rank 0's own is %lld)", PREFIX,
          got ? got : "(none)", lease, lease_of_rank(0));
    job_lease = lease;
    free(got);
}

/* (c) the leader's lease lapses (revoked behind its back, as etcd drops a
 * dead agent's): its successor wins with the text it kept, which outlived
 * that lease, and adopts the job lease; the node behind it does not win
 * (its successor is alive) */
static void case_succession(void)
{
    const char *v1 = "5151 127.0.0.1 restart 1 node 1";
    int one = 1;
    double took;
    R->campaign(A[1].st, NULL, 0, v1, now() + 5, A[1].msg, sizeof A[1].msg);
    R->campaign(A[2].st, &one, 1, "6161 127.0.0.1 restart 1 node 2", now() + 3, A[2].msg,
                sizeof A[2].msg);
    int k = wait_news(&A[1], 0.7, NULL);
    check(k == P3D_RDZV_NEWS_NONE, "(c) node rank 1 not elected while node rank 0 leads: %s", kind_name(k));
    lease_call("/v3/lease/revoke", lease_of_rank(0), "none");
    k = wait_news(&A[1], 3.0, &took);
    check(k == P3D_RDZV_NEWS_WON && !strcmp(A[1].msg, KEPT),
          "(c) node rank 0's lease gone: node rank 1 %s after %.2f s with the kept text \"%s\"", kind_name(k), took,
          A[1].msg);
    k = wait_news(&A[2], 4.0, &took);
    check(k == P3D_RDZV_NEWS_NOT_WON &&
              (strstr(A[2].msg, "node rank 1 is still alive") || strstr(A[2].msg, "held by 127.0.0.1:5151")),
          "(c) node rank 2 before={1}: %s: %s", kind_name(k), A[2].msg);
    char *got = NULL;
    long long lease = 0;
    kv_get("leader", &got, &lease);
    /* the value as bid, signed with the job key (no token in it) */
    check(got && !strncmp(got, v1, strlen(v1)) && !strncmp(got + strlen(v1), " sig=", 5) &&
              strlen(got + strlen(v1)) == 69 && !strstr(got, TOKEN) && lease == lease_of_rank(1),
          "(c) %sleader = \"%s\" (signed) with node rank 1's lease", PREFIX, got ? got : "(none)");
    free(got);
    R->keep(A[1].st, "restart 1 hash def", A[1].msg, sizeof A[1].msg);
    got = NULL;
    check(wait_value("state", "restart 1 hash def", 3.0, &got, &lease) && lease == job_lease,
          "(c) the new leader keeps its state with the job lease it adopted (%lld)", lease);
    free(got);
}

/* (d) a lease revoked behind the agent's back: LEASE_LOST; then a close
 * with a bid still running ends at once */
static void case_revoked(void)
{
    double took;
    long long l2 = lease_of_rank(2);
    lease_call("/v3/lease/revoke", l2, "none");
    int k = wait_news(&A[2], TTL + 2, &took);
    check(k == P3D_RDZV_NEWS_LEASE_LOST && strstr(A[2].msg, "has expired or was revoked"),
          "(d) lease %lld of node rank 2 revoked: %s after %.2f s: %s", l2, kind_name(k), took, A[2].msg);
    R->campaign(A[2].st, NULL, 0, "7171 127.0.0.1", now() + 60, A[2].msg, sizeof A[2].msg);
    pause_s(0.3);
    double t0 = now();
    stop_agent(2);
    check(now() - t0 < 3.0, "(d) close with a bid running took %.2f s", now() - t0);
}

/* (e) etcd frozen: a campaign keeps trying to its deadline, and the lease
 * nobody could renew for a TTL is lost */
static void case_frozen(pid_t etcd)
{
    agent *a = &A[1];
    int won = 0, lost = 0;
    double t0 = now(), t_not = 0, t_lost = 0;
    kill(etcd, SIGSTOP);
    R->campaign(a->st, NULL, 0, "8181 127.0.0.1", t0 + 2.0, a->msg, sizeof a->msg);
    char why_not[ETCD_NEWS_MSG] = "", why_lost[ETCD_NEWS_MSG] = "";
    while ((!won || !lost) && now() < t0 + 8) {
        int k = wait_news(a, t0 + 8 - now(), NULL);
        if (k == P3D_RDZV_NEWS_NOT_WON && !won)
            won = 1, t_not = now() - t0, snprintf(why_not, sizeof why_not, "%s", a->msg);
        if (k == P3D_RDZV_NEWS_LEASE_LOST && !lost)
            lost = 1, t_lost = now() - t0, snprintf(why_lost, sizeof why_lost, "%s", a->msg);
    }
    kill(etcd, SIGCONT);
    check(won && t_not > 1.8 && strstr(why_not, "/v3/kv/txn"), "(e) etcd frozen: NOT_WON after %.2f s (deadline 2 s): %s",
          t_not, why_not);
    check(lost && strstr(why_lost, "not renewed for"), "(e) etcd frozen: LEASE_LOST after %.2f s: %s", t_lost,
          why_lost);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s PLUGIN.so ETCD_URL [ETCD_PID]\n", argv[0]);
        return 2;
    }
    URL = argv[2];
    void *dl = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    const p3d_plugin *p = dl ? dlsym(dl, "p3d_rdzv_etcd") : NULL;
    if (!p || p->abi != P3D_PLUGIN_ABI || p->kind != P3D_PLUGIN_RDZV) {
        fprintf(stderr, "etcd_election: %s: %s\n", argv[1], dl ? "no p3d_rdzv_etcd of this ABI" : dlerror());
        return 2;
    }
    R = p->ops;
    if (!R->campaign || !R->keep || !R->notify_fd || !R->news) {
        fprintf(stderr, "etcd_election: %s: the leadership ops are missing\n", argv[1]);
        return 2;
    }
    char job[64];
    snprintf(job, sizeof job, "el-%d-%ld", (int)getpid(), (long)time(NULL));
    snprintf(PREFIX, sizeof PREFIX, "/par3drun/%s/", job);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    H = curl_easy_init();
    int up = detect_all(job) == 0;
    if (up)
        case_ahead(); /* before the leader key exists */
    if (up && publish_all() == 0) {
        case_bounds();
        case_held();
        case_keep();
        case_succession();
        case_squatter();
        case_revoked();
        if (argc > 3)
            case_frozen((pid_t)atoi(argv[3]));
    }
    for (int i = 0; i < 3; i++)
        stop_agent(i);
    curl_easy_cleanup(H);
    curl_global_cleanup();
    printf("%s: %d check(s) failed\n", fails ? "FAIL" : "ok", fails);
    return fails ? 1 : 0;
}
