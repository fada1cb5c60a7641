# LibTorch, found once for exec/ and models/. Debian's libtorch-dev 1.13 ships TorchConfig.cmake;
# on the GPU machine the PyTorch wheel's copy is found through CMAKE_PREFIX_PATH.
find_package(Torch REQUIRED)
# LibTorch's headers come first in every target that can include them (models/, exec/, cli/,
# tests/, added after this), ahead of the include folders the other packages' CMake files name.
# On Debian both are /usr/include; on the GPU machine (scripts/gpu/build.sh) the Debian packages
# sit in a private prefix, and a header the wheel bundles must win over Debian's copy of it, as
# LibTorch was compiled against its own.
include_directories(BEFORE SYSTEM ${TORCH_INCLUDE_DIRS})
