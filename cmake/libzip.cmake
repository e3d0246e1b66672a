# libzip::zip, found directly: libzip-dev's own CMake package also needs the zipcmp/zipmerge
# tools (another package). Included by the build and by the installed package's config.
if(NOT TARGET libzip::zip)
  find_path(LIBZIP_INCLUDE_DIR zip.h REQUIRED)
  find_library(LIBZIP_LIBRARY zip REQUIRED)
  add_library(libzip::zip UNKNOWN IMPORTED)
  set_target_properties(libzip::zip PROPERTIES IMPORTED_LOCATION "${LIBZIP_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${LIBZIP_INCLUDE_DIR}")
endif()
