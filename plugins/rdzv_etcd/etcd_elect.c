/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * etcd_elect.c — p3d_rdzv_etcd.so's leadership (p3d_rdzv_ops campaign,
 * keep, notify_fd, news), under the job prefix /par3drun/<job-id>/:
 *
 *   leader  the leadership, held with the leader's lease: "PORT HOST ...
 *           sig=HEX", signed with the job key (etcd_sign.c; publish()
 *           puts node rank 0's; a campaign puts its value)
 *   state   one line the leader keeps current for its successor (keep()),
 *           held with the *job lease*: not the leader's own, which lapses
 *           when it dies and would take the state with it. The first
 *           keep() grants it (TTL 2 x the agents' + 10 s), the successor
 *           that wins adopts it (the lease of the state key it reads) and
 *           renews it from then on, the leader revokes it at its end; a job
 *           whose every agent died leaves it to lapse.
 *   rank/K  node rank K's registration, held with its agent's lease
 *
 * A campaign is one transaction, tried every 0.2 s until its deadline:
 * "if leader and every rank/K of the ranks ahead do not exist, put leader
 * with my lease and read state". etcd's quorum decides: two successors
 * cannot both win, and one cannot win while the old leader's lease, or a
 * node ahead of it in the succession, is still alive. The failure branch
 * reads the same keys, to say why (etcd does not say which compare
 * failed).
 *
 * The answers are news: a small FIFO under the state's mutex and a
 * self-pipe that is readable while the FIFO is not empty, for the
 * launcher's event loop. The campaign runs on its own thread (own CURL
 * handle), started by the first bid; keep()'s text is put by the
 * keepalive thread (rdzv_etcd.c). The caller never waits on etcd.
 */
#include "p3d/plugin.h"
#include "etcd_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RETRY_EVERY 0.2 /* s between two tries of a campaign */

/* ---- the job lease --------------------------------------------------------- */

static long long job_lease(etcd_state *s)
{
    pthread_mutex_lock(&s->mu);
    long long id = s->jlease;
    pthread_mutex_unlock(&s->mu);
    return id;
}

static void set_job_lease(etcd_state *s, long long id)
{
    pthread_mutex_lock(&s->mu);
    s->jlease = id;
    pthread_mutex_unlock(&s->mu);
}

/* A new job lease through h: its ID, or 0 with msg. */
static long long job_grant(etcd_state *s, CURL *h, char *msg, size_t cap)
{
    long long id = etcd_lease_grant(s, h, 2 * s->ttl + 10, 2.0, NULL, msg, cap);
    return id > 0 ? id : 0;
}

void etcd_job_renew(etcd_state *s, CURL *h)
{
    char msg[700];
    long long id = job_lease(s);
    if (!id || !h || etcd_lease_renew(s, h, id, msg, sizeof msg) >= 0)
        return;
    pthread_mutex_lock(&s->mu);
    if (s->jlease == id)
        s->jlease = 0; /* lapsed or revoked (an old leader's end): the next keep() grants one */
    pthread_mutex_unlock(&s->mu);
}

void etcd_job_revoke(etcd_state *s)
{
    char msg[700];
    if (!s->jlease || !s->leads || s->lease_lost || !s->h)
        return;                                             /* not ours to end: the leader that holds it now does */
    etcd_lease_revoke(s, s->h, s->jlease, msg, sizeof msg); /* else it lapses */
}

/* ---- news ------------------------------------------------------------------ */

int etcd_elect_init(etcd_state *s, char *msg, size_t cap)
{
    int fd[2];
    if (pipe2(fd, O_NONBLOCK | O_CLOEXEC) < 0)
        return p3d_plugin_say(msg, cap, "etcd: cannot make the news pipe: %s", strerror(errno));
    s->pipe_rd = fd[0];
    s->pipe_wr = fd[1];
    return 0;
}

void etcd_elect_free(etcd_state *s)
{
    if (s->camp_up) {
        pthread_mutex_lock(&s->mu);
        s->camp_stop = 1;
        pthread_cond_signal(&s->camp_cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->camp, NULL);
        s->camp_up = 0;
    }
    if (s->pipe_rd >= 0)
        close(s->pipe_rd);
    if (s->pipe_wr >= 0)
        close(s->pipe_wr);
    s->pipe_rd = s->pipe_wr = -1;
    free(s->pending);
    s->pending = NULL;
}

