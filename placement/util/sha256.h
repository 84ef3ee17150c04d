/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sha256.h — SHA-256 for --policy-sha256 pins and HMAC-SHA256 for the
 * topology cache (private to placement/), from
 * OpenSSL's libcrypto (already on every machine that has libcurl).
 */
#ifndef P3D_SHA256_H
#define P3D_SHA256_H

#include <stddef.h>

/* The digest of len bytes at data as 64 lower-case hex digits plus NUL in
 * hex[65]. 0, or -1 when libcrypto cannot compute it (hex is then ""). */
int p3d_sha256_hex(const void *data, size_t len, char hex[65]);

/* HMAC-SHA256 of len bytes at data under key[0..klen), as 64 lower-case
 * hex digits plus NUL in hex[65] (the topology cache's entries). 0, or -1
 * (hex is then ""). */
int p3d_hmac_sha256_hex(const void *key, size_t klen, const void *data, size_t len, char hex[65]);

#endif
