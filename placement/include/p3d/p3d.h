/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * p3d.h — the whole public API of libp3dplace, par3drun's placement library:
 * one header per stage, included here for code that uses several stages.
 */
#ifndef P3D_P3D_H
#define P3D_P3D_H

#include "p3d/base.h"    /* exit codes, errors, link classes, data dir */
#include "p3d/topo.h"    /* discover: one node's topology */
#include "p3d/cluster.h" /* gather: nodes, racks, NVLink domains, slots */
#include "p3d/job.h"     /* mesh, rank arithmetic, model, job */
#include "p3d/policy.h"  /* place: Lua policies, placements, groups */
#include "p3d/cost.h"    /* cost model and plan search */
#include "p3d/check.h"   /* check: validation and scoring */
#include "p3d/report.h"  /* report: text, JSON, SVG, HTML */
#include "p3d/elastic.h" /* the elastic range: widths, batch, shrink, grow */

#endif
