/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire_random.c — random hex for the job's secrets and names: the job
 * token, a generated job id, the --emulate preflight ring's key. In the
 * wire stage, beside the handshake's nonces, so that every stage above
 * takes its randomness from the one place: OpenSSL's CSPRNG, and a failure
 * is said, never papered over with a guessable fallback.
 */
#include "wire.h"

#include <openssl/rand.h>
#include <stdio.h>

int p3d_random_hex(char *out, size_t nbytes)
{
    unsigned char r[64];
    if (nbytes > sizeof r)
        nbytes = sizeof r;
    if (RAND_bytes(r, (int)nbytes) != 1) {
        out[0] = 0;
        return -1;
    }
    for (size_t i = 0; i < nbytes; i++)
        snprintf(out + 2 * i, 3, "%02x", r[i]);
    return 0;
}
