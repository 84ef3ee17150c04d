#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Issue 44: a plugin is code par3drun runs; dlopen runs a library's
# constructors before par3drun can look at its descriptor. So a candidate
# is checked before dlopen: its directory and the file itself must be
# owned by root or the user and writable by no one else, the file a
# regular file (not a link), and P3D_PLUGIN_DIR entries absolute (a
# relative one would load from the current directory). A planted .so
# whose constructor writes a marker must never run:
#  1. in a directory others may write (0777): refused, named, marker absent;
#  2. a file others may write (0666) in a good directory: the same;
#  3. P3D_PLUGIN_DIR=. (relative): refused with a message, marker absent;
#  4. the same plugin in a 0755 directory, mode 0755: it loads (its
#     constructor runs, its detect declines): the check is not a wall.
set -u
: "${PAR3DRUN:?run through ctest}"
CC=${CC:-cc}
command -v "$CC" >/dev/null || { echo "SKIP: no C compiler ($CC)"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/p3d-plugin-trust.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
cat >"$T/planted.c" <<'C'
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
/* the attack: code that runs at dlopen, before any descriptor check */
__attribute__((constructor)) static void planted(void)
{
    const char *m = getenv("PLANTED_MARK");
    if (m) {
        int fd = open(m, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            (void)write(fd, "ran\n", 4);
            close(fd);
        }
    }
}
C
"$CC" -shared -fPIC -o "$T/p3d_rdzv_evil.so" "$T/planted.c" || { echo "SKIP: cannot build a shared object"; exit 77; }
printf 'plugin-trust-token-0123456789\n' >"$T/token"
chmod 600 "$T/token"
try() { # DIR-or-relative CWD NAME
    local dir=$1 cwd=$2 what=$3
    rm -f "$T/mark"
    (cd "$cwd" && env PLANTED_MARK="$T/mark" P3D_PLUGIN_DIR="$dir" "$PAR3DRUN" --nnodes 2 --node-rank 0 \
        --rdzv evil --rdzv-timeout 2 --rdzv-token-file "$T/token" -- true) >"$T/$what.out" 2>"$T/$what.err"
    echo $? >"$T/$what.rc"
}
mkdir -m 0777 "$T/open"; chmod 0777 "$T/open"
cp "$T/p3d_rdzv_evil.so" "$T/open/"; chmod 0755 "$T/open/p3d_rdzv_evil.so"
try "$T/open" "$T" open
[ -e "$T/mark" ] && bad "1: the constructor of a plugin in a world-writable directory ran"
grep -q "writable by others" "$T/open.err" || { bad "1: no reason given"; cat "$T/open.err"; }
[ "$(cat "$T/open.rc")" = 2 ] || bad "1: exit $(cat "$T/open.rc"), want 2"

mkdir -m 0755 "$T/good"; chmod 0755 "$T/good"
cp "$T/p3d_rdzv_evil.so" "$T/good/"; chmod 0666 "$T/good/p3d_rdzv_evil.so"
try "$T/good" "$T" wfile
[ -e "$T/mark" ] && bad "2: the constructor of a world-writable plugin file ran"
grep -q "writable by others" "$T/wfile.err" || { bad "2: no reason given"; cat "$T/wfile.err"; }

chmod 0755 "$T/good/p3d_rdzv_evil.so"
try . "$T/good" rel
[ -e "$T/mark" ] && bad "3: a relative P3D_PLUGIN_DIR loaded from the current directory"
grep -q "P3D_PLUGIN_DIR entry '.' is relative" "$T/rel.err" || { bad "3: no message for the relative entry"; cat "$T/rel.err"; }

try "$T/good" "$T" ok
[ -e "$T/mark" ] || { bad "4: a plugin in a trusted directory was not loaded"; cat "$T/ok.err"; }
[ $fail -eq 0 ] && echo "ok: plugins are checked before dlopen"
exit $fail
