//===- TileGPUDialect.cpp - the tilegpu dialect, its layouts and types ----===//
//
// Registration, the verifiers of the layout attributes and of the shared-memory buffer type,
// and the buffer type's assembly format (`!tilegpu.smem<64x128xf16, stages = 2, swizzle = 128>`).
//
//===----------------------------------------------------------------------===//

#include "tilegpu/IR/TileGPUDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace tessel::tilegpu;

#include "tilegpu/IR/TileGPUDialect.cpp.inc"
#include "tilegpu/IR/TileGPUEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "tilegpu/IR/TileGPUAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "tilegpu/IR/TileGPUTypes.cpp.inc"

namespace {

/// Printed IR names layouts by short aliases (`#mma`, `#row`/`#col` for its slices, `#op_a`/
/// `#op_b` for its operands, `#blocked`), as Triton's GPU level does: a layout's long form
/// appears once, at the top.
struct TileGPUAsmInterface : OpAsmDialectInterface {
  using OpAsmDialectInterface::OpAsmDialectInterface;

  AliasResult getAlias(Attribute attr, raw_ostream &os) const override {
    if (isa<MmaEncodingAttr>(attr))
      os << "mma";
    else if (auto slice = dyn_cast<SliceEncodingAttr>(attr))
      os << (slice.getDim() == 1 ? "row" : "col");
    else if (auto op = dyn_cast<DotOperandEncodingAttr>(attr))
      os << (op.getOperand() == 0 ? "op_a" : "op_b");
    else if (isa<BlockedEncodingAttr>(attr))
      os << "blocked";
    else
      return AliasResult::NoAlias;
    return AliasResult::FinalAlias;
  }
};

} // namespace

void TileGPUDialect::initialize() {
  addInterfaces<TileGPUAsmInterface>();
  registerAttributes();
  registerTypes();
  addOperations<
#define GET_OP_LIST
#include "tilegpu/IR/TileGPUOps.cpp.inc"
      >();
}

void TileGPUDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "tilegpu/IR/TileGPUAttrs.cpp.inc"
      >();
}

void TileGPUDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "tilegpu/IR/TileGPUTypes.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Layouts
//===----------------------------------------------------------------------===//

LogicalResult MmaEncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError, MmaKind kind,
                                      int64_t warps, int64_t warpRows) {
  if (warps < 1)
    return emitError() << "needs at least one warp, got " << warps;
  if (warpRows != 16 && warpRows != 32)
    return emitError() << "warp_rows must be 16 or 32 (one or two m16 tiles), got " << warpRows;
  if (kind == MmaKind::Wgmma && (warpRows != 16 || warps % 4 != 0))
    return emitError() << "wgmma needs warp_rows = 16 and whole warpgroups (warps a multiple "
                          "of 4), got warps = "
                       << warps << ", warp_rows = " << warpRows;
  return success();
}

LogicalResult SliceEncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError, unsigned dim,
                                        Attribute parent) {
  if (dim > 1)
    return emitError() << "slices dim 0 (columns) or 1 (rows) of a 2-D layout, got " << dim;
  if (!isa_and_nonnull<MmaEncodingAttr, BlockedEncodingAttr>(parent))
    return emitError() << "needs an mma or blocked parent";
  return success();
}

LogicalResult DotOperandEncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                             unsigned operand, MmaEncodingAttr parent) {
  if (operand > 1)
    return emitError() << "operand is 0 (A) or 1 (B), got " << operand;
  if (!parent)
    return emitError() << "needs an mma parent";
  return success();
}

LogicalResult BlockedEncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                          int64_t threads, int64_t vector, int64_t threadsPerRow) {
  if (threads < 1 || threads > 1024 || !llvm::isPowerOf2_64(threads))
    return emitError() << "threads must be a power of two from 1 to 1024, got " << threads;
  if (vector < 1 || !llvm::isPowerOf2_64(vector))
    return emitError() << "vector must be a power of two, got " << vector;
  if (threadsPerRow < 1 || threads % threadsPerRow != 0 || !llvm::isPowerOf2_64(threadsPerRow))
    return emitError() << "threads_per_row must be a power of two dividing threads (" << threads
                       << "), got " << threadsPerRow;
  return success();
}

MmaEncodingAttr tessel::tilegpu::getMmaParent(Attribute encoding) {
  if (!encoding)
    return {};
  return llvm::TypeSwitch<Attribute, MmaEncodingAttr>(encoding)
      .Case([](MmaEncodingAttr mma) { return mma; })
      .Case([](SliceEncodingAttr slice) { return dyn_cast<MmaEncodingAttr>(slice.getParent()); })
      .Case([](DotOperandEncodingAttr op) { return op.getParent(); })
      .Default([](Attribute) { return MmaEncodingAttr(); });
}

BlockedEncodingAttr tessel::tilegpu::getBlockedParent(Attribute encoding) {
  if (auto slice = dyn_cast_or_null<SliceEncodingAttr>(encoding))
    encoding = slice.getParent();
  return dyn_cast_or_null<BlockedEncodingAttr>(encoding);
}

RankedTensorType tessel::tilegpu::withEncoding(RankedTensorType type, Attribute encoding) {
  return RankedTensorType::get(type.getShape(), type.getElementType(), encoding);
}

//===----------------------------------------------------------------------===//
// Shared-memory buffers
//===----------------------------------------------------------------------===//

LogicalResult SharedBufferType::verify(function_ref<InFlightDiagnostic()> emitError,
                                       ArrayRef<int64_t> shape, Type elementType, int64_t stages,
                                       int64_t swizzle) {
  if (shape.empty() || llvm::any_of(shape, [](int64_t d) { return d <= 0; }))
    return emitError() << "needs a static, non-empty shape";
  if (!elementType.isIntOrFloat() || elementType.getIntOrFloatBitWidth() % 8 != 0)
    return emitError() << "holds whole bytes per element, got " << elementType;
  if (stages < 1)
    return emitError() << "needs at least one stage, got " << stages;
  if (swizzle != 0 && swizzle != 32 && swizzle != 64 && swizzle != 128)
    return emitError() << "swizzle is 0, 32, 64 or 128 bytes, got " << swizzle;
  int64_t rowBytes = shape.back() * elementType.getIntOrFloatBitWidth() / 8;
  if (swizzle != 0 && rowBytes % 16 != 0)
    return emitError() << "swizzles 16-byte chunks, but a row is " << rowBytes << " bytes";
  return success();
}

int64_t SharedBufferType::getStageBytes() const {
  int64_t n = getElementType().getIntOrFloatBitWidth() / 8;
  for (int64_t d : getShape())
    n *= d;
  return n;
}

Type SharedBufferType::parse(AsmParser &parser) {
  SmallVector<int64_t> shape;
  Type elementType;
  int64_t stages = 1, swizzle = 0;
  if (parser.parseLess() ||
      parser.parseDimensionList(shape, /*allowDynamic=*/false, /*withTrailingX=*/true) ||
      parser.parseType(elementType) || parser.parseComma() || parser.parseKeyword("stages") ||
      parser.parseEqual() || parser.parseInteger(stages) || parser.parseComma() ||
      parser.parseKeyword("swizzle") || parser.parseEqual() || parser.parseInteger(swizzle) ||
      parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(parser.getNameLoc()); }, parser.getContext(),
                    shape, elementType, stages, swizzle);
}

void SharedBufferType::print(AsmPrinter &printer) const {
  printer << "<";
  for (int64_t d : getShape())
    printer << d << "x";
  printer << getElementType() << ", stages = " << getStages() << ", swizzle = " << getSwizzle()
          << ">";
}