/* The pipe holds one byte while the FIFO is not empty: written when the
 * first item comes, drained when the last one goes. So the fd is readable
 * exactly while there is news, however many items a poll() finds. */
void etcd_news_push(etcd_state *s, int kind, const char *fmt, ...)
{
    if (s->news_n == ETCD_NEWS_MAX) { /* nobody reads: the oldest goes */
        s->news_head = (s->news_head + 1) % ETCD_NEWS_MAX;
        s->news_n--;
    }
    etcd_news_item *it = &s->news[(s->news_head + s->news_n) % ETCD_NEWS_MAX];
    va_list ap;
    it->kind = kind;
    va_start(ap, fmt);
    vsnprintf(it->msg, sizeof it->msg, fmt, ap);
    va_end(ap);
    if (s->news_n++ == 0 && s->pipe_wr >= 0 && write(s->pipe_wr, "n", 1) < 0) {
        /* full or closed: the fd is readable all the same, or gone */
    }
}

int etcd_news(void *state, char *msg, size_t cap)
{
    etcd_state *s = state;
    int kind = P3D_RDZV_NEWS_NONE;
    char drain[64];
    if (cap)
        msg[0] = 0;
    pthread_mutex_lock(&s->mu);
    if (s->news_n > 0) {
        etcd_news_item *it = &s->news[s->news_head];
        kind = it->kind;
        if (cap)
            snprintf(msg, cap, "%s", it->msg);
        s->news_head = (s->news_head + 1) % ETCD_NEWS_MAX;
        if (--s->news_n == 0)
            while (read(s->pipe_rd, drain, sizeof drain) > 0)
                ;
    }
    pthread_mutex_unlock(&s->mu);
    return kind;
}

int etcd_notify_fd(void *state)
{
    return ((etcd_state *)state)->pipe_rd; /* set before detect() returns, never changed */
}

/* ---- keep ------------------------------------------------------------------ */

