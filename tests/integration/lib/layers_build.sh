#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# layers_build.sh CC CMD_INCLUDES RUN_INCLUDES RANKS_INCLUDES — the build
# itself keeps the launcher's stages apart (launcher/CMakeLists.txt): with
# the include folders the build gives cmd/'s, run/'s and the nested
# run/ranks/'s objects (colon-separated), a
# lower stage's public header compiles and its internal headers (and an
# upper stage's, and placement/'s internals) are not found at all.
# Registered in tests/CMakeLists.txt as integration/layers_build.
set -euo pipefail
cc=$1
T=$(mktemp -d /tmp/p3d-layers-build.XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T"
fail() { echo "FAIL: $*"; exit 1; }
flags() { local IFS=:; for d in $1; do printf -- '-I%s\n' "$d"; done; }
mapfile -t CMD < <(flags "$2")
mapfile -t RUN < <(flags "$3")
mapfile -t RANKS < <(flags "$4")

builds() { # STAGE HEADER FLAGS...: a file of STAGE including HEADER compiles
  local st=$1 h=$2
  shift 2
  printf '#include "%s"\nint p3d_layers_probe;\n' "$h" | "$cc" -fsyntax-only -x c - "$@" 2>"$T/err" ||
    { cat "$T/err"; fail "$st/ cannot include $h"; }
}
refused() { # STAGE HEADER FLAGS...: ... does not: the header is not there for it
  local st=$1 h=$2
  shift 2
  if printf '#include "%s"\nint p3d_layers_probe;\n' "$h" | "$cc" -fsyntax-only -x c - "$@" 2>"$T/err"; then
    fail "$st/ can include $h: the build does not keep the stages apart"
  fi
  grep -q "$h" "$T/err" || { cat "$T/err"; fail "$st/ including $h failed for another reason"; }
}

for h in launch.h plan.h ranks.h preflight.h rdzv.h wire.h loop.h opts.h cli.h commands.h termsafe.h; do
  builds cmd "$h" "${CMD[@]}"
done
for h in controller_int.h hub_int.h tcpstore_int.h mnode.h prepare.h rdzv_tcp_internal.h topo_internal.h; do
  refused cmd "$h" "${CMD[@]}"
done
for h in launch.h mnode_int.h controller.h hub.h agent.h ranks.h rundir.h rdzv.h wire.h loop.h opts.h strbuf.h; do
  builds run "$h" "${RUN[@]}"
done
for h in controller_int.h hub_int.h tcpstore_int.h rdzv_tcp_internal.h cli.h commands.h cluster_internal.h \
  policy_internal.h; do
  refused run "$h" "${RUN[@]}"
done
# a nested stage sees its own folder and the stages below it, not its
# parent's folder nor a sibling above it
for h in ranks.h rundir.h tcpstore.h plan.h wire.h loop.h; do builds run/ranks "$h" "${RANKS[@]}"; done
for h in launch.h mnode.h controller.h agent.h hub.h preflight.h; do refused run/ranks "$h" "${RANKS[@]}"; done
echo ok
