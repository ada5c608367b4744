# The command line's sources (tools/cli, tools/core, tools/sim) reach uroce only through its API
# and the simulator's public headers: they may include src/api headers, src/sim (the world of
# devices on the fabric), src/common (the vocabulary the API's own signatures use: Result, Gid,
# Nanos) and their own tools headers. Including link/, verbs/, wire/,
# transport/, cc/ or fabric/ directly fails this check. Run as
#   cmake -DSOURCE_DIR=<repository root> -P tests/tool_includes.cmake
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "set SOURCE_DIR to the repository root")
endif()

set(allowed "^(api|common|cli|core|sim)/")

# The matcher itself, so a broken pattern cannot pass everything.
foreach(good "api/uroce.h" "api/nic.h" "common/result.h" "cli/node.h" "core/oob.h"
        "sim/sim_cli.h" "sim/world.h")
  if(NOT good MATCHES "${allowed}")
    message(FATAL_ERROR "self-check: ${good} should be allowed")
  endif()
endforeach()
foreach(bad "link/udp_link.h" "verbs/device.h" "wire/pcap.h" "transport/qp.h" "fabric/switch.h"
        "cc/dcqcn.h" "xapi/nic.h")
  if(bad MATCHES "${allowed}")
    message(FATAL_ERROR "self-check: ${bad} should be refused")
  endif()
endforeach()

file(GLOB_RECURSE sources "${SOURCE_DIR}/tools/cli/*" "${SOURCE_DIR}/tools/core/*"
  "${SOURCE_DIR}/tools/sim/*")
set(violations "")
set(checked 0)
foreach(path IN LISTS sources)
  if(NOT path MATCHES "\\.(h|hpp|cpp|cc)$")
    continue()
  endif()
  math(EXPR checked "${checked} + 1")
  file(STRINGS "${path}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]*)\".*$" "\\1" header "${line}")
    if(NOT header MATCHES "${allowed}")
      file(RELATIVE_PATH rel "${SOURCE_DIR}" "${path}")
      string(APPEND violations "  ${rel}: #include \"${header}\"\n")
    endif()
  endforeach()
endforeach()
if(checked EQUAL 0)
  message(FATAL_ERROR "no sources found under ${SOURCE_DIR}/tools/cli and tools/core")
endif()
if(violations)
  message(FATAL_ERROR "tools/cli and tools/core must use src/ through api/ only:\n${violations}")
endif()
message(STATUS "${checked} files in tools/cli and tools/core include only api/, common/ and tools headers")
