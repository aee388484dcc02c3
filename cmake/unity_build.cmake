# Unity builds (CMAKE_UNITY_BUILD, on in the project's presets): a target's files are compiled ~8 to a translation
# unit, so nlohmann::json, Boost.Beast and the standard headers are parsed and instantiated once per batch.
# Internal names are unique within a target (scripts/unity-check.py compiles each target as one file to prove
# it), so any batching compiles; the files that cannot share a batch for other reasons are compiled alone.
function(capsule_compile_alone directory)
  list(TRANSFORM ARGN PREPEND ${CMAKE_SOURCE_DIR}/${directory}/ OUTPUT_VARIABLE files)
  set_source_files_properties(${files} DIRECTORY ${CMAKE_SOURCE_DIR}/${directory}
                              PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
endfunction()

# An anonymous-namespace type as a field of a class from a header (-Wsubobject-linkage in a unity file).
capsule_compile_alone(daemon bundle/bundle_tar.cpp)
capsule_compile_alone(proxy package_proxy.cpp upstream/http_client.cpp)
# The one libarchive user of capsule_sandbox, in an object of its own: the static capsule-init links the library
# without libarchive's dependencies, so no batch that capsule-init needs may carry it.
capsule_compile_alone(sandbox tar_in_root.cpp)

# Batches by name, not by position: each file goes to the batch its path's hash picks among a power of two near
# sources/8, so adding a file changes its own batch only (CMake's BATCH mode shifts every batch after it) and the
# compiler cache keeps the rest. Files compiled alone get no group, and GROUP mode leaves them so. A static
# library's batch is linked whole: what a lean program must not load lives in a library of its own
# (capsule_http_server apart from capsule_http), not in a batch that happens to stay apart.
function(capsule_unity_groups target)
  get_target_property(unity ${target} UNITY_BUILD)
  get_target_property(type ${target} TYPE)
  if(NOT unity OR type STREQUAL "INTERFACE_LIBRARY")
    return()
  endif()
  get_target_property(sources ${target} SOURCES)
  get_target_property(dir ${target} SOURCE_DIR)
  set(grouped "")
  foreach(source IN LISTS sources)  # absolute: properties set here must reach the target's own directory
    cmake_path(ABSOLUTE_PATH source BASE_DIRECTORY ${dir} NORMALIZE)
    get_source_file_property(alone ${source} TARGET_DIRECTORY ${target} SKIP_UNITY_BUILD_INCLUSION)
    if(source MATCHES "\\.(c|cpp)$" AND NOT alone)
      list(APPEND grouped ${source})
    endif()
  endforeach()
  list(LENGTH grouped count)
  set(buckets 1)
  math(EXPR past "${buckets} * 12")  # the nearest power of two to count/8: double while count/8 >= 1.5 * buckets
  while(count GREATER_EQUAL past)
    math(EXPR buckets "${buckets} * 2")
    math(EXPR past "${buckets} * 12")
  endwhile()
  foreach(source IN LISTS grouped)
    file(RELATIVE_PATH relative ${PROJECT_SOURCE_DIR} ${source})
    string(MD5 hash "${relative}")
    string(SUBSTRING ${hash} 0 6 hash)
    math(EXPR bucket "0x${hash} % ${buckets}")
    set_source_files_properties(${source} TARGET_DIRECTORY ${target} PROPERTIES UNITY_GROUP "batch${bucket}")
  endforeach()
  set_target_properties(${target} PROPERTIES UNITY_BUILD_MODE GROUP)
endfunction()

function(capsule_unity_groups_in directory)
  get_property(targets DIRECTORY ${directory} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target IN LISTS targets)
    capsule_unity_groups(${target})
  endforeach()
  get_property(subdirectories DIRECTORY ${directory} PROPERTY SUBDIRECTORIES)
  foreach(subdirectory IN LISTS subdirectories)
    capsule_unity_groups_in(${subdirectory})
  endforeach()
endfunction()
if(CMAKE_UNITY_BUILD)
  capsule_unity_groups_in(${PROJECT_SOURCE_DIR})
endif()
