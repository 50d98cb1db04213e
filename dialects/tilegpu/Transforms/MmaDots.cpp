//===- MmaDots.cpp - mma.sync dots as tilegpu.mma ---------------------------------------------===//
//
// tilegpu-mma-dots: on an mma.sync program with its layouts assigned, every tile.dot whose
// operands carry their #tilegpu.dot_operand layouts becomes a tilegpu.mma. What
// tilegpu-async-dots{eager} is to the wgmma dots: convert-tile-to-mma then lowers the GPU-level
// ops only (tilegpu.mma to mma.sync, tilegpu.wgmma and its wait to wgmma.mma_async), never a
// tile-level dot.
//
//===------------------------------------------------------------------------------------------===//

#include "tilegpu/Transforms/MmaClass.h"
#include "tilegpu/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace tessel::tilegpu {
#define GEN_PASS_DEF_TILEGPUMMADOTS
#include "tilegpu/Transforms/Passes.h.inc"
} // namespace tessel::tilegpu

using namespace mlir;
using namespace tessel::tilegpu;
namespace tile = tessel::tile;

namespace {

bool inOperandLayout(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && isa_and_nonnull<DotOperandEncodingAttr>(type.getEncoding());
}

struct MmaDots : tessel::tilegpu::impl::TileGPUMmaDotsBase<MmaDots> {
  using Base::Base;

  void runOnOperation() override { mmaDots(getOperation()); }
};

} // namespace

void tessel::tilegpu::mmaDots(func::FuncOp program) {
  MmaEncodingAttr layout = programLayout(program);
  if (!layout || layout.getKind() != MmaKind::MmaSync)
    return;
  SmallVector<tile::DotOp> dots;
  program.walk([&](tile::DotOp dot) {
    if (inOperandLayout(dot.getA()) && inOperandLayout(dot.getB()))
      dots.push_back(dot);
  });
  for (tile::DotOp dot : dots) {
    OpBuilder b(dot);
    auto mma = MmaOp::create(b, dot.getLoc(), dot.getResult().getType(), dot.getA(), dot.getB(),
                             dot.getAcc());
    dot.getResult().replaceAllUsesWith(mma.getResult());
    dot.erase();
  }
}
