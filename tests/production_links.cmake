# The production libraries (the drop-in libibverbs and the stand-ins) carry the NIC, not the
# simulator: no code of the fabric, the world core or nlohmann_json may be linked into them
# (src/CMakeLists.txt keeps the simulated links with the fabric for this). Reads each library's
# symbol table. Run as
#   cmake -DNM=<nm> -DLIBRARIES="<lib>;<lib>" -P tests/production_links.cmake
foreach(library IN LISTS LIBRARIES)
  execute_process(COMMAND ${NM} -C ${library} OUTPUT_VARIABLE symbols RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${NM} -C ${library} failed (${rc})")
  endif()
  get_filename_component(name ${library} NAME)
  # The NIC itself must be there, or an empty symbol table would pass everything.
  if(name MATCHES "^libibverbs" AND NOT symbols MATCHES "uroce::verbs::Device::")
    message(FATAL_ERROR "${name}: no uroce::verbs::Device symbols; cannot judge its contents")
  endif()
  foreach(forbidden "uroce::fabric::" "uroce::sim::" "simlab::" "nlohmann::")
    string(FIND "${symbols}" "${forbidden}" at)
    if(NOT at EQUAL -1)
      string(SUBSTRING "${symbols}" ${at} 160 sample)
      message(FATAL_ERROR "${name} links simulator code (${forbidden}): ...${sample}")
    endif()
  endforeach()
  message(STATUS "${name}: no simulator code")
endforeach()
