# Unity builds (CMAKE_UNITY_BUILD, on in the project's presets): a target's files are compiled 8 to a translation
# unit, so nlohmann::json, Boost.Beast and the standard headers are parsed and instantiated once per batch.
# Files that cannot share one (internal names that repeat in a batch, or anonymous types held by a class) are
# compiled alone; the list names each with its directory.
function(capsule_compile_alone directory)
  list(TRANSFORM ARGN PREPEND ${CMAKE_SOURCE_DIR}/${directory}/ OUTPUT_VARIABLE files)
  set_source_files_properties(${files} DIRECTORY ${CMAKE_SOURCE_DIR}/${directory}
                              PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
endfunction()

# An anonymous-namespace type as a field of a class from a header (-Wsubobject-linkage in a unity file).
capsule_compile_alone(daemon bundle/bundle_tar.cpp)
capsule_compile_alone(proxy package_proxy.cpp upstream/http_client.cpp)
# Internal names that repeat across files of one target: small helpers.
capsule_compile_alone(sandbox cgroup_v1.cpp cgroup_v2.cpp)
# The one libarchive user of capsule_sandbox, in an object of its own: the static capsule-init links the library
# without libarchive's dependencies, so no batch that capsule-init needs may carry it.
capsule_compile_alone(sandbox tar_in_root.cpp)
capsule_compile_alone(daemon logs/log_store.cpp bundle/bundle_import.cpp)
capsule_compile_alone(proxy maven_source.cpp pypi_source.cpp maven/repository_path.cpp maven/comparable_version.cpp
                      pypi/version.cpp pypi/project_name.cpp pypi/negotiation.cpp)
# Test helpers of the same name in several test files of one binary (tests/ is a CMake directory only when
# the tests are built: the release and fuzz presets leave it out).
if(CAPSULE_BUILD_TESTS)
  capsule_compile_alone(tests daemon/log_reader_test.cpp daemon/log_store_test.cpp e2e/capsuled_bundle_test.cpp
                        e2e/capsuled_runs_diff_test.cpp e2e/capsuled_snapshots_test.cpp images/layer_unpack_test.cpp
                        sandbox/cgroup_v2_test.cpp sandbox/cgroup_view_test.cpp sandbox/hostile_test.cpp
                        sandbox/launcher_test.cpp sandbox/sandbox_lifecycle_test.cpp spec/workspace_snapshot_test.cpp
                        sandbox/quota_test.cpp proxy/upstream_pypi_test.cpp)
endif()
