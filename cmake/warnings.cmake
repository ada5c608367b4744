# One place for compiler flags every uroce target shares.
add_library(uroce_flags INTERFACE)
target_compile_options(uroce_flags INTERFACE -Wall -Wextra -Wshadow -Wnon-virtual-dtor
  -Wcast-align -Wnull-dereference -Wimplicit-fallthrough -Wno-missing-field-initializers)
# GCC 12 at -O3 reports impossible sizes in std::string's inlined copies (-Wrestrict, GCC bug
# 105651); the warning stays on, but not as an error, for that compiler.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(uroce_flags INTERFACE -Wno-error=restrict)
endif()
if(UROCE_WERROR)
  target_compile_options(uroce_flags INTERFACE -Werror)
endif()
if(UROCE_SANITIZE)
  # A target with the property UROCE_TEST_CODE (the GoogleTest binaries) is compiled without
  # UBSan's checks, and still linked with its runtime: they cost a quarter to a third of the
  # sanitizer build's compile time for the test files, whose expanded assertions dominate it,
  # while the library code the tests run keeps every check.
  target_compile_options(uroce_flags INTERFACE -fsanitize=${UROCE_SANITIZE} -fno-omit-frame-pointer
    -fno-sanitize-recover=all
    $<$<BOOL:$<TARGET_PROPERTY:UROCE_TEST_CODE>>:-fno-sanitize=undefined>)
  target_link_options(uroce_flags INTERFACE -fsanitize=${UROCE_SANITIZE})
endif()
