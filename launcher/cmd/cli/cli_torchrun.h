/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cli_torchrun.h — cmd/ internal: torchrun's options in par3drun's terms
 * (cli_torchrun.c; the table of them is docs/torchrun.md).
 */
#ifndef P3D_CLI_TORCHRUN_H
#define P3D_CLI_TORCHRUN_H

#include "cli_table.h"

/* --nproc-per-node's words: gpu (0: the node's GPU count), cpu (this
 * host's online CPUs), auto (gpu on a host with NVIDIA GPUs, else cpu).
 * 1 with *n set for a word, 0 for anything else (a number, parsed as one). */
int p3d_torchrun_nproc_word(const char *val, int *n);

/* --nnodes N or MIN:MAX: 1 with *n = MAX and *min = MIN when MIN < MAX
 * (else 0: a fixed count), 0 for a plain number (the table parses it),
 * -1 with *err for a malformed range. */
int p3d_torchrun_nnodes(const char *val, int *n, int *min, char **err);

/* Applies torchrun's options to o after the parse: the rendezvous
 * (--rdzv-endpoint/-backend/--standalone), --rdzv-id/-conf, --role, -r/-t,
 * --local-ranks-filter, --numa-binding, the refused ones. seen[0..nseen)
 * are the rows given. o->local_hidden and o->local_std are allocated here
 * (p3d_cli_free frees them). 0, or -1 with *err. */
int p3d_torchrun_apply(p3d_opts *o, const opt_row *const *seen, size_t nseen, char **err);

/* torchrun's program forms: a positional *.py script, -m MODULE and
 * --run-path run under the interpreter (--python, PAR3D_PYTHON, python3 on
 * PATH — the last is said once on stderr); --no-python and anything else
 * run as they are. Rewrites o->argv into o->argv_owned (p3d_cli_free frees
 * it). A program that is neither gets a message showing both forms.
 * 0, or -1 with *err. */
int p3d_torchrun_program(p3d_opts *o, char **err);

#endif
