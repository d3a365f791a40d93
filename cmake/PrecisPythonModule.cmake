# PRECIS_PYTHON_MODULE=AUTO|ON|OFF: the Python extension (python/, DESIGN §15) needs CPython >= 3.11
# with its headers (Debian: python3-dev): the stable ABI gained the buffer protocol in 3.11, so one
# abi3 module serves 3.11 and later. Its static libraries are linked into a shared module, so the
# whole build is position-independent code when it is on.
set(PRECIS_HAVE_PYTHON_MODULE OFF)
if(NOT PRECIS_PYTHON_MODULE STREQUAL "OFF")
  if(PRECIS_SANITIZE AND PRECIS_PYTHON_MODULE STREQUAL "AUTO")
    # An ASan-instrumented module cannot be loaded by an uninstrumented interpreter.
    message(STATUS "Python module: off in the sanitizer build")
  else()
    if(PRECIS_PYTHON_MODULE STREQUAL "ON")
      find_package(Python 3.11 REQUIRED COMPONENTS Interpreter Development.Module)
    else()
      find_package(Python 3.11 COMPONENTS Interpreter Development.Module)
    endif()
    if(Python_Development.Module_FOUND)
      set(PRECIS_HAVE_PYTHON_MODULE ON)
      set(CMAKE_POSITION_INDEPENDENT_CODE ON)
    else()
      message(STATUS "Python module: off (no Python >= 3.11 with headers; install python3-dev)")
    endif()
  endif()
endif()
