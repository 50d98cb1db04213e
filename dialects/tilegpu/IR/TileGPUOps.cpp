//===- TileGPUOps.cpp - verifiers of the tilegpu ops ----------------------===//
//
// What the traits cannot say: shapes and element types between buffers and tiles, and which
// layouts each op's operands and results must have.
//
//===----------------------------------------------------------------------===//

#include "tilegpu/IR/TileGPUDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace tessel::tilegpu;

#define GET_OP_CLASSES
#include "tilegpu/IR/TileGPUOps.cpp.inc"

namespace {

/// The operand layout of a tile, or a located error naming `what`.
FailureOr<DotOperandEncodingAttr> operandLayout(Operation *op, Type type, unsigned index,
                                                StringRef what) {
  auto layout = dyn_cast_or_null<DotOperandEncodingAttr>(
      cast<RankedTensorType>(type).getEncoding());
  if (!layout || layout.getOperand() != index)
    return op->emitOpError() << what << " must be in #tilegpu.dot_operand<operand = " << index
                             << ", …> layout, got " << type;
  return layout;
}

/// The mma layout of an accumulator tile, or a located error.
FailureOr<MmaEncodingAttr> accLayout(Operation *op, Type type) {
  auto layout = dyn_cast_or_null<MmaEncodingAttr>(cast<RankedTensorType>(type).getEncoding());
  if (!layout)
    return op->emitOpError() << "accumulator must be in a #tilegpu.mma layout, got " << type;
  return layout;
}

} // namespace

LogicalResult AllocOp::verify() {
  if (auto offset = getOffset(); offset && *offset < 0)
    return emitOpError("has a negative offset ") << *offset;
  if (auto stride = getStride(); stride && *stride < getResult().getType().getStageBytes())
    return emitOpError("has stages ")
           << *stride << " bytes apart, less than the " << getResult().getType().getStageBytes()
           << " bytes of one stage";
  return success();
}

LogicalResult AsyncCopyOp::verify() {
  auto desc = getDesc().getType();
  SharedBufferType buffer = getBuffer().getType();
  if (desc.getRank() != buffer.getShape().size())
    return emitOpError("copies a rank-")
           << desc.getRank() << " descriptor into a rank-" << buffer.getShape().size() << " buffer";
  if (desc.getElementType() != buffer.getElementType())
    return emitOpError("copies ") << desc.getElementType() << " elements into a buffer of "
                                  << buffer.getElementType();
  if (getOffsets().size() != desc.getRank())
    return emitOpError("needs one offset per descriptor dim (")
           << desc.getRank() << "), got " << getOffsets().size();
  int64_t rowBytes = buffer.getShape().back() * buffer.getElementType().getIntOrFloatBitWidth() / 8;
  if (rowBytes % 16 != 0)
    return emitOpError("copies 16-byte chunks, but a buffer row is ") << rowBytes << " bytes";
  return success();
}

LogicalResult AsyncWaitOp::verify() {
  if (getPending() < 0)
    return emitOpError("has a negative number of pending groups");
  return success();
}

LogicalResult LocalLoadOp::verify() {
  SharedBufferType buffer = getBuffer().getType();
  RankedTensorType result = getResult().getType();
  if (buffer.getElementType() != result.getElementType())
    return emitOpError("reads ") << buffer.getElementType() << " into a tile of "
                                 << result.getElementType();
  SmallVector<int64_t> shape(buffer.getShape());
  if (getTranspose())
    std::reverse(shape.begin(), shape.end());
  if (shape.size() != 2 || ArrayRef<int64_t>(shape) != result.getShape())
    return emitOpError("reads a buffer of ")
           << buffer << (getTranspose() ? " transposed" : "") << " into a tile of " << result;
  if (!isa_and_nonnull<DotOperandEncodingAttr>(result.getEncoding()))
    return emitOpError("reads into a #tilegpu.dot_operand layout, got ") << result;
  return success();
}

LogicalResult LocalStoreOp::verify() {
  SharedBufferType buffer = getBuffer().getType();
  RankedTensorType value = getValue().getType();
  if (buffer.getElementType() != value.getElementType())
    return emitOpError("writes a tile of ")
           << value.getElementType() << " into a buffer of " << buffer.getElementType();
  if (buffer.getShape() != value.getShape())
    return emitOpError("writes a tile of ") << value << " into a buffer of " << buffer;
  if (!isa_and_nonnull<MmaEncodingAttr>(value.getEncoding()))
    return emitOpError("writes a tile in a #tilegpu.mma layout, got ") << value;
  return success();
}

LogicalResult BulkAddOp::verify() {
  RankedTensorType value = getValue().getType();
  SharedBufferType buffer = getBuffer().getType();
  if (failed(accLayout(*this, value)))
    return failure();
  if (getRunDim() != 0 && getRunDim() != 1)
    return emitOpError("runs along dim 0 or 1, got ") << getRunDim();
  if (value.getRank() != 2 || getOffsets().size() != 2 || getDesc().getType().getRank() != 2)
    return emitOpError("adds a 2-D tile at two offsets of a 2-D descriptor");
  if (!buffer.getElementType().isF32() || !value.getElementType().isF32() ||
      getDesc().getType().getElementType() != value.getElementType())
    return emitOpError("adds float32 tiles through a float32 buffer");
  int64_t runLength = value.getShape()[getRunDim()];
  int64_t runs = value.getShape()[1 - getRunDim()];
  ArrayRef<int64_t> shape = buffer.getShape();
  if (shape.size() != 2 || shape[1] != runLength + 4 || shape[0] > runs || runs % shape[0] != 0 ||
      runLength % 4 != 0)
    return emitOpError("stages runs of ")
           << runLength << " elements (16-byte multiples) in rows of " << runLength + 4
           << ", a number of them that divides " << runs << "; the buffer is " << buffer;
  return success();
}

