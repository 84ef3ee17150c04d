/* SPDX-License-Identifier: BSD-3-Clause */
/* read_file.h — private: whole-file reads shared by every input parser. */
#ifndef P3D_READ_FILE_H
#define P3D_READ_FILE_H

#include <stddef.h>

#include "p3d/p3d.h"

/* Reads a whole regular file (NUL-terminated) of at most `cap` bytes. `what`
 * names it in messages ("cluster file", "topology.conf", "policy"). A FIFO,
 * device or directory is refused without blocking. Caller frees *buf. */
int p3d_read_small_file(const char *path, const char *what, size_t cap, char **buf, size_t *len, char **err);

#endif
