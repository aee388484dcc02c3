# Warning flags: everything we build is warning-free. CAPSULE_WERROR turns warnings into errors; the project's
# own presets (CMakePresets.json: dev, CI) set it, a plain configure (a distribution's Release build) only warns.
option(CAPSULE_WERROR "Treat compiler warnings as errors (set by the project's presets)" OFF)
add_compile_options(-Wall -Wextra $<$<BOOL:${CAPSULE_WERROR}>:-Werror> -Wshadow -Wformat=2
                    $<$<COMPILE_LANGUAGE:CXX>:-Wnon-virtual-dtor>)
