//===- AttentionDots.cpp - the two dots of an attention loop --------------===//

#include "tilegpu/Transforms/AttentionDots.h"

using namespace mlir;
namespace tile = tessel::tile;

bool tessel::tilegpu::isZeroSplat(Value v) {
  auto cst = v.getDefiningOp<arith::ConstantOp>();
  auto dense = cst ? dyn_cast<DenseFPElementsAttr>(cst.getValue()) : DenseFPElementsAttr();
  return dense && dense.isSplat() && dense.getSplatValue<APFloat>().isPosZero();
}

std::optional<tessel::tilegpu::AttentionDots>
tessel::tilegpu::matchAttentionDots(scf::ForOp loop, bool transposedV) {
  SmallVector<tile::DotOp> dots(loop.getBody()->getOps<tile::DotOp>());
  if (dots.size() != 2)
    return std::nullopt;
  AttentionDots m{dots[0], dots[1], {}, {}, 0, {}};
  auto layout = dyn_cast_or_null<MmaEncodingAttr>(
      cast<RankedTensorType>(m.sDot.getResult().getType()).getEncoding());
  if (!layout || layout.getKind() != MmaKind::Wgmma)
    return std::nullopt;
  // S = Q·K_jᵀ: Q from outside the loop, K read transposed, a fresh accumulator.
  m.kRead = m.sDot.getB().getDefiningOp<LocalLoadOp>();
  if (!m.kRead || !m.kRead.getTranspose() || !m.kRead->hasOneUse() ||
      !loop.isDefinedOutsideOfLoop(m.sDot.getA()) ||
      !loop.isDefinedOutsideOfLoop(m.sDot.getAcc()) || !isZeroSplat(m.sDot.getAcc()))
    return std::nullopt;
  // P·V: P made in the body, V read as stored (or transposed, where asked).
  m.vRead = m.pvDot.getB().getDefiningOp<LocalLoadOp>();
  if (!m.vRead || (m.vRead.getTranspose() && !transposedV) || !m.vRead->hasOneUse() ||
      loop.isDefinedOutsideOfLoop(m.pvDot.getA()))
    return std::nullopt;
  // f(O): the carried O, or O times something, used only by the dot.
  Value acc = m.pvDot.getAcc();
  if (auto mul = acc.getDefiningOp<arith::MulFOp>()) {
    if (!acc.hasOneUse() || !isa<BlockArgument>(mul.getLhs()))
      return std::nullopt;
    m.rescale = mul;
    acc = mul.getLhs();
  }
  auto arg = dyn_cast<BlockArgument>(acc);
  if (!arg || arg.getOwner() != loop.getBody() || arg.getArgNumber() == 0 || !arg.hasOneUse())
    return std::nullopt;
  m.accIndex = arg.getArgNumber() - 1;
  // O' is yielded in O's place and used nowhere else.
  Value result = m.pvDot.getResult();
  Operation *yield = loop.getBody()->getTerminator();
  if (!result.hasOneUse() || *result.getUsers().begin() != yield ||
      yield->getOperand(m.accIndex) != result)
    return std::nullopt;
  return m;
}

void tessel::tilegpu::yieldWaitedO(AttentionDots &m, OpBuilder &b, Value waited, Block *body,
                                   bool applyRescale) {
  Value fo = waited;
  if (m.rescale && applyRescale)
    fo = arith::MulFOp::create(b, m.rescale.getLoc(), fo, m.rescale.getRhs());
  body->getTerminator()->setOperand(m.accIndex, fo);
  m.pvDot.erase();
  if (m.rescale)
    m.rescale.erase();
  m.sDot.erase();
  m.kRead.erase();
  m.vRead.erase();
}

tessel::tilegpu::MbarrierWaitOp tessel::tilegpu::waitBefore(LocalLoadOp read,
                                                            FenceAsyncSharedOp &fence) {
  fence = dyn_cast_or_null<FenceAsyncSharedOp>(read->getPrevNode());
  auto wait = fence ? dyn_cast_or_null<MbarrierWaitOp>(fence->getPrevNode()) : MbarrierWaitOp();
  return wait && !wait.getPred() && wait.getStage() == read.getStage() ? wait : MbarrierWaitOp();
}
