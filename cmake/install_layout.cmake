# The installed layout (GNUInstallDirs): capsule in bin/, capsuled in sbin/, capsule-init and capsule-full in
# libexec/capsule/, the data in share/capsule/. The binaries find each other and the data relative to their own
# location (generated install_layout.h), so an install works under any prefix; the build tree mirrors the same
# relative layout with symlinks (build/sbin/capsuled, build/libexec/capsule/capsule-init,
# build/share/capsule/{policies,data}), so build/bin/capsuled and build/bin/capsule find things exactly the way
# installed ones do. capsule-full, which finds capsuled from libexec/, is built at its place in the mirror.
include(GNUInstallDirs)

set(CAPSULE_INSTALL_LIBEXECDIR "${CMAKE_INSTALL_LIBEXECDIR}/capsule")
set(CAPSULE_INSTALL_DATADIR "${CMAKE_INSTALL_DATADIR}/capsule")
foreach(dir CMAKE_INSTALL_BINDIR CMAKE_INSTALL_SBINDIR CAPSULE_INSTALL_LIBEXECDIR CAPSULE_INSTALL_DATADIR)
  if(IS_ABSOLUTE "${${dir}}")
    message(FATAL_ERROR "${dir} (${${dir}}) must be relative to CMAKE_INSTALL_PREFIX: capsule's binaries find "
                        "each other and their data relative to their own location")
  endif()
endforeach()

# capsule_relative(<var> <from dir> <to>): the path of <to> seen from <from dir>, both relative to the prefix.
function(capsule_relative var from to)
  file(RELATIVE_PATH relative "/prefix/${from}" "/prefix/${to}")
  set(${var} "${relative}" PARENT_SCOPE)
endfunction()
capsule_relative(CAPSULE_CAPSULED_FROM_CLI "${CMAKE_INSTALL_BINDIR}" "${CMAKE_INSTALL_SBINDIR}/capsuled")
capsule_relative(CAPSULE_FULL_CLI_FROM_CLI "${CMAKE_INSTALL_BINDIR}" "${CAPSULE_INSTALL_LIBEXECDIR}/capsule-full")
capsule_relative(CAPSULE_CAPSULED_FROM_FULL_CLI "${CAPSULE_INSTALL_LIBEXECDIR}" "${CMAKE_INSTALL_SBINDIR}/capsuled")
capsule_relative(CAPSULE_INIT_FROM_DAEMON "${CMAKE_INSTALL_SBINDIR}" "${CAPSULE_INSTALL_LIBEXECDIR}/capsule-init")
capsule_relative(CAPSULE_DATA_FROM_DAEMON "${CMAKE_INSTALL_SBINDIR}" "${CAPSULE_INSTALL_DATADIR}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/install_layout.h.in ${CMAKE_BINARY_DIR}/generated/install_layout.h @ONLY)
# Linked by what includes "install_layout.h" (capsuled, the CLI).
add_library(capsule_install_layout INTERFACE)
target_include_directories(capsule_install_layout INTERFACE ${CMAKE_BINARY_DIR}/generated)

# The build tree's mirror: every executable is built in bin/; <bin>/<relative path> must reach the same file.
function(capsule_mirror relative target)
  cmake_path(ABSOLUTE_PATH relative BASE_DIRECTORY "${CMAKE_RUNTIME_OUTPUT_DIRECTORY}" NORMALIZE OUTPUT_VARIABLE link)
  if(link STREQUAL target)
    return()
  endif()
  cmake_path(IS_PREFIX CMAKE_BINARY_DIR "${link}" NORMALIZE inside)
  if(NOT inside)
    message(FATAL_ERROR "the install layout puts ${relative} outside the build tree's mirror (${link})")
  endif()
  cmake_path(GET link PARENT_PATH parent)
  file(MAKE_DIRECTORY "${parent}")
  file(CREATE_LINK "${target}" "${link}" SYMBOLIC)
endfunction()
capsule_mirror("${CAPSULE_CAPSULED_FROM_CLI}" "${CMAKE_RUNTIME_OUTPUT_DIRECTORY}/capsuled")
capsule_mirror("${CAPSULE_INIT_FROM_DAEMON}" "${CMAKE_RUNTIME_OUTPUT_DIRECTORY}/capsule-init")
cmake_path(ABSOLUTE_PATH CAPSULE_FULL_CLI_FROM_CLI BASE_DIRECTORY "${CMAKE_RUNTIME_OUTPUT_DIRECTORY}" NORMALIZE
           OUTPUT_VARIABLE full_cli)
cmake_path(GET full_cli PARENT_PATH CAPSULE_FULL_CLI_BUILD_DIR)  # capsule-full's RUNTIME_OUTPUT_DIRECTORY
capsule_mirror("${CAPSULE_DATA_FROM_DAEMON}/policies" "${PROJECT_SOURCE_DIR}/policies")
capsule_mirror("${CAPSULE_DATA_FROM_DAEMON}/data" "${PROJECT_SOURCE_DIR}/images/data")
