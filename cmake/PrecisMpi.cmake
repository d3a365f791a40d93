# PRECIS_MPI: `mpirun -np N precis run ...` (DESIGN §13, docs/scale-out.md). AUTO builds it when an
# MPI C library is found (Debian: libopenmpi-dev, and openmpi-bin for mpirun), ON requires it, OFF
# leaves it out. Sets PRECIS_HAVE_MPI.
set(PRECIS_MPI AUTO CACHE STRING "Build MPI support: AUTO (when an MPI C library is found), ON, OFF")
set_property(CACHE PRECIS_MPI PROPERTY STRINGS AUTO ON OFF)
set(PRECIS_HAVE_MPI OFF)
if(NOT PRECIS_MPI STREQUAL "OFF")
  if(PRECIS_MPI STREQUAL "ON")
    find_package(MPI REQUIRED COMPONENTS C)
  else()
    find_package(MPI QUIET COMPONENTS C)
  endif()
  if(MPI_C_FOUND)
    set(PRECIS_HAVE_MPI ON)
  endif()
endif()
