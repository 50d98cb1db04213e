//===- SharedMemoryPlan.h - liveness-based shared-memory packing -*- C++ -*-===//
//
// convert-tile-to-gpu keeps tile values in shared-memory buffers. This plan decides where each
// buffer lives inside one workgroup arena: it numbers the kernel's ops in program order, computes
// each buffer's live interval from the ops that read or write it (extended over every loop it
// must survive), and packs the buffers first-fit so that buffers with disjoint intervals share
// bytes. Private to lib/Conversion/TileToGPU.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_LIB_CONVERSION_TILETOGPU_SHAREDMEMORYPLAN_H
#define TESSEL_LIB_CONVERSION_TILETOGPU_SHAREDMEMORYPLAN_H

#include "mlir/IR/Region.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>

namespace tessel {

/// Where one buffer goes: its live interval over the op numbering (inclusive) and its byte
/// offset in the arena.
struct BufferPlacement {
  int64_t bytes = 0;
  int64_t start = 0;
  int64_t end = -1;
  int64_t offset = 0;
};

struct SharedMemoryPlan {
  /// One entry per buffer, in the order they were given.
  llvm::SmallVector<BufferPlacement> buffers;
  /// Bytes the arena needs (a multiple of the alignment).
  int64_t arenaBytes = 0;
};

/// Plans `buffers` (memref values used only by ops inside `body`; `bytes[i]` is the size of
/// `buffers[i]`) into one arena. Every offset is a multiple of `alignment`. A buffer's interval
/// spans every op that uses it; a loop that holds some but not all of those uses, or holds the
/// first use and that use does not write (the value comes from an earlier iteration), is spanned
/// as a whole. Two buffers share bytes only when their intervals are disjoint.
SharedMemoryPlan planSharedMemory(mlir::Region &body, llvm::ArrayRef<mlir::Value> buffers,
                                  llvm::ArrayRef<int64_t> bytes, int64_t alignment);

} // namespace tessel

#endif // TESSEL_LIB_CONVERSION_TILETOGPU_SHAREDMEMORYPLAN_H
