# Third-party libraries, all from Debian 12 packages (see README "Dependencies").
find_package(HDF5 REQUIRED COMPONENTS C)
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)

# OpenBLAS through pkg-config: it also gives the cblas.h include directory, which FindBLAS does not.
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
pkg_check_modules(YAML REQUIRED IMPORTED_TARGET yaml-0.1)

# Debian's libcjson-dev ships no pkg-config file for the plain library in every release.
find_path(CJSON_INCLUDE_DIR cjson/cJSON.h REQUIRED)
find_library(CJSON_LIBRARY cjson REQUIRED)
add_library(precis_cjson INTERFACE)
target_include_directories(precis_cjson INTERFACE ${CJSON_INCLUDE_DIR})
target_link_libraries(precis_cjson INTERFACE ${CJSON_LIBRARY})

add_library(precis_hdf5 INTERFACE)
target_include_directories(precis_hdf5 INTERFACE ${HDF5_C_INCLUDE_DIRS} ${HDF5_INCLUDE_DIRS})
target_link_libraries(precis_hdf5 INTERFACE ${HDF5_C_LIBRARIES})
target_compile_definitions(precis_hdf5 INTERFACE ${HDF5_C_DEFINITIONS} H5_USE_110_API)

find_library(MATH_LIBRARY m)
