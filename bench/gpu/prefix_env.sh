# Sourced by bench/gpu/build.sh (on the GPU machine) and bench/gpu/prefix.sh (its configure check
# here): points programs, the dynamic loader, pkg-config and CMake at the carried prefix.
#
#   source bench/gpu/prefix_env.sh PREFIX_DIR
#
# Sets PATH (protoc, grpc_cpp_plugin, pkgconf first), LD_LIBRARY_PATH, PKG_CONFIG_LIBDIR (only
# the prefix's .pc files, never the machine's) and the array HPTRAIN_PREFIX_CMAKE_ARGS: the
# prefix first in CMAKE_PREFIX_PATH, the exact protoc / grpc_cpp_plugin / pkg-config programs.
# shellcheck shell=bash
hptrain_prefix=$(cd "$1/usr" && pwd)
hptrain_prefix_libs=$hptrain_prefix/lib/x86_64-linux-gnu:$hptrain_prefix/lib
export PATH=$hptrain_prefix/bin:$PATH
export LD_LIBRARY_PATH=$hptrain_prefix_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PKG_CONFIG_LIBDIR=$hptrain_prefix/lib/x86_64-linux-gnu/pkgconfig:$hptrain_prefix/share/pkgconfig
unset PKG_CONFIG_PATH
# shellcheck disable=SC2034  # used by the scripts that source this file
HPTRAIN_PREFIX_CMAKE_ARGS=(
  "-DCMAKE_PREFIX_PATH=$hptrain_prefix${HPTRAIN_EXTRA_PREFIX_PATH:+;$HPTRAIN_EXTRA_PREFIX_PATH}"
  "-DCMAKE_LIBRARY_PATH=$hptrain_prefix/lib"  # libgloo.so sits in lib/, not lib/<triplet>/
  "-DProtobuf_PROTOC_EXECUTABLE=$hptrain_prefix/bin/protoc"
  "-DGRPC_CPP_PLUGIN=$hptrain_prefix/bin/grpc_cpp_plugin"
  "-DPKG_CONFIG_EXECUTABLE=$hptrain_prefix/bin/pkgconf"
  # The build tree's programs find the prefix's libraries without LD_LIBRARY_PATH.
  "-DCMAKE_BUILD_RPATH=$hptrain_prefix/lib/x86_64-linux-gnu;$hptrain_prefix/lib"
)
