#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode_etcd_elastic.sh — multinode_elastic.sh's must-show (heal on the
# spare, shrink, par3drun --join, grow back at a checkpoint) with the agents
# meeting through a real etcd (tests/services/etcd.sh on 127.0.0.1): node
# ranks come from etcd in arrival order, the joiner finds the leader in
# its signed leader key. Every check is multinode_elastic.sh's.
RDZV=etcd exec bash "$(dirname "$0")/multinode_elastic.sh"
