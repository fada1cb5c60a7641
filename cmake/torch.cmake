# LibTorch, found once for exec/ and models/. Debian's libtorch-dev 1.13 ships TorchConfig.cmake;
# on the GPU machine the PyTorch wheel's copy is found through CMAKE_PREFIX_PATH.
find_package(Torch REQUIRED)
