# cmake -DSOURCE_DIR=web -DOUTPUT_DIR=build/web -P install_web.cmake
# Copies index.html, css/, js/ and ECharts' ES module build into OUTPUT_DIR, rewriting only
# what changed and deleting files no longer in the sources. Without web/node_modules the
# dashboard is not installed at all (the server then answers 503 for /).
cmake_minimum_required(VERSION 3.18)
set(ECHARTS ${SOURCE_DIR}/node_modules/echarts/dist/echarts.esm.min.mjs)
if(NOT EXISTS ${ECHARTS})
  message(STATUS "dashboard not installed: web/node_modules is missing; run scripts/setup.sh "
                 "(or `npm ci` in web/)")
  file(REMOVE_RECURSE ${OUTPUT_DIR})
  return()
endif()

file(GLOB_RECURSE sources RELATIVE ${SOURCE_DIR}
     ${SOURCE_DIR}/index.html ${SOURCE_DIR}/css/*.css ${SOURCE_DIR}/js/*.js)
set(wanted "")
foreach(relative IN LISTS sources)
  configure_file(${SOURCE_DIR}/${relative} ${OUTPUT_DIR}/${relative} COPYONLY)
  list(APPEND wanted ${OUTPUT_DIR}/${relative})
endforeach()
# Served as .js: every static file server knows that type, and modules need it.
configure_file(${ECHARTS} ${OUTPUT_DIR}/vendor/echarts.esm.min.js COPYONLY)
configure_file(${SOURCE_DIR}/node_modules/echarts/LICENSE ${OUTPUT_DIR}/vendor/LICENSE-echarts COPYONLY)
list(APPEND wanted ${OUTPUT_DIR}/vendor/echarts.esm.min.js ${OUTPUT_DIR}/vendor/LICENSE-echarts)

file(GLOB_RECURSE present ${OUTPUT_DIR}/*)
foreach(file IN LISTS present)
  if(NOT file IN_LIST wanted)
    file(REMOVE ${file})
  endif()
endforeach()
