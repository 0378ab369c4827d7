# The native addon is built by CMake through cmake-js (CMakeLists.txt, scripts/build-addon.mjs,
# run by the package's own `install` script), which also builds llama.cpp. This file only marks
# the package as having a native build for tools that look for binding.gyp (npm records
# `gypfile`); it deliberately defines no targets, so node-gyp never becomes a second build of
# llama.cpp. npm's implicit `node-gyp rebuild` does not apply: the package has an install script.
{
  "targets": []
}