int etcd_keep(void *state, const char *text, char *msg, size_t cap)
{
    etcd_state *s = state;
    size_t n = text ? strlen(text) : 0;
    if (!text)
        return p3d_plugin_say(msg, cap, "etcd: keep: no text");
    if (n > ETCD_KEEP_MAX)
        return p3d_plugin_say(msg, cap, "etcd: keep: the text is %zu bytes, at most %d fit in %sstate", n,
                              ETCD_KEEP_MAX, s->prefix);
    char *copy = strdup(text);
    if (!copy)
        return p3d_plugin_say(msg, cap, "out of memory");
    pthread_mutex_lock(&s->mu);
    free(s->pending); /* not put yet: the newest text wins */
    s->pending = copy;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

void etcd_keep_put(etcd_state *s, CURL *h, const char *text, int *warned)
{
    char key[256], msg[700] = "", *k, *v, *body = NULL;
    cJSON *j = NULL;
    int ok = 0;
    snprintf(key, sizeof key, "%sstate", s->prefix);
    k = etcd_b64_enc(key, strlen(key));
    v = etcd_b64_enc(text, strlen(text));
    /* twice at most: a job lease that lapsed meanwhile is granted anew */
    for (int round = 0; round < 2 && !ok; round++) {
        long long jl = h ? job_lease(s) : 0;
        if (h && !jl && (jl = job_grant(s, h, msg, sizeof msg)) != 0)
            set_job_lease(s, jl);
        free(body);
        body = NULL;
        cJSON_Delete(j);
        j = NULL;
        if (!h) {
            snprintf(msg, sizeof msg, "etcd at %s: curl_easy_init failed", s->url);
            break;
        }
        if (!jl)
            break; /* msg: why no lease */
        if (!k || !v || asprintf(&body, "{\"key\":\"%s\",\"value\":\"%s\",\"lease\":\"%lld\"}", k, v, jl) < 0) {
            body = NULL;
            snprintf(msg, sizeof msg, "out of memory");
            break;
        }
        ok = etcd_post(h, s->url, "/v3/kv/put", body, 2.0, &j, msg, sizeof msg) == 0;
        if (!ok && strstr(msg, "lease not found")) {
            pthread_mutex_lock(&s->mu);
            if (s->jlease == jl)
                s->jlease = 0;
            pthread_mutex_unlock(&s->mu);
        } else
            break;
    }
    /* like the keepalive: the job goes on without it, so say it once */
    if (!ok && !*warned) {
        fprintf(stderr,
                "par3drun: warning: %s: cannot keep the leader's state in etcd (%s; a successor starts from an "
                "older one, or none)\n",
                msg, key);
        *warned = 1;
    }
    cJSON_Delete(j);
    free(body);
    free(k);
    free(v);
}

/* ---- campaign ---------------------------------------------------------------- */

/* Appends a compare "key does not exist" of key (base64 k) to cmp, and a
 * range of it to fail (count_only: only whether it exists). */
static void txn_key(FILE *cmp, FILE *fail, const char *k, int count_only)
{
    fprintf(cmp, ",{\"key\":\"%s\",\"result\":\"EQUAL\",\"target\":\"CREATE\",\"create_revision\":\"0\"}", k);
    fprintf(fail, ",{\"request_range\":{\"key\":\"%s\"%s}}", k, count_only ? ",\"count_only\":true" : "");
}

/* The campaign's transaction as JSON (malloc'd; NULL: no memory):
 *   compare  leader and rank/<b> of every b ahead do not exist
 *   success  put leader = value with the lease; range state
 *   failure  range leader; range state; range rank/<b> (count only) */
static char *txn_body(const etcd_state *s, const etcd_bid *bid)
{
    char key[256], *cmp = NULL, *fail = NULL, *out = NULL, *lk, *sk, *v;
    size_t nc = 0, nf = 0;
    snprintf(key, sizeof key, "%sleader", s->prefix);
    lk = etcd_b64_enc(key, strlen(key));
    snprintf(key, sizeof key, "%sstate", s->prefix);
    sk = etcd_b64_enc(key, strlen(key));
    v = etcd_b64_enc(bid->value, strlen(bid->value));
    FILE *fc = open_memstream(&cmp, &nc), *ff = open_memstream(&fail, &nf);
    int bad = !fc || !ff || !lk || !sk || !v;
    if (!bad) {
        txn_key(fc, ff, lk, 0);
        fprintf(ff, ",{\"request_range\":{\"key\":\"%s\"}}", sk);
    }
    for (int i = 0; i < bid->nbefore && !bad; i++) {
        snprintf(key, sizeof key, "%srank/%d", s->prefix, bid->before[i]);
        char *k = etcd_b64_enc(key, strlen(key));
        if (k)
            txn_key(fc, ff, k, 1);
        bad = !k;
        free(k);
    }
    if (fc)
        bad = fclose(fc) != 0 || bad;
    if (ff)
        bad = fclose(ff) != 0 || bad;
    /* cmp and fail start with a ',' */
    if (!bad && asprintf(&out,
                         "{\"compare\":[%s],\"success\":[{\"request_put\":{\"key\":\"%s\",\"value\":\"%s\","
                         "\"lease\":\"%lld\"}},{\"request_range\":{\"key\":\"%s\"}}],\"failure\":[%s]}",
                         cmp + 1, lk, v, s->lease, sk, fail + 1) < 0)
        out = NULL;
    free(cmp);
    free(fail);
    free(lk);
    free(sk);
    free(v);
    return out;
}

/* The i-th response of a transaction's reply, if it is a range. */
static const cJSON *resp_range(const cJSON *j, int i)
{
    const cJSON *r = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "responses"), i);
    return cJSON_GetObjectItemCaseSensitive(r, "response_range");
}

/* The lease that holds the one key a range read (0: none, or absent). */
static long long range_lease(const cJSON *range)
{
    return etcd_num(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(range, "kvs"), 0), "lease");
}

/* The value of the one key a range read, decoded (malloc'd); "" when the
 * key is absent or empty, NULL when it is not text (or no memory). */
static char *range_value(const cJSON *range)
{
    const cJSON *kv = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(range, "kvs"), 0);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(kv, "value");
    return cJSON_IsString(v) ? etcd_b64_dec(v->valuestring) : strdup("");
}

/* Why a transaction failed, from its failure branch's ranges: the leader
 * key first (who holds it: port and host, never the token), then the
 * first node rank ahead that is still registered. */
