/*
 * sha256.h — SHA-256 (FIPS 180-4) for --policy-sha256 pins (private to
 * placement/). Small and dependency-free so the core needs no crypto
 * library; speed is irrelevant for policy files of a few KiB.
 */
#ifndef P3D_SHA256_H
#define P3D_SHA256_H

#include <stddef.h>
#include <stdint.h>

/* Digest of len bytes at data into out[32]. */
void p3d_sha256(const void *data, size_t len, uint8_t out[32]);
/* The same as 64 lower-case hex digits plus NUL in hex[65]. */
void p3d_sha256_hex(const void *data, size_t len, char hex[65]);

#endif
