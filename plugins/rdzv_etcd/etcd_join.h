/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * etcd_join.h — private to p3d_rdzv_etcd.so (and its unit test): where a
 * node joining the running job (par3drun --join --rdzv etcd:URL) finds
 * the job's current leader, read off the fields of the leader key's
 * value once its signature checked (etcd_verify). Pure: no etcd, no curl.
 */
#ifndef P3D_ETCD_JOIN_H
#define P3D_ETCD_JOIN_H

#include <stddef.h>

/* fields: "PORT HOST" (the first leader: PORT is its rendezvous port,
 * kept open for joiners) or "PORT HOST restart G node N join J" (a
 * successor elected after a failover: PORT is its failover port, J its
 * join port, 0 when it has none). 0 with host (hcap bytes) and *port the
 * join endpoint, or -1 with msg naming what is wrong. */
int etcd_join_endpoint(const char *fields, char *host, size_t hcap, int *port, char *msg, size_t cap);

#endif