LogicalResult ConvertLayoutOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getResult().getType());
  if (in.getShape() != out.getShape() || in.getElementType() != out.getElementType())
    return emitOpError("changes more than the layout: ") << in << " to " << out;
  if (!in.getEncoding() || !out.getEncoding())
    return emitOpError("converts between two layouts; both types need one");
  return success();
}

LogicalResult MmaOp::verify() {
  FailureOr<DotOperandEncodingAttr> a = operandLayout(*this, getA().getType(), 0, "A");
  FailureOr<DotOperandEncodingAttr> b = operandLayout(*this, getB().getType(), 1, "B");
  FailureOr<MmaEncodingAttr> acc = accLayout(*this, getAcc().getType());
  if (failed(a) || failed(b) || failed(acc))
    return failure();
  if (acc->getKind() != MmaKind::MmaSync)
    return emitOpError("accumulates in ") << *acc << "; tilegpu.mma is mma.sync";
  if (a->getParent() != *acc || b->getParent() != *acc)
    return emitOpError("has operands of another mma layout than its accumulator");
  ArrayRef<int64_t> as = getA().getType().getShape(), bs = getB().getType().getShape(),
                    cs = getAcc().getType().getShape();
  if (as.size() != 2 || bs.size() != 2 || cs.size() != 2 || as[1] != bs[0] || as[0] != cs[0] ||
      bs[1] != cs[1])
    return emitOpError("multiplies ")
           << getA().getType() << " by " << getB().getType() << " into " << getAcc().getType();
  if (getA().getType().getElementType() != getB().getType().getElementType())
    return emitOpError("multiplies operands of two element types");
  if (as[1] % 16 != 0 || cs[1] % 8 != 0 || cs[0] != acc->getBlockRows())
    return emitOpError("needs K a multiple of 16, N of 8 and M = warps · warp_rows (")
           << acc->getBlockRows() << ")";
  return success();
}

LogicalResult WgmmaOp::verify() {
  FailureOr<DotOperandEncodingAttr> a = operandLayout(*this, getA().getType(), 0, "A");
  FailureOr<MmaEncodingAttr> acc = accLayout(*this, getAcc().getType());
  if (failed(a) || failed(acc))
    return failure();
  if (acc->getKind() != MmaKind::Wgmma)
    return emitOpError("accumulates in ") << *acc << "; tilegpu.wgmma needs a wgmma layout";
  if (a->getParent() != *acc)
    return emitOpError("has an A operand of another mma layout than its accumulator");
  SharedBufferType b = getB().getType();
  ArrayRef<int64_t> as = getA().getType().getShape(), cs = getAcc().getType().getShape();
  SmallVector<int64_t> bs(b.getShape());
  if (getTransposeB())
    std::reverse(bs.begin(), bs.end());
  if (bs.size() != 2 || as[1] != bs[0] || as[0] != cs[0] || bs[1] != cs[1])
    return emitOpError("multiplies ")
           << getA().getType() << " by " << b << (getTransposeB() ? " (transposed)" : "")
           << " into " << getAcc().getType();
  if (b.getElementType() != getA().getType().getElementType())
    return emitOpError("multiplies operands of two element types");
  // A descriptor's swizzle: 128 bytes, or the width of narrower rows read K-major (an FP8
  // block kept transposed: 64 or 32 bytes).
  int64_t rowBytes = b.getShape().back() * b.getElementType().getIntOrFloatBitWidth() / 8;
  if (b.getSwizzle() != 128 &&
      !((rowBytes == 64 || rowBytes == 32) && b.getSwizzle() == rowBytes && getTransposeB()))
    return emitOpError("reads B through a 128-byte-swizzle descriptor (the rows' width for "
                       "64- or 32-byte rows read K-major); the buffer has swizzle ")
           << b.getSwizzle();
  if (cs[1] % 8 != 0 || cs[1] > 256 || as[1] % 16 != 0 || cs[0] != acc->getBlockRows())
    return emitOpError("needs N a multiple of 8 up to 256, K a multiple of 16 and M = warps · "
                       "warp_rows (")
           << acc->getBlockRows() << ")";
  return success();
}

LogicalResult WgmmaWaitOp::verify() {
  if (getPending() < 0)
    return emitOpError("has a negative number of pending groups");
  for (Value v : getValues()) {
    auto type = cast<RankedTensorType>(v.getType());
    if (type.getElementType().isF32() ? failed(accLayout(*this, type))
                                      : failed(operandLayout(*this, type, 0, "A")))
      return failure();
  }
  return success();
}

LogicalResult WarpSpecializeOp::verify() {
  int64_t producer = getProducerRegisters(), consumer = getConsumerRegisters();
  auto valid = [](int64_t r) { return r >= 24 && r <= 256 && r % 8 == 0; };
  if (!valid(producer) || !valid(consumer))
    return emitOpError("takes register counts that setmaxnreg accepts (24 to 256, multiples of "
                       "8), got ")
           << producer << " and " << consumer;
  if (getProducerWarps() % 4 != 0 || getProducerWarps() <= 0)
    return emitOpError("needs whole warpgroups of producer warps (setmaxnreg acts on a "
                       "warpgroup), got ")
           << getProducerWarps();
  return success();
}
