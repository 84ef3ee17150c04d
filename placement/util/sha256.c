/* SPDX-License-Identifier: BSD-3-Clause */
/* sha256.c — SHA-256 and HMAC-SHA256 through libcrypto's one-shot calls. */
#include "sha256.h"

#include <openssl/evp.h>
#include <stdio.h>

int p3d_sha256_hex(const void *data, size_t len, char hex[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    hex[0] = 0;
    if (EVP_Digest(data, len, md, &n, EVP_sha256(), NULL) != 1 || n != 32)
        return -1;
    for (unsigned i = 0; i < n; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    return 0;
}

int p3d_hmac_sha256_hex(const void *key, size_t klen, const void *data, size_t len, char hex[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    size_t n = 0;
    hex[0] = 0;
    if (!EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, key, klen, data, len, md, sizeof md, &n) || n != 32)
        return -1;
    for (size_t i = 0; i < n; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    return 0;
}
