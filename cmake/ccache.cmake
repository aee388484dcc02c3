# ccache as every compile's launcher (CAPSULE_CCACHE, on in the project's presets), set so that a clean clone in
# another folder hits the cache another clone filled: paths relative to the source root, no cwd in the hash.
option(CAPSULE_CCACHE "Compile through ccache (cache: \$CCACHE_DIR, else /var/cache/capsule/ccache)" OFF)
if(CAPSULE_CCACHE)
  find_program(CAPSULE_CCACHE_PROGRAM ccache REQUIRED)
  set(CAPSULE_CCACHE_DIR "$ENV{CCACHE_DIR}")
  if(NOT CAPSULE_CCACHE_DIR)
    set(CAPSULE_CCACHE_DIR /var/cache/capsule/ccache)
  endif()
  set(CAPSULE_CCACHE_LAUNCHER env CCACHE_DIR=${CAPSULE_CCACHE_DIR} CCACHE_BASEDIR=${PROJECT_SOURCE_DIR}
      CCACHE_NOHASHDIR=true ${CAPSULE_CCACHE_PROGRAM})
  set(CMAKE_C_COMPILER_LAUNCHER ${CAPSULE_CCACHE_LAUNCHER})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${CAPSULE_CCACHE_LAUNCHER})
endif()
# Objects name their sources relative to the tree (debug info, __FILE__ in assertions), so they do not depend on
# where the clone is: reports read ./daemon/..., and another clone's objects are byte-identical.
add_compile_options(-ffile-prefix-map=${PROJECT_SOURCE_DIR}=.)
