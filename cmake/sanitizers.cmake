# CAPSULE_SANITIZE=ON builds everything with ASan + UBSan (see the `asan` preset).
# Position-dependent executables: UBSan keeps a source location (a pointer to its file name) for every check, millions
# here, and in a PIE each is a relocation the loader applies at every start (capsuled: 110 MB of .rela.dyn, 2 s).
if(CAPSULE_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined -fno-pie)
  add_link_options(-fsanitize=address,undefined -no-pie)
endif()
