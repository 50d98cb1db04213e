//===- Registers.cpp - tile values in registers -----------------------------------------------===//
//
// The register layouts of tile values (Acc, Row, Col; docs/dev/codegen-mma.md): how many
// registers a tile takes, and materialize, which computes index and element-wise tiles on demand
// in the layout their consumer asks for (iota, splat, expand_dims, broadcast, constants,
// arith/math per register), including the reciprocal epilogue, the single-FFMA exponentials,
// the FFMA of a score and a spread bias, column ramps from one converted column, and the skipped
// accumulator rescale. Also the thread's row and column numbers.
//
//===------------------------------------------------------------------------------------------===//

#include "MmaKernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"

using tessel::conversion::approxEx2;

namespace tessel::mma {

namespace {
/// The column of register i of a column-layout vector, past the thread's quad column: two
/// neighbours in each slab of 8.
int64_t columnOffset(int64_t i) { return (i / 2) * 8 + (i % 2); }

/// `mulf(x, y) + spread` (either order) for an f32 product used only there: a multiply-add.
std::optional<std::pair<arith::MulFOp, Value>> productPlusSpread(Operation *def) {
  auto add = dyn_cast<arith::AddFOp>(def);
  if (!add || !cast<RankedTensorType>(add.getType()).getElementType().isF32())
    return std::nullopt;
  for (unsigned i = 0; i < 2; ++i) {
    auto mul = add->getOperand(i).getDefiningOp<arith::MulFOp>();
    Value other = add->getOperand(1 - i);
    if (mul && mul->hasOneUse() && (isRowBroadcast(other) || isColBroadcast(other)))
      return std::make_pair(mul, other);
  }
  return std::nullopt;
}

/// `sitofp(c·iota) · splat(k)` (either order, c = 1 without the multiply) for an f32 vector: c
/// and the scalar k.
std::optional<std::pair<int64_t, Value>> scaledColumnRamp(Operation *def) {
  auto mul = dyn_cast<arith::MulFOp>(def);
  if (!mul || !cast<RankedTensorType>(mul.getType()).getElementType().isF32() ||
      cast<RankedTensorType>(mul.getType()).getRank() != 1)
    return std::nullopt;
  for (unsigned i = 0; i < 2; ++i) {
    auto conv = mul->getOperand(i).getDefiningOp<arith::SIToFPOp>();
    auto splat = mul->getOperand(1 - i).getDefiningOp<tile::SplatOp>();
    if (!conv || !splat)
      continue;
    Value in = conv.getIn();
    int64_t c = 1;
    if (auto scaled = in.getDefiningOp<arith::MulIOp>()) {
      DenseIntElementsAttr dense;
      if (!matchPattern(scaled.getRhs(), m_Constant(&dense)) || !dense.isSplat())
        continue;
      c = dense.getSplatValue<APInt>().getSExtValue();
      in = scaled.getLhs();
    }
    if (in.getDefiningOp<tile::IotaOp>())
      return std::make_pair(c, splat.getValue());
  }
  return std::nullopt;
}
} // namespace

//===----------------------------------------------------------------------===//
// Registers of a tile value
//===----------------------------------------------------------------------===//

FailureOr<int64_t> MmaKernelBuilder::regCount(RankedTensorType type, Layout layout,
                                              Operation *user) {
  ArrayRef<int64_t> s = type.getShape();
  switch (layout) {
  case Layout::Acc:
    if (type.getRank() == 2 && s[0] == blockM && s[1] % 8 == 0)
      return mTiles * (s[1] / 8 * 4);
    break;
  case Layout::Row:
    if ((type.getRank() == 1 && s[0] == blockM) ||
        (type.getRank() == 2 && s[0] == blockM && s[1] == 1))
      return 2 * mTiles;
    break;
  case Layout::Col: {
    int64_t n = type.getRank() == 1 ? s[0] : (s[0] == 1 ? s[1] : -1);
    if (n > 0 && n % 8 == 0)
      return n / 8 * 2;
    break;
  }
  }
  return user->emitOpError("uses a tile of type ")
         << type << " in a way convert-tile-to-mma cannot place in registers";
}

/// Whether a tilegpu encoding is the register layout `layout` (Acc: the mma layout; Row and
/// Col: its row and column slices).
static bool isLayout(Attribute encoding, Layout layout) {
  if (layout == Layout::Acc)
    return isa<tilegpu::MmaEncodingAttr>(encoding);
  auto slice = dyn_cast<tilegpu::SliceEncodingAttr>(encoding);
  return slice && slice.getDim() == (layout == Layout::Row ? 1u : 0u);
}

FailureOr<SmallVector<Value>> MmaKernelBuilder::materialize(Value v, Layout layout,
                                                            Operation *user) {
  auto type = cast<RankedTensorType>(v.getType());
  // The registers are computed in the layout the tile's type says: a consumer that needs
  // another one means the layouts and this lowering disagree, which must not pass silently.
  if (Attribute encoding = type.getEncoding(); encoding && !isLayout(encoding, layout))
    return user->emitOpError("reads a tile of type ")
           << type << " in another layout than its own (convert-tile-to-mma)";
  auto e = eager.find(v);
  if (e != eager.end()) {
    if (e->second.first != layout)
      return user->emitOpError("needs a register tile in another layout than the one it has");
    return e->second.second;
  }
  std::pair<Value, int> key{v, static_cast<int>(layout)};
  for (auto &scope : llvm::reverse(lazy)) {
    auto it = scope.find(key);
    if (it != scope.end())
      return it->second;
  }
  FailureOr<int64_t> n = regCount(type, layout, user);
  if (failed(n))
    return failure();
  Operation *def = v.getDefiningOp();
  if (!def)
    return user->emitOpError("reads a tile block argument convert-tile-to-mma did not place");
  Location loc = def->getLoc();
  SmallVector<Value> regs;
  if (auto splat = dyn_cast<tile::SplatOp>(def)) {
    regs.assign(*n, scalars.lookup(splat.getValue()));
  } else if (auto cst = dyn_cast<arith::ConstantOp>(def)) {
    auto dense = dyn_cast<DenseElementsAttr>(cst.getValue());
    if (!dense || !dense.isSplat())
      return def->emitOpError("is a non-splat tile constant (convert-tile-to-mma)");
    Value s = arith::ConstantOp::create(b, loc, cast<TypedAttr>(dense.getSplatValue<Attribute>()));
    regs.assign(*n, s);
  } else if (isa<tile::IotaOp>(def)) {
    if (layout == Layout::Row) {
      regs = rowIndices();
    } else if (layout == Layout::Col) {
      for (int64_t i = 0; i < *n; ++i)
        regs.push_back(arith::AddIOp::create(b, loc, quadColumn(), ci32(columnOffset(i))));
    } else {
      return def->emitOpError("is an iota used as a 2-D tile");
    }
  } else if (auto ramp = layout == Layout::Col ? scaledColumnRamp(def)
                                               : std::optional<std::pair<int64_t, Value>>();
             ramp) {
    // sitofp(c·iota)·k per column: fma(c·offset, k, c·quad·k) from the quad's first column and
    // each register's constant offset. Nothing but that column survives the loop when k is read
    // inside it (a bias's column part, tile-separate-bias), where the converted columns would
    // otherwise be hoisted and held: a register per column.
    auto [c, k] = *ramp;
    Value scale = scalars.lookup(k);
    Value quad = arith::SIToFPOp::create(b, loc, b.getF32Type(),
                                         arith::MulIOp::create(b, loc, quadColumn(), ci32(c)));
    Value base = arith::MulFOp::create(b, loc, quad, scale);
    for (int64_t i = 0; i < *n; ++i) {
      Value offset = arith::ConstantOp::create(
          b, loc, b.getF32FloatAttr(static_cast<float>(c * columnOffset(i))));
      regs.push_back(LLVM::FMAOp::create(b, loc, offset, scale, base));
    }
  } else if (auto gather = dyn_cast<tile::GatherOp>(def)) {
    FailureOr<SmallVector<Value>> read = gatherRegisters(gather, layout, *n);
    if (failed(read))
      return failure();
    regs = *read;
  } else if (auto ed = dyn_cast<tile::ExpandDimsOp>(def)) {
    Layout want = ed.getAxis() == 1 ? Layout::Row : Layout::Col;
    if (want != layout)
      return user->emitOpError("uses an expand_dims along the other axis than it broadcasts");
    FailureOr<SmallVector<Value>> in = materialize(ed.getInput(), layout, def);
    if (failed(in))
      return failure();
    regs = *in;
  } else if (auto bc = dyn_cast<tile::BroadcastOp>(def)) {
    auto inType = cast<RankedTensorType>(bc.getInput().getType());
    if (inType.getShape() == type.getShape()) {
      FailureOr<SmallVector<Value>> in = materialize(bc.getInput(), layout, def);
      if (failed(in))
        return failure();
      regs = *in;
    } else if (layout == Layout::Acc && inType.getShape()[1] == 1) {
      FailureOr<SmallVector<Value>> in = materialize(bc.getInput(), Layout::Row, def);
      if (failed(in))
        return failure();
      for (int64_t i = 0; i < *n; ++i)
        regs.push_back((*in)[accRow(i, type.getShape()[1] / 8)]);
    } else if (layout == Layout::Acc && inType.getShape()[0] == 1) {
      FailureOr<SmallVector<Value>> in = materialize(bc.getInput(), Layout::Col, def);
      if (failed(in))
        return failure();
      for (int64_t i = 0; i < *n; ++i)
        regs.push_back((*in)[accCol(i, type.getShape()[1] / 8)]);
    } else {
      return def->emitOpError("is a broadcast convert-tile-to-mma cannot place in registers");
    }
  } else if (auto div = dyn_cast<arith::DivFOp>(def);
             div && layout == Layout::Acc && isRowBroadcast(div.getRhs())) {
    // x / broadcast(l): one reciprocal per row (two per thread), then a multiply per element
    // (the epilogue's acc / l), instead of an IEEE division per element.
    FailureOr<SmallVector<Value>> num = materialize(div.getLhs(), Layout::Acc, def);
    if (failed(num))
      return failure();
    FailureOr<SmallVector<Value>> den = materialize(
        div.getRhs().getDefiningOp<tile::BroadcastOp>().getInput(), Layout::Row, def);
    if (failed(den))
      return failure();
    Value one = arith::ConstantOp::create(b, loc, b.getFloatAttr(type.getElementType(), 1.0));
    SmallVector<Value> inv;
    for (Value d : *den)
      inv.push_back(arith::DivFOp::create(b, loc, one, d));
    for (int64_t i = 0; i < *n; ++i)
      regs.push_back(
          arith::MulFOp::create(b, loc, (*num)[i], inv[accRow(i, type.getShape()[1] / 8)]));
  } else if (auto fma = layout == Layout::Acc ? productPlusSpread(def)
                                              : std::optional<std::pair<arith::MulFOp, Value>>();
             fma) {
    // x·y + spread(v): one FFMA per element (the score plus the column part of a bias that
    // tile-separate-bias split into rows and columns).
    auto [mul, addend] = *fma;
    FailureOr<SmallVector<Value>> x = materialize(mul.getLhs(), layout, def);
    FailureOr<SmallVector<Value>> y = materialize(mul.getRhs(), layout, def);
    FailureOr<SmallVector<Value>> z = materialize(addend, layout, def);
    if (failed(x) || failed(y) || failed(z))
      return failure();
    for (int64_t i = 0; i < *n; ++i)
      regs.push_back(LLVM::FMAOp::create(b, loc, (*x)[i], (*y)[i], (*z)[i]));
  } else if (auto sub = isa<math::Exp2Op>(def) && layout == Layout::Acc
                            ? def->getOperand(0).getDefiningOp<arith::SubFOp>()
                            : arith::SubFOp();
             sub && (isRowBroadcast(sub.getRhs()) || isColBroadcast(sub.getRhs())) &&
             prepareScaled(sub.getLhs())) {
    // exp2(S·c - m) with a row- or column-broadcast m (the forward's row max, the backward's
    // LSE): one FFMA per element, ex2(fma(T, k, -m)).
    ScaledScores m = *prepareScaled(sub.getLhs());
    bool byRow = isRowBroadcast(sub.getRhs());
    FailureOr<SmallVector<Value>> vec = materialize(
        sub.getRhs().getDefiningOp<tile::BroadcastOp>().getInput(),
        byRow ? Layout::Row : Layout::Col, def);
    FailureOr<SmallVector<Value>> x = maskedScores(m, def);
    if (failed(vec) || failed(x))
      return failure();
    Value k = scaleFactor.lookup(m.product);
    int64_t slabs = type.getShape()[1] / 8;
    for (int64_t i = 0; i < *n; ++i) {
      Value negM = arith::NegFOp::create(b, loc,
                                         (*vec)[byRow ? accRow(i, slabs) : accCol(i, slabs)]);
      regs.push_back(
          approxEx2(b, loc, LLVM::FMAOp::create(b, loc, (*x)[i], k, negM), /*ftz=*/true));
    }
  } else if (auto mul = dyn_cast<arith::MulFOp>(def);
             mul && layout == Layout::Acc && v.hasOneUse() &&
             isSynchronousDot(*v.getUsers().begin()) && isRowBroadcast(mul.getRhs()) &&
             eager.count(mul.getLhs())) {
    // The accumulator rescale O·alpha of the online softmax, skipped by the whole warp when
    // every alpha of its rows is exactly 1 (no row max moved: most iterations once the maxima
    // have settled): O·1 = O, so the skip is exact. A warp-uniform branch (vote.any).
    FailureOr<SmallVector<Value>> acc = materialize(mul.getLhs(), Layout::Acc, def);
    FailureOr<SmallVector<Value>> alpha = materialize(
        mul.getRhs().getDefiningOp<tile::BroadcastOp>().getInput(), Layout::Row, def);
    if (failed(acc) || failed(alpha))
      return failure();
    Value one = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1.0f));
    Value moved;
    for (Value a : *alpha) {
      Value ne = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, a, one);
      moved = moved ? Value(arith::OrIOp::create(b, loc, moved, ne)) : ne;
    }
    Value any = NVVM::VoteSyncOp::create(b, loc, b.getI1Type(), ci32(-1), moved,
                                         NVVM::VoteSyncKind::any);
    int64_t slabs = type.getShape()[1] / 8;
    SmallVector<Type> types(*n, b.getF32Type());
    auto ifOp = scf::IfOp::create(b, loc, types, any, /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      SmallVector<Value> scaled;
      for (int64_t i = 0; i < *n; ++i)
        scaled.push_back(arith::MulFOp::create(b, loc, (*acc)[i], (*alpha)[accRow(i, slabs)]));
      scf::YieldOp::create(b, loc, scaled);
      b.setInsertionPointToStart(ifOp.elseBlock());
      scf::YieldOp::create(b, loc, *acc);
    }
    regs.assign(ifOp.getResults().begin(), ifOp.getResults().end());
  } else if (auto mul = dyn_cast<arith::MulFOp>(def); mul && scaleFactor.count(v)) {
    // S·c for another consumer: T·k (the same value bit for bit).
    FailureOr<SmallVector<Value>> t = materialize(matchScaledScores(v)->scores, layout, def);
    if (failed(t))
      return failure();
    Value k = scaleFactor.lookup(v);
    for (Value x : *t)
      regs.push_back(arith::MulFOp::create(b, loc, x, k));
  } else if (tile::isElementwiseOp(def)) {
    SmallVector<SmallVector<Value>> ins;
    for (Value o : def->getOperands()) {
      if (isTensor(o.getType())) {
        FailureOr<SmallVector<Value>> in = materialize(o, layout, def);
        if (failed(in))
          return failure();
        ins.push_back(*in);
      } else {
        ins.push_back(SmallVector<Value>(*n, scalars.lookup(o)));
      }
    }
    if (def->getNumResults() != 1)
      return def->emitOpError("has several results (convert-tile-to-mma)");
    Type elem = type.getElementType();
    for (int64_t i = 0; i < *n; ++i) {
      SmallVector<Value> operands;
      for (auto &in : ins)
        operands.push_back(in[i]);
      regs.push_back(
          tessel::conversion::emitScalarOp(b, def, operands, TypeRange{elem}, /*ftz=*/true)[0]);
    }
  } else {
    return def->emitOpError("makes a tile convert-tile-to-mma cannot compute in registers");
  }
  lazy.back()[key] = regs;
  return regs;
}

SmallVector<Value> MmaKernelBuilder::rowIndices() {
  Location loc = b.getUnknownLoc();
  Value t = tid;
  Value row0 = arith::AddIOp::create(
      b, loc,
      arith::MulIOp::create(b, loc, arith::ShRUIOp::create(b, loc, t, ci32(5)), ci32(warpRows)),
      arith::ShRUIOp::create(b, loc, arith::AndIOp::create(b, loc, t, ci32(31)), ci32(2)));
  SmallVector<Value> rows;
  for (int64_t i = 0; i < 2 * mTiles; ++i)
    rows.push_back(i == 0 ? row0 : Value(arith::AddIOp::create(b, loc, row0, ci32(8 * i))));
  return rows;
}

Value MmaKernelBuilder::quadColumn() {
  Location loc = b.getUnknownLoc();
  return arith::MulIOp::create(b, loc, arith::AndIOp::create(b, loc, tid, ci32(3)), ci32(2));
}

} // namespace tessel::mma
