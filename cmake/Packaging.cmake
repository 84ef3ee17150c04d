# SPDX-License-Identifier: BSD-3-Clause
# CPack: Debian packages of the install tree (`cpack -G DEB` in the build
# directory; tests/integration/package_deb.sh builds, inspects, unpacks and
# runs them). One package per install component:
#   par3drun        the core: par3drun, p3d-worker (and its CUDA module),
#                   policies, examples, docs, man pages, completion, the NVML
#                   plugin (which dlopens libnvidia-ml itself);
#   par3drun-curl   --policy URLs and --rdzv etcd (libcurl);
#   par3drun-pmix   --rdzv pmix (libpmix).
# The core only Recommends the other two, so it installs without libcurl4 and
# libpmix2; without them par3drun says which package a URL policy or an
# etcd/PMIx rendezvous needs. Dependencies come from dpkg-shlibdeps over each
# package's ELF files, so each asks for exactly the libraries it links, and
# the core adds libxml2, which it loads with dlopen. The
# CUDA module's libraries (cudart, cuBLAS, NCCL) are not Debian packages: they
# are found through its rpath.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME par3drun)
set(CPACK_PACKAGE_VENDOR "the par3drun authors")
set(CPACK_PACKAGE_CONTACT "the par3drun authors")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "topology-aware launcher and placement tool for 3D-parallel training")
set(CPACK_PACKAGE_DESCRIPTION
    "par3drun places the ranks of a tensor x pipeline x data parallel job on the GPUs\n\
of a cluster (Lua policies over hwloc topologies), checks and reports the placement,\n\
and starts and supervises the ranks with a torchrun-compatible environment.")
set(CPACK_RESOURCE_FILE_LICENSE ${CMAKE_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "the par3drun authors")

set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL core)
set(P3D_CORE_RECOMMENDS "hwloc")
if(CURL_FOUND)
  list(APPEND CPACK_COMPONENTS_ALL curl)
  string(APPEND P3D_CORE_RECOMMENDS ", par3drun-curl")
endif()
if(PMIX_FOUND)
  list(APPEND CPACK_COMPONENTS_ALL pmix)
  string(APPEND P3D_CORE_RECOMMENDS ", par3drun-pmix")
endif()
set(CPACK_DEBIAN_CORE_PACKAGE_NAME par3drun)
set(CPACK_DEBIAN_CORE_PACKAGE_RECOMMENDS "${P3D_CORE_RECOMMENDS}")
set(CPACK_DEBIAN_CORE_PACKAGE_SUGGESTS "slurm-client, bash-completion")
set(CPACK_DEBIAN_CURL_PACKAGE_NAME par3drun-curl)
set(CPACK_DEBIAN_PMIX_PACKAGE_NAME par3drun-pmix)
# a plugin package is nothing without the core of the same version
foreach(c CURL PMIX)
  set(CPACK_DEBIAN_${c}_PACKAGE_DEPENDS "par3drun (= ${PROJECT_VERSION})")
  set(CPACK_DEBIAN_${c}_PACKAGE_SECTION utils)
endforeach()
# (CPack puts the summary above each: one summary for the three)
set(CPACK_DEBIAN_CORE_DESCRIPTION "${CPACK_PACKAGE_DESCRIPTION}")
set(CPACK_DEBIAN_CURL_DESCRIPTION "The plugins that need libcurl, which par3drun loads at run time:\n\
--policy http(s)://... (fetched with libcurl) and the etcd rendezvous\n\
(--rdzv etcd:URL, --rdzv-backend etcd).")
set(CPACK_DEBIAN_PMIX_DESCRIPTION "The plugin that needs libpmix, which par3drun loads at run time:\n\
the PMIx rendezvous (--rdzv pmix: srun --mpi=pmix, mpirun).")

# libxml2 is loaded with dlopen when an XML file is read
# (placement/topo/topo_xml_lib.c), so dpkg-shlibdeps cannot see it: the core
# depends on the package that holds the library the build found.
set(P3D_XML2_PACKAGE libxml2)
execute_process(COMMAND dpkg-query -S "${P3D_XML2_REAL}" OUTPUT_VARIABLE P3D_XML2_OWNER ERROR_QUIET)
if(P3D_XML2_OWNER MATCHES "^([^:, ]+)")
  set(P3D_XML2_PACKAGE "${CMAKE_MATCH_1}")
endif()

find_program(P3D_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(P3D_DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
  set(CPACK_DEBIAN_CORE_PACKAGE_DEPENDS "${P3D_XML2_PACKAGE}")
  # libraries found by rpath, not by a Debian package (the CUDA module's)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${P3D_WORKER_CUDA_LIBDIRS}
      /usr/local/cuda/lib64 /usr/local/cuda/lib)
else()
  set(CPACK_DEBIAN_CORE_PACKAGE_DEPENDS "libhwloc15, ${P3D_XML2_PACKAGE}, liblua5.4-0, libcjson1, libyaml-0-2, libssl3")
  string(APPEND CPACK_DEBIAN_CURL_PACKAGE_DEPENDS ", libcurl4, libcjson1")
  string(APPEND CPACK_DEBIAN_PMIX_PACKAGE_DEPENDS ", libpmix2")
endif()
include(CPack)