static void why_not(const etcd_state *s, const etcd_bid *bid, const cJSON *j, char *why, size_t cap)
{
    char *lv = range_value(resp_range(j, 0)), host[256] = "";
    int port = 0;
    if (lv && *lv) {
        if (sscanf(lv, "%d %255s", &port, host) == 2)
            snprintf(why, cap, "the leadership is held by %s:%d (%sleader)", host, port, s->prefix);
        else
            snprintf(why, cap, "the leadership is held (%sleader exists)", s->prefix);
        free(lv);
        return;
    }
    free(lv);
    for (int i = 0; i < bid->nbefore; i++)
        if (etcd_num(resp_range(j, 2 + i), "count") > 0) {
            snprintf(why, cap, "node rank %d is still alive in etcd (%srank/%d is held by its agent's lease)",
                     bid->before[i], s->prefix, bid->before[i]);
            return;
        }
    snprintf(why, cap, "the leadership or a node rank ahead changed during the transaction");
}

/* Why the leader key a range read is not a par3drun leader's: NULL when
 * it is (held by a lease, signed with the job key), else the reason. */
static const char *squat_reason(const etcd_state *s, const cJSON *range)
{
    if (range_lease(range) == 0)
        return "held by no lease (a plain put, by hand or by a stranger: no par3drun leader's)";
    char *v = range_value(range), fields[ETCD_VALUE_MAX + 1];
    int ok = v && etcd_verify(s, v, fields, sizeof fields) == 0;
    free(v);
    return ok ? NULL : "not signed with this job's key (a stranger's or another job's value)";
}

/* A leader key held by no lease, or not signed with the job key, was not
 * put by a par3drun leader of this job (each puts it signed, with its
 * lease, so it goes with its agent): a put by hand or by a stranger,
 * which would block every election for good. It is ignored, said, and
 * deleted if it is still the same revision. 1 when it was such a key. */
static int drop_squatter(etcd_state *s, CURL *h, const cJSON *range, double tmo)
{
    const cJSON *kv = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(range, "kvs"), 0);
    const char *why = kv ? squat_reason(s, range) : NULL;
    if (!why)
        return 0;
    char key[256], *body = NULL, msg[700];
    snprintf(key, sizeof key, "%sleader", s->prefix);
    char *lk = etcd_b64_enc(key, strlen(key));
    cJSON *j = NULL;
    if (lk && asprintf(&body,
                       "{\"compare\":[{\"key\":\"%s\",\"result\":\"EQUAL\",\"target\":\"MOD\","
                       "\"mod_revision\":\"%lld\"}],\"success\":[{\"request_delete_range\":{\"key\":"
                       "\"%s\"}}]}",
                       lk, etcd_num(kv, "mod_revision"), lk) < 0)
        body = NULL;
    int ok = body && etcd_post(h, s->url, "/v3/kv/txn", body, tmo < 2 ? tmo : 2, &j, msg, sizeof msg) == 0;
    fprintf(stderr, "par3drun: warning: etcd at %s: %sleader is %s: ignored%s\n", s->url, s->prefix, why,
            ok ? " and deleted" : ", not deleted (etcd refused)");
    cJSON_Delete(j);
    free(body);
    free(lk);
    return 1;
}

/* The live leader's look at its own key (the keepalive thread, each
 * period): a key that is gone, or holds another value or lease while
 * this agent leads, is a squatter's (a plain put, a stranger's lease)
 * that would point the agents elsewhere or block the next election. It
 * is said and put back, revision-checked (a txn that compares the
 * revision just read, so a real successor elected meanwhile is not
 * overwritten). *said: the revision last reported, said once each. */
