# The stand-ins (libmlx5.so.1, libefa.so.1, librdmacm.so.1) export every symbol that Debian's
# rdma-core libraries of the same name export, at the same version node and with the same
# default (@@) or compatibility (@) binding: a program linked against Debian's library with
# BIND_NOW then loads against the stand-in. Run as
#   cmake -DNM=<nm> -DSYSTEM_LIB_DIR=<dir> -DLIBRARIES="<lib>;<lib>" -P tests/stub_exports.cmake
# A Debian library that is not installed (ibverbs-providers, librdmacm1) is skipped with a
# message; the test is then reported as skipped unless another library failed.
function(dynamic_exports library out)
  execute_process(COMMAND ${NM} -D --defined-only --with-symbol-versions ${library}
    OUTPUT_VARIABLE listing RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${NM} -D ${library} failed (${rc})")
  endif()
  string(REPLACE "\n" ";" lines "${listing}")
  set(names "")
  foreach(line IN LISTS lines)
    # "<address> <type> <name>@@<version>"; version nodes themselves appear with type A.
    if(line MATCHES "^[0-9a-f]+ [A-Za-z] ([^ ]+)$")
      list(APPEND names "${CMAKE_MATCH_1}")
    endif()
  endforeach()
  list(SORT names)
  set(${out} "${names}" PARENT_SCOPE)
endfunction()

set(skipped "")
set(failures "")
foreach(library IN LISTS LIBRARIES)
  get_filename_component(name ${library} NAME)
  set(reference ${SYSTEM_LIB_DIR}/${name})
  if(NOT EXISTS ${reference})
    message(STATUS "${name}: ${reference} is not installed, not compared "
      "(scripts/install-deps.sh installs it)")
    list(APPEND skipped ${name})
    continue()
  endif()
  dynamic_exports(${reference} wanted)
  dynamic_exports(${library} provided)
  list(LENGTH wanted wanted_count)
  if(wanted_count EQUAL 0)
    message(FATAL_ERROR "${reference}: no dynamic symbols read; cannot compare")
  endif()
  set(missing ${wanted})
  list(REMOVE_ITEM missing ${provided})
  set(extra ${provided})
  list(REMOVE_ITEM extra ${wanted})
  if(missing)
    list(LENGTH missing missing_count)
    list(JOIN missing "\n  " missing_lines)
    string(APPEND failures
      "${name} lacks ${missing_count} of ${wanted_count} exports of ${reference}:\n  ${missing_lines}\n")
  else()
    message(STATUS "${name}: all ${wanted_count} exports of ${reference} present")
  endif()
  if(extra)
    # Harmless for loading; usually a newer rdma-core on the build machine's side.
    list(JOIN extra " " extra_line)
    message(STATUS "${name}: exports that ${reference} lacks: ${extra_line}")
  endif()
endforeach()

if(failures)
  message(FATAL_ERROR "${failures}")
endif()
if(skipped)
  message(STATUS "UROCE_SKIPPED: no Debian library to compare for ${skipped}")
endif()
