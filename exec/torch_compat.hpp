// The one place where differences between LibTorch versions are handled.
//
// pipetwin builds against Debian's LibTorch 1.13 (CPU) and the LibTorch 2.x of the GPU machine.
// Only the stable C++ API is used elsewhere; what changed between the two lives here.
//
// Thread-safety: constants and macros only.
#pragma once

#include <torch/version.h>

// c10::Allocator::allocate lost its const qualifier in 2.3, and copy_data became pure virtual.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define PIPETWIN_ALLOCATOR_CONST
#define PIPETWIN_ALLOCATOR_HAS_COPY_DATA 1
#else
#define PIPETWIN_ALLOCATOR_CONST const
#define PIPETWIN_ALLOCATOR_HAS_COPY_DATA 0
#endif
