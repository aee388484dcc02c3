# Locates the Debian-packaged libraries capsule builds on.
find_package(PkgConfig REQUIRED)
pkg_check_modules(SECCOMP REQUIRED libseccomp)
pkg_check_modules(LIBCAP REQUIRED libcap)
find_package(nlohmann_json 3 REQUIRED)
find_package(Threads REQUIRED)
if(CAPSULE_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
