/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * etcd_sign.c — the leader key's value is signed with the job key, so
 * whoever can write etcd cannot point the agents at a listener of its own
 * nor block an election with a value of its own (docs/multinode.md,
 * "Security"). etcd holds no secret: the key comes from each node's
 * --rdzv-token-file or P3D_RDZV_TOKEN.
 *
 *   value = FIELDS " sig=" HEX(HMAC-SHA256(K, "p3d-etcd-leader" 0 PREFIX 0 FIELDS))
 *
 * The job prefix is in the MAC: a value signed for one job does not pass
 * under another job's prefix that shares the key.
 */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <string.h>

#include "etcd_int.h"

#define SIG_TAG " sig="

static int mac(const etcd_state *s, const char *fields, size_t n, unsigned char out[32])
{
    unsigned char buf[ETCD_VALUE_MAX + 256];
    static const char label[] = "p3d-etcd-leader";
    size_t lp = strlen(s->prefix);
    if (sizeof label + lp + 1 + n > sizeof buf || !s->key[0])
        return -1;
    memcpy(buf, label, sizeof label); /* with its NUL: the separator */
    memcpy(buf + sizeof label, s->prefix, lp + 1);
    memcpy(buf + sizeof label + lp + 1, fields, n);
    unsigned int len = 0;
    return HMAC(EVP_sha256(), s->key, (int)strlen(s->key), buf, sizeof label + lp + 1 + n, out, &len) && len == 32 ? 0
                                                                                                                   : -1;
}

int etcd_sign(const etcd_state *s, const char *fields, char *out, size_t cap)
{
    unsigned char m[32];
    size_t n = strlen(fields);
    if (mac(s, fields, n, m) < 0 || n + sizeof SIG_TAG + 64 > cap)
        return -1;
    memcpy(out, fields, n);
    memcpy(out + n, SIG_TAG, sizeof SIG_TAG - 1);
    n += sizeof SIG_TAG - 1;
    for (int i = 0; i < 32; i++)
        snprintf(out + n + 2 * (size_t)i, 3, "%02x", m[i]);
    return 0;
}

int etcd_verify(const etcd_state *s, const char *val, char *fields, size_t cap)
{
    const char *sig = strstr(val, SIG_TAG);
    while (sig && strstr(sig + 1, SIG_TAG))
        sig = strstr(sig + 1, SIG_TAG); /* the last one: fields never hold one in a valid value */
    if (!sig)
        return -1;
    size_t n = (size_t)(sig - val);
    const char *hex = sig + sizeof SIG_TAG - 1;
    unsigned char want[32], got[32];
    if (strlen(hex) != 64 || n >= cap || mac(s, val, n, want) < 0)
        return -1;
    for (int i = 0; i < 32; i++) {
        unsigned v = 0;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            return -1;
        got[i] = (unsigned char)v;
    }
    if (CRYPTO_memcmp(want, got, 32) != 0)
        return -1;
    memcpy(fields, val, n);
    fields[n] = '\0';
    return 0;
}
