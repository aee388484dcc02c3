# What `cmake --install` puts where (the layout of cmake/install_layout.cmake) and the Debian package CPack
# builds from it: cmake --preset release && cmake --build build-release --target package (scripts/package-check.sh).
set(CAPSULE_INSTALL_PYTHONDIR "lib/python3/dist-packages" CACHE STRING
    "where the Python client capsule.py is installed, relative to the prefix (Debian's python3 searches it)")

install(TARGETS capsule RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS capsuled RUNTIME DESTINATION ${CMAKE_INSTALL_SBINDIR})
install(TARGETS capsule-init capsule-full RUNTIME DESTINATION ${CAPSULE_INSTALL_LIBEXECDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/policies/ DESTINATION ${CAPSULE_INSTALL_DATADIR}/policies
        FILES_MATCHING PATTERN "*.json")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/images/data/ DESTINATION ${CAPSULE_INSTALL_DATADIR}/data)
# Not read by the daemon: the scripts that build the toolchain images (images/recipes/README.md).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/images/recipes/ DESTINATION ${CAPSULE_INSTALL_DATADIR}/recipes
        USE_SOURCE_PERMISSIONS)
install(FILES ${PROJECT_SOURCE_DIR}/client/python/capsule.py DESTINATION ${CAPSULE_INSTALL_PYTHONDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
configure_file(${PROJECT_SOURCE_DIR}/packaging/capsuled.service.in ${CMAKE_BINARY_DIR}/packaging/capsuled.service @ONLY)
# systemd reads units from <prefix>/lib/systemd/system for /usr and /usr/local alike.
install(FILES ${CMAKE_BINARY_DIR}/packaging/capsuled.service DESTINATION lib/systemd/system)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME capsule)
set(CPACK_PACKAGE_VENDOR capsule)
set(CPACK_PACKAGE_CONTACT "capsule maintainers <capsule@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "sandboxed execution engine for builds, tests and agent commands")
string(CONCAT CPACK_PACKAGE_DESCRIPTION
       "capsuled runs untrusted builds, tests and agent commands in hermetic Linux sandboxes (pinned toolchain\n"
       "images, copy-on-write workspaces, limits, seccomp, a date-masked package proxy) and keeps a record of\n"
       "every run; capsule is its command-line client. The service is installed but not enabled:\n"
       "systemctl enable --now capsuled. Members of the group capsule may use its socket.")
set(CPACK_STRIP_FILES ON)
# The unit's ExecStart names the configured sbin dir: the package installs under the same prefix.
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Run as programs rather than linked: mkfs.ext4 makes each sandbox's disk (sandbox/quota.cpp), cp copies trees;
# addgroup is the postinst's.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "e2fsprogs, coreutils, adduser")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "python3")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/packaging/debian/postinst ${PROJECT_SOURCE_DIR}/packaging/debian/prerm
    ${PROJECT_SOURCE_DIR}/packaging/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
