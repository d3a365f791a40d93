# The layering of src/layers.txt made into targets (DESIGN §10, §15). For each subsystem S:
#   - a static library precis_S, linking (PUBLIC) only the precis_* of the subsystems S may use;
#   - an include root, BUILD/layers/S/, holding one symbolic link per folder S may include (its own
#     and those of the subsystems it uses) and nothing else, given to precis_S as its only include
#     path for precis's own headers. "eval/runner.h" from report/ then fails to compile
#     ("eval/runner.h: No such file or directory"), since report's root has no eval/.
# tools/check_layers.py (CTest test check_layers) checks the same table over every #include and over
# the libraries' symbols, so that an upward call through a hand-written declaration fails too.
set(PRECIS_LAYERS_FILE ${PROJECT_SOURCE_DIR}/src/layers.txt)
set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PRECIS_LAYERS_FILE})
file(STRINGS ${PRECIS_LAYERS_FILE} precis_layer_lines REGEX "^[a-z_]+:")
set(PRECIS_LAYERS "")
foreach(line ${precis_layer_lines})
  string(REGEX MATCH "^([a-z_]+):(.*)$" _ "${line}")
  set(layer ${CMAKE_MATCH_1})
  string(STRIP "${CMAKE_MATCH_2}" uses)
  separate_arguments(uses UNIX_COMMAND "${uses}")
  foreach(used ${uses})
    if(NOT used IN_LIST PRECIS_LAYERS)
      message(FATAL_ERROR "src/layers.txt: ${layer} uses ${used}, which is not a line above it (layers are listed lowest first, without cycles)")
    endif()
  endforeach()
  list(APPEND PRECIS_LAYERS ${layer})
  set(PRECIS_LAYER_USES_${layer} ${uses})
endforeach()

function(precis_layer_source_dir layer out)
  if(layer STREQUAL "kernels")
    set(${out} ${PROJECT_SOURCE_DIR}/kernels PARENT_SCOPE)
  else()
    set(${out} ${PROJECT_SOURCE_DIR}/src/${layer} PARENT_SCOPE)
  endif()
endfunction()

# Makes target (already added) the library of layer: its include root and its links to the layers below.
function(precis_layer_setup target layer)
  if(NOT DEFINED PRECIS_LAYER_USES_${layer} AND NOT layer IN_LIST PRECIS_LAYERS)
    message(FATAL_ERROR "precis_layer_setup: ${layer} is not a line of src/layers.txt")
  endif()
  set(root ${PROJECT_BINARY_DIR}/layers/${layer})
  # Links left by an earlier table go (the links only: never recurse into the folders they name).
  file(GLOB stale_links LIST_DIRECTORIES true ${root}/*)
  if(stale_links)
    file(REMOVE ${stale_links})
  endif()
  file(MAKE_DIRECTORY ${root})
  foreach(visible ${layer} ${PRECIS_LAYER_USES_${layer}})
    precis_layer_source_dir(${visible} dir)
    file(CREATE_LINK ${dir} ${root}/${visible} SYMBOLIC)
  endforeach()
  target_include_directories(${target} PUBLIC ${root})
  foreach(used ${PRECIS_LAYER_USES_${layer}})
    target_link_libraries(${target} PUBLIC precis_${used})
  endforeach()
  set_property(GLOBAL APPEND PROPERTY PRECIS_LAYER_TARGETS ${target})
endfunction()
