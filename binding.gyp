# The native addon is built by CMake through cmake-js (CMakeLists.txt, scripts/build-addon.mjs),
# which also builds llama.cpp. This file exists only so that tools looking for binding.gyp find
# the package's native build declared; it deliberately defines no targets, so node-gyp never
# becomes a second build of llama.cpp.
{
  "targets": []
}
