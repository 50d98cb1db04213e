//===- TileGPUDialect.h - the GPU level: dialect, layouts, ops --*- C++ -*-===//
//
// The one header to include for the tilegpu dialect: dialect, layout attributes, the
// shared-memory buffer type, enums and ops, plus the queries on layouts the passes share.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_TILEGPU_IR_TILEGPUDIALECT_H
#define TESSEL_TILEGPU_IR_TILEGPUDIALECT_H

#include "tile/IR/TileDialect.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "tilegpu/IR/TileGPUDialect.h.inc"
#include "tilegpu/IR/TileGPUEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "tilegpu/IR/TileGPUAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "tilegpu/IR/TileGPUTypes.h.inc"

#define GET_OP_CLASSES
#include "tilegpu/IR/TileGPUOps.h.inc"

namespace tessel::tilegpu {

/// The mma layout a tilegpu encoding derives from (itself, or a slice's or operand's parent);
/// null for other encodings and for tensor types without one.
MmaEncodingAttr getMmaParent(mlir::Attribute encoding);

/// The blocked layout a tilegpu encoding derives from (itself, or a slice's parent); null for
/// other encodings and for tensor types without one.
BlockedEncodingAttr getBlockedParent(mlir::Attribute encoding);

/// `type` with `encoding` (null: without one).
mlir::RankedTensorType withEncoding(mlir::RankedTensorType type, mlir::Attribute encoding);

} // namespace tessel::tilegpu

#endif // TESSEL_TILEGPU_IR_TILEGPUDIALECT_H
