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

# capsule_unity_family(<directory> <family> <files...>): these files share batches only with each other. A static
# library's batch is linked whole, so a lean program's library keeps what it must not load apart: the lean CLI
# links capsule_http for its client and must not need the server's spdlog (CapsuleFull tests it).
function(capsule_unity_family directory family)
  list(TRANSFORM ARGN PREPEND ${CMAKE_SOURCE_DIR}/${directory}/ OUTPUT_VARIABLE files)
  set_source_files_properties(${files} DIRECTORY ${CMAKE_SOURCE_DIR}/${directory}
                              PROPERTIES CAPSULE_UNITY_FAMILY ${family})
endfunction()
capsule_unity_family(http server connection.cpp listener.cpp request_parser.cpp responder.cpp router.cpp server.cpp)

# Batches by name, not by position: each file goes to the batch its path's hash picks among a power of two near
# sources/8 (of its family), so adding a file changes its own batch only (CMake's BATCH mode shifts every batch
# after it) and the compiler cache keeps the rest. Files compiled alone get no group and GROUP mode leaves them so.
function(capsule_unity_groups target)
  get_target_property(unity ${target} UNITY_BUILD)
  get_target_property(type ${target} TYPE)
  if(NOT unity OR type STREQUAL "INTERFACE_LIBRARY")
    return()
  endif()
  get_target_property(sources ${target} SOURCES)
  get_target_property(dir ${target} SOURCE_DIR)
  set(families "")
  foreach(source IN LISTS sources)  # absolute: properties set here must reach the target's own directory
    cmake_path(ABSOLUTE_PATH source BASE_DIRECTORY ${dir} NORMALIZE)
    get_source_file_property(alone ${source} TARGET_DIRECTORY ${target} SKIP_UNITY_BUILD_INCLUSION)
    if(source MATCHES "\\.(c|cpp)$" AND NOT alone)
      get_source_file_property(family ${source} TARGET_DIRECTORY ${target} CAPSULE_UNITY_FAMILY)
      if(NOT family)
        set(family "")
      endif()
      list(APPEND families "_${family}")
      list(APPEND "members_${family}" ${source})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES families)
  foreach(family IN LISTS families)
    string(SUBSTRING "${family}" 1 -1 family)
    set(members ${members_${family}})
    list(LENGTH members count)
    set(buckets 1)
    math(EXPR past "${buckets} * 12")  # the nearest power of two to count/8: double while count/8 >= 1.5 * buckets
    while(count GREATER_EQUAL past)
      math(EXPR buckets "${buckets} * 2")
      math(EXPR past "${buckets} * 12")
    endwhile()
    foreach(source IN LISTS members)
      file(RELATIVE_PATH relative ${PROJECT_SOURCE_DIR} ${source})
      string(MD5 hash "${relative}")
      string(SUBSTRING ${hash} 0 6 hash)
      math(EXPR bucket "0x${hash} % ${buckets}")
      set_source_files_properties(${source} TARGET_DIRECTORY ${target} PROPERTIES UNITY_GROUP "${family}batch${bucket}")
    endforeach()
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
