# One place for compiler flags every uroce target shares.
add_library(uroce_flags INTERFACE)
target_compile_options(uroce_flags INTERFACE -Wall -Wextra -Wshadow -Wnon-virtual-dtor
  -Wcast-align -Wnull-dereference -Wimplicit-fallthrough -Wno-missing-field-initializers)
if(UROCE_WERROR)
  target_compile_options(uroce_flags INTERFACE -Werror)
endif()
if(UROCE_SANITIZE)
  target_compile_options(uroce_flags INTERFACE -fsanitize=${UROCE_SANITIZE} -fno-omit-frame-pointer
    -fno-sanitize-recover=all)
  target_link_options(uroce_flags INTERFACE -fsanitize=${UROCE_SANITIZE})
endif()
