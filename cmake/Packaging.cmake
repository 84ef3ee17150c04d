# SPDX-License-Identifier: BSD-3-Clause
# CPack: a Debian package of the install tree (`cpack -G DEB` in the build
# directory; tests/integration/package_deb.sh builds, unpacks and runs it).
# Dependencies come from dpkg-shlibdeps over the installed ELF files, so the
# package asks for exactly the libraries this build links (libcurl only when
# the plugins were built with it). The CUDA module's libraries (cudart,
# cuBLAS, NCCL) are not Debian packages: they are found through its rpath.
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
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "hwloc")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "slurm-client, bash-completion")
find_program(P3D_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(P3D_DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
  # libraries found by rpath, not by a Debian package (the CUDA module's)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${P3D_WORKER_CUDA_LIBDIRS}
      /usr/local/cuda/lib64 /usr/local/cuda/lib)
else()
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "libhwloc15, liblua5.4-0, libcjson1, libyaml-0-2, libssl3")
endif()
include(CPack)
