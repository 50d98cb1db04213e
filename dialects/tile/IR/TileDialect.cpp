//===- TileDialect.cpp - the tile dialect and its types -------------------===//
//
// Registration of the dialect's ops and types, and the verifier of the descriptor type.
//
//===----------------------------------------------------------------------===//

#include "tile/IR/TileDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace tessel::tile;

#include "tile/IR/TileDialect.cpp.inc"
#include "tile/IR/TileEnums.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "tile/IR/TileTypes.cpp.inc"

void TileDialect::initialize() {
  registerTypes();
  addOperations<
#define GET_OP_LIST
#include "tile/IR/TileOps.cpp.inc"
      >();
}

void TileDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "tile/IR/TileTypes.cpp.inc"
      >();
}

Operation *TileDialect::materializeConstant(OpBuilder &builder, Attribute value, Type type,
                                            Location loc) {
  return arith::ConstantOp::materialize(builder, value, type, loc);
}

LogicalResult DescType::verify(function_ref<InFlightDiagnostic()> emitError, unsigned rank,
                               Type elementType) {
  if (rank < 1 || rank > 4)
    return emitError() << "descriptor rank must be between 1 and 4, got " << rank;
  if (!isa<Float8E4M3FNType>(elementType) && !elementType.isF16() && !elementType.isBF16() &&
      !elementType.isF32() && !elementType.isInteger(32))
    return emitError() << "descriptor element type must be f8E4M3FN, f16, bf16, f32 or i32, got "
                       << elementType;
  return success();
}
