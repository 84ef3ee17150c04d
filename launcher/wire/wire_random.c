/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire_random.c — random hex for the job's secrets and names: the job
 * token, a generated job id, the --emulate preflight ring's key. In the
 * wire stage, beside the handshake's nonces, so that every stage above
 * takes its randomness from the one place: the kernel's CSPRNG
 * (getrandom(2), which blocks until the pool is seeded; the source
 * OpenSSL's own generator seeds from), and a failure is said, never
 * papered over with a guessable fallback. Not RAND_bytes: its first call
 * reads openssl.cnf and sets up the DRBG, about 2 ms of every one-node
 * launch that needs nothing else of OpenSSL (bench/launch.sh).
 */
#include "wire.h"

#include <errno.h>
#include <stdio.h>
#include <sys/random.h>

int p3d_random_hex(char *out, size_t nbytes)
{
    unsigned char r[64];
    if (nbytes > sizeof r)
        nbytes = sizeof r;
    for (size_t got = 0; got < nbytes;) {
        ssize_t n = getrandom(r + got, nbytes - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            out[0] = 0;
            return -1;
        }
        got += (size_t)n;
    }
    for (size_t i = 0; i < nbytes; i++)
        snprintf(out + 2 * i, 3, "%02x", r[i]);
    return 0;
}
