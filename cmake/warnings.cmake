# Warning flags: everything we build is warning-free under -Werror.
add_compile_options(-Wall -Wextra -Werror -Wshadow -Wformat=2 $<$<COMPILE_LANGUAGE:CXX>:-Wnon-virtual-dtor>)