void etcd_leader_check(etcd_state *s, CURL *h, long long *said)
{
    char mine[sizeof s->mine], key[256], msg[700], *body = NULL, *k = NULL, *v = NULL;
    cJSON *j = NULL, *t = NULL;
    pthread_mutex_lock(&s->mu);
    int leads = s->leads && !s->lease_lost;
    snprintf(mine, sizeof mine, "%s", s->mine);
    pthread_mutex_unlock(&s->mu);
    if (!leads || !mine[0] || !h)
        return;
    snprintf(key, sizeof key, "%sleader", s->prefix);
    k = etcd_b64_enc(key, strlen(key));
    if (!k || asprintf(&body, "{\"key\":\"%s\"}", k) < 0 ||
        etcd_post(h, s->url, "/v3/kv/range", body, 2.0, &j, msg, sizeof msg) < 0)
        goto out; /* etcd away: the lease's own warning says so */
    const cJSON *kv = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "kvs"), 0);
    char *cur = range_value(j);
    int same = kv && cur && !strcmp(cur, mine) && etcd_num(kv, "lease") == s->lease;
    free(cur);
    long long rev = kv ? etcd_num(kv, "mod_revision") : 0;
    if (same)
        goto out;
    v = etcd_b64_enc(mine, strlen(mine));
    free(body);
    body = NULL;
    if (v && asprintf(&body,
                      "{\"compare\":[{\"key\":\"%s\",\"result\":\"EQUAL\",\"target\":\"%s\",\"%s\":\"%lld\"}],"
                      "\"success\":[{\"request_put\":{\"key\":\"%s\",\"value\":\"%s\",\"lease\":\"%lld\"}}]}",
                      k, kv ? "MOD" : "CREATE", kv ? "mod_revision" : "create_revision", rev, k, v, s->lease) < 0)
        body = NULL;
    int ok = body && etcd_post(h, s->url, "/v3/kv/txn", body, 2.0, &t, msg, sizeof msg) == 0 &&
             cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(t, "succeeded"));
    if (*said != rev + 1) {
        fprintf(stderr,
                "par3drun: warning: etcd at %s: %sleader %s while this node leads (a squatter: a put by hand "
                "or by a stranger)%s\n",
                s->url, s->prefix, kv ? "holds another value or lease" : "is gone",
                ok ? ": put back" : ": not put back (it changed again, or etcd refused)");
        *said = rev + 1;
    }
out:
    cJSON_Delete(j);
    cJSON_Delete(t);
    free(body);
    free(k);
    free(v);
}

/* One try: 1 won (*kept: the state key's text, malloc'd), 0 not (why).
 * A failed try also reads the state key: the old leader's text, while its
 * lease still holds leader (*seen, replaced by each newer text). */
static int try_once(etcd_state *s, CURL *h, const etcd_bid *bid, char **kept, char **seen, char *why, size_t cap)
{
    char msg[700], *body = txn_body(s, bid);
    cJSON *j = NULL;
    int rc = 0;
    double tmo = bid->until - etcd_mono();
    *kept = NULL;
    if (!h || !body) {
        snprintf(why, cap, "%s", h ? "out of memory" : "curl_easy_init failed");
        goto out;
    }
    if (etcd_post(h, s->url, "/v3/kv/txn", body, tmo < 2 ? tmo : 2, &j, msg, sizeof msg) < 0) {
        snprintf(why, cap, "%s", etcd_why(s, msg)); /* etcd away: a reason to try again, not an end */
        goto out;
    }
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "succeeded"))) { /* proto3 omits false */
        if (drop_squatter(s, h, resp_range(j, 0), tmo)) {
            snprintf(why, cap,
                     "%sleader was a stranger's (no lease or no valid signature; deleted: the next try "
                     "may win)",
                     s->prefix);
            goto out;
        }
        char *st = range_value(resp_range(j, 1));
        if (st && *st) {
            free(*seen);
            *seen = st;
        } else
            free(st);
        why_not(s, bid, j, why, cap);
        goto out;
    }
    *kept = range_value(resp_range(j, 1));
    if (!*kept)
        *kept = strdup(""); /* not text: nothing a successor can use */
    /* the job lease holds the state: this node renews it from now on */
    long long jl = range_lease(resp_range(j, 1));
    pthread_mutex_lock(&s->mu);
    if (jl > 0 && jl != s->lease)
        s->jlease = jl;
    s->leads = 1;
    snprintf(s->mine, sizeof s->mine, "%s", bid->value); /* the keepalive thread checks it stays */
    pthread_mutex_unlock(&s->mu);
    rc = 1;
out:
    cJSON_Delete(j);
    free(body);
    return rc;
}

/* Runs the bid of generation gen until it wins, its deadline passes, or a
 * newer bid or close() ends it. Called and returns with mu held. */
