#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# libxml2 is loaded when an XML file is read (placement/topo/topo_xml_lib.c),
# never linked: it brings the ICU, libstdc++, zlib and liblzma, which every
# start of par3drun (and of every agent it runs) would map otherwise.
#  1. par3drun does not list libxml2 among the libraries it needs;
#  2. a launch that reads no XML (live discovery) never loads it, nor the
#     ICU (the dynamic loader's own trace, LD_DEBUG=files);
#  3. a dry run with an hwloc XML topology loads it, and reads the file;
#  4. so does `par3drun topo` on an NCCL topology file (another reader);
#  5. a malformed NCCL file still gets libxml2's words, file:line, exit 2.
set -u
: "${PAR3DRUN:?PAR3DRUN must point at the par3drun binary}"
: "${P3D_SRC:?P3D_SRC must point at the source tree}"
cd "$P3D_SRC" || exit 1
unset SLURM_JOB_NODELIST
T=$(mktemp -d "${TMPDIR:-/tmp}/p3d-xml-lazy.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# 1. the binary's needed libraries
if command -v readelf >/dev/null; then
  readelf -d "$PAR3DRUN" >"$T/dyn" || bad "1: readelf -d failed"
  grep -q 'NEEDED.*libhwloc' "$T/dyn" || bad "1: readelf shows no NEEDED entries: $(head -5 "$T/dyn")"
  grep -q 'NEEDED.*libxml2' "$T/dyn" && bad "1: par3drun links libxml2: $(grep NEEDED "$T/dyn" | tr -s ' ')"
  [ "$fail" = 0 ] && echo "ok 1: libxml2 is not among par3drun's NEEDED libraries"
else
  echo "1: skipped (no readelf)"
fi

# 2. launches with live discovery, from a cold topology cache (hwloc runs:
#    its xml_libxml plugin, which would map libxml2, is not loaded) and
#    then a warm one: the loader never opens libxml2 or the ICU
for c in cold warm; do
  P3D_TOPO_CACHE_DIR="$T/cache" LD_DEBUG=files "$PAR3DRUN" --nproc-per-node 2 --run-dir "$T/rd.$c" -- true \
    >"$T/$c.out" 2>"$T/$c.err"
  rc=$?
  [ "$rc" = 0 ] || { bad "2: the $c launch exited $rc"; grep -v '^ *[0-9]*:' "$T/$c.err" | tail -5; }
  grep -q 'file=libhwloc' "$T/$c.err" || bad "2: LD_DEBUG=files traced nothing (no libhwloc line)"
  grep -E 'file=[^ ]*(libxml2|libicu)' "$T/$c.err" | head -3 | sed 's/^/  /' | grep . &&
    bad "2: a $c-cache launch that reads no XML loaded libxml2 or the ICU"
done
# where hwloc's plugins are installed (Debian's libhwloc-plugins), the cold
# launch loaded some (so it ran hwloc) but not xml_libxml
if ls /usr/lib/*/hwloc/hwloc_xml_libxml.so >/dev/null 2>&1; then
  grep -q 'file=[^ ]*hwloc/hwloc_[a-z]*\.so' "$T/cold.err" || bad "2: the cold launch loaded no hwloc plugin: it did not run hwloc"
  grep -q 'file=[^ ]*hwloc_xml_libxml' "$T/cold.err" && bad "2: hwloc's xml_libxml plugin was loaded"
fi
[ "$fail" = 0 ] && echo "ok 2: 2-rank launches (live discovery, cold and warm cache) loaded neither libxml2 nor the ICU"

# 3. an hwloc XML topology: loaded, and the file read
LD_DEBUG=files "$PAR3DRUN" --dry-run --topology examples/topologies/dgx-a100.xml --tp 8 >"$T/dry.out" 2>"$T/dry.err"
rc=$?
[ "$rc" = 0 ] || { bad "3: the dry run exited $rc"; grep -v '^ *[0-9]*:' "$T/dry.err" | tail -5; }
grep -q 'file=libxml2' "$T/dry.err" || bad "3: reading an hwloc XML did not load libxml2"
grep -q 'mesh: tp=8 pp=1 dp=1, world 8 on 8 GPUs of 1 node' "$T/dry.out" || bad "3: no placement in the dry run's report: $(head -3 "$T/dry.out")"
[ "$fail" = 0 ] && echo "ok 3: a dry run with an hwloc XML topology loaded libxml2 and placed tp8"

# 4. an NCCL topology file through the other reader
LD_DEBUG=files "$PAR3DRUN" topo --topology tests/fixtures/realdata/nccl/azure-ndv4-topo.xml >"$T/nccl.out" 2>"$T/nccl.err"
rc=$?
[ "$rc" = 0 ] || { bad "4: par3drun topo exited $rc"; grep -v '^ *[0-9]*:' "$T/nccl.err" | tail -5; }
grep -q 'file=libxml2' "$T/nccl.err" || bad "4: reading an NCCL XML did not load libxml2"
grep -q '8 GPUs, 8 NICs' "$T/nccl.out" || bad "4: the NCCL file was not read: $(head -3 "$T/nccl.out")"
[ "$fail" = 0 ] && echo "ok 4: par3drun topo on an NCCL XML loaded libxml2 and read 8 GPUs, 8 NICs"

# 5. not well-formed: libxml2's own words after file:line
printf '<system version="1">\n  <cpu numaid="0">\n</system>\n' >"$T/cut.xml"
out=$("$PAR3DRUN" topo --topology "$T/cut.xml" 2>&1)
rc=$?
[ "$rc" = 2 ] && grep -q "cut.xml:[0-9]*: not well-formed XML: " <<<"$out" ||
  bad "5: a malformed NCCL file: exit $rc: $out"
[ "$fail" = 0 ] && echo "ok 5: a malformed NCCL file: exit 2, file:line and libxml2's words"
[ "$fail" = 0 ] && echo "PASS xml_lazy"
exit "$fail"
