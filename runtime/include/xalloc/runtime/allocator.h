// The graceful allocator: stages that each do one thing and wrap an upstream, composed into a
// stack (stats -> log -> retry ladder -> backend). Plain C++ with no libtorch: the CPU backend
// that plugs the stack into libtorch lives in install.h.
//
// A stage or backend returns nullptr when it cannot allocate; only the top of a stack throws
// (OutOfMemory, carrying the stats).
#pragma once

#pragma once

// One stage per header (RMM style); this one includes them all.
#include "xalloc/runtime/log_stage.h"
#include "xalloc/runtime/retry.h"
#include "xalloc/runtime/simulated_device.h"
#include "xalloc/runtime/stack.h"
#include "xalloc/runtime/stats.h"
#include "xalloc/runtime/upstream.h"
