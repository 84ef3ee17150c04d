/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * place.h — run/ internal: placing again when a node is lost (place.c,
 * place_replace.c). The placement pipeline itself, which --dry-run and
 * the other commands share, is in launch.h (run/'s public header).
 */
#ifndef P3D_PLACE_H
#define P3D_PLACE_H

#include "launch.h"

/* A lost node (docs/launch.md, "When a node dies"): marks the cluster
 * nodes lost[0..nlost) P3D_NODE_LOST, then runs the job's policy again
 * with job.previous = the current placement and the spares available
 * (every rank not on a lost node keeps its GPU; bundled policies move each
 * lost node's ranks to the best spare) and checks the result. On success
 * r->pl / r->an hold the new placement (the spare that took ranks becomes a
 * used node); error-level checks are the caller's to refuse. -1 with *err
 * when no placement could be made (no spare left, the policy failed). */
int p3d_place_replace(const p3d_opts *o, p3d_plan_result *r, const int *lost, int nlost, int restart, char **err);
/* A lost node's replacement, the part every launcher shares (place_replace.c):
 * p3d_place_replace and its error-level checks; 1 with *msg when the lost
 * nodes ran no rank (marked lost, replace events written, nothing moves),
 * -1 with the reason in *msg, 0 with *was (malloc'd: rank r's node before).
 * p3d_replace_story then writes the replace events (events_fd, t0; -1 none)
 * and puts who took which ranks in *msg. */
int p3d_replace_place(const p3d_opts *o, p3d_plan_result *res, const int *lost, int nlost, int restart,
                      const char *reason, int events_fd, double t0, int **was, char **msg);
int p3d_replace_story(const p3d_plan_result *res, const int *was, const int *lost, int nlost, int restart,
                      const char *reason, int events_fd, double t0, char **msg);

#endif