static void run_bid(etcd_state *s, CURL *h, unsigned gen)
{
    etcd_bid bid = s->bid;
    char why[1024] = "", *kept = NULL, *seen = NULL;
    double t0 = etcd_mono();
    for (int tries = 1;; tries++) {
        pthread_mutex_unlock(&s->mu);
        int won = try_once(s, h, &bid, &kept, &seen, why, sizeof why);
        pthread_mutex_lock(&s->mu);
        if (won) {
            /* The state key goes with the old leader's lease, in the same
             * revision as leader: what a failed try saw of it is its last
             * text. This node leads even if a newer bid came meanwhile:
             * that one is moot now (it could only find leader held). */
            etcd_news_push(s, P3D_RDZV_NEWS_WON, "%s", kept && *kept ? kept : seen ? seen : "");
            s->bid_on = 0;
            break;
        }
        if (s->camp_stop || s->bid_gen != gen)
            break; /* replaced: its end is nobody's news */
        double now = etcd_mono();
        if (now >= bid.until) {
            etcd_news_push(s, P3D_RDZV_NEWS_NOT_WON,
                           "etcd at %s: node rank %d was not elected within %.1f s (%d %s for %sleader): %s", s->url,
                           s->rank, bid.until > t0 ? bid.until - t0 : 0.0, tries, tries == 1 ? "try" : "tries",
                           s->prefix, why);
            s->bid_on = 0;
            break;
        }
        struct timespec ts = etcd_abstime(now + RETRY_EVERY < bid.until ? now + RETRY_EVERY : bid.until);
        while (!s->camp_stop && s->bid_gen == gen && pthread_cond_timedwait(&s->camp_cv, &s->mu, &ts) == 0)
            ;
        if (s->camp_stop || s->bid_gen != gen)
            break;
    }
    free(kept);
    free(seen);
}

static void *campaigner(void *arg)
{
    etcd_state *s = arg;
    CURL *h = curl_easy_init();
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->camp_stop && !s->bid_on)
            pthread_cond_wait(&s->camp_cv, &s->mu);
        if (s->camp_stop)
            break;
        run_bid(s, h, s->bid_gen);
    }
    pthread_mutex_unlock(&s->mu);
    if (h)
        curl_easy_cleanup(h);
    return NULL;
}

/* Hands the bid to the campaign thread (started on the first one): a bid
 * still running is replaced at once, without waiting for its request. */
int etcd_campaign(void *state, const int *before, int nbefore, const char *value, double until, char *msg, size_t cap)
{
    etcd_state *s = state;
    int rc = -1;
    if (nbefore < 0 || nbefore > ETCD_BEFORE_MAX || (nbefore > 0 && !before))
        return p3d_plugin_say(msg, cap, "etcd: campaign: %d node ranks ahead, expected 0..%d", nbefore,
                              ETCD_BEFORE_MAX);
    for (int i = 0; i < nbefore; i++)
        if (before[i] < 0 || before[i] >= s->nnodes)
            return p3d_plugin_say(msg, cap, "etcd: campaign: node rank %d ahead: expected 0..%d", before[i],
                                  s->nnodes - 1);
    if (!value || strlen(value) > ETCD_VALUE_MAX - ETCD_SIG_LEN)
        return p3d_plugin_say(msg, cap, "etcd: campaign: the leadership's value is %s, expected at most %d bytes",
                              value ? "longer" : "missing", ETCD_VALUE_MAX - ETCD_SIG_LEN);
    if (!s->key[0])
        return p3d_plugin_say(msg, cap, "etcd: campaign before publish(): no job key to sign the leadership with");
    char signed_value[sizeof s->bid.value];
    if (etcd_sign(s, value, signed_value, sizeof signed_value) < 0)
        return p3d_plugin_say(msg, cap, "etcd: campaign: cannot sign the leadership's value");
    pthread_mutex_lock(&s->mu);
    if (nbefore > 0)
        memcpy(s->bid.before, before, (size_t)nbefore * sizeof *before);
    s->bid.nbefore = nbefore;
    snprintf(s->bid.value, sizeof s->bid.value, "%s", signed_value);
    s->bid.until = until;
    s->bid_gen++;
    s->bid_on = 1;
    if (!s->camp_up) {
        if (etcd_thread_start(&s->camp, campaigner, s) != 0) {
            s->bid_on = 0;
            p3d_plugin_say(msg, cap, "etcd: cannot start the campaign thread");
            goto out;
        }
        s->camp_up = 1;
    }
    pthread_cond_signal(&s->camp_cv);
    rc = 0;
out:
    pthread_mutex_unlock(&s->mu);
    return rc;
}
