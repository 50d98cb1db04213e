//===- TileAttrNames.h - names of the tile dialect's discardable attributes -*- C++ -*-===//
//
// Attribute names that code outside the dialect's passes reads (the compile driver), without the
// dialect's generated headers.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_TILE_IR_TILEATTRNAMES_H
#define TESSEL_TILE_IR_TILEATTRNAMES_H

#include "llvm/ADT/StringRef.h"

namespace tessel::tile {
/// On an f32 argument of a kernel: every launch passes a value in [2^-64, 2^64] (the JIT
/// specialises float scalars on that range, tessel/runtime.py float_range), so products of it
/// with moderate constants are positive and finite. docs/tile-dialect.md, "Argument attributes".
inline constexpr llvm::StringLiteral kModerateAttr = "tile.moderate";
} // namespace tessel::tile

#endif // TESSEL_TILE_IR_TILEATTRNAMES_H
