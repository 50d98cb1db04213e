//===- TileDialect.h - the tile dialect, its types and ops ------*- C++ -*-===//
//
// The one header to include for the tile dialect: dialect, types, enums and ops.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_TILE_IR_TILEDIALECT_H
#define TESSEL_TILE_IR_TILEDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "tile/IR/TileAttrNames.h"
#include "tile/IR/TileDialect.h.inc"
#include "tile/IR/TileEnums.h.inc"

#define GET_TYPEDEF_CLASSES
#include "tile/IR/TileTypes.h.inc"

#define GET_OP_CLASSES
#include "tile/IR/TileOps.h.inc"

namespace tessel::tile {
/// Whether `op` computes each element from its operands' elements alone, so that a lowering
/// emits it once a register or element (emitScalarOp): an arith or math op without regions, or
/// tile.mulhiui.
bool isElementwiseOp(mlir::Operation *op);
} // namespace tessel::tile

#endif // TESSEL_TILE_IR_TILEDIALECT_H
