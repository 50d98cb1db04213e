//===- AssignLayouts.cpp - a register layout for every tile ---------------===//
//
// tilegpu-assign-layouts: the layouts the register-resident path gives the tiles of an
// attention-class program, written on their types. Consumers ask for layouts (a dot for its
// accumulator, a reduction for its input, a store for its value, a loop for its carried
// values) and the demands flow back through the pure ops that make the tiles, by the rules
// convert-tile-to-mma computes registers with: element-wise ops and gathers take their result's
// layout, a broadcast of a row or column vector reads the matching slice, an expand_dims keeps
// it. An index tile, a gather or a vector load demanded in two layouts is cloned, one copy per
// layout; any other tile demanded in a layout other than the one its producer gives it is refused.
//
//===----------------------------------------------------------------------===//

#include "tilegpu/Transforms/MmaClass.h"
#include "tilegpu/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"

namespace tessel::tilegpu {
#define GEN_PASS_DEF_TILEGPUASSIGNLAYOUTS
#include "tilegpu/Transforms/Passes.h.inc"
} // namespace tessel::tilegpu

using namespace mlir;
using namespace tessel::tilegpu;
namespace tile = tessel::tile;

namespace {

class LayoutAssigner {
public:
  LayoutAssigner(func::FuncOp program, const MmaClassPlan &plan);
  LogicalResult run();

private:
  /// Records the demands of the program's consumers (dots, reductions, stores, loops).
  LogicalResult demandAll();
  /// `use` needs its value in `layout`.
  LogicalResult demandUse(OpOperand &use, Attribute layout);
  /// Operand `index` of `op` is needed in `layout` when op's result is in `resultLayout`.
  LogicalResult demandOperand(Operation *op, unsigned index, Attribute layout,
                              Attribute resultLayout);
  LogicalResult demandValue(Value v, Attribute layout, Operation *user);
  /// The layout the producer of `v` gives it (dot, reduction, load, loop-carried), or null
  /// when the layout follows from its consumers.
  Attribute producedLayout(Value v) const;
  bool fits(RankedTensorType type, Attribute layout) const;
  /// Index tiles demanded in several layouts: one copy per layout.
  void cloneMultiLayoutValues();
  /// Writes the layouts on the types; the P re-pack before dots whose A is computed.
  void rewriteTypes();

  func::FuncOp program;
  const MmaClassPlan &plan;
  int64_t blockM;
  Attribute acc, row, col, operandA, operandB;
  DenseMap<OpOperand *, Attribute> useLayout;
  llvm::MapVector<Value, SmallVector<Attribute, 2>> valueLayouts;
  DenseMap<std::tuple<Operation *, unsigned, Attribute>, Attribute> operandLayouts;
};

LayoutAssigner::LayoutAssigner(func::FuncOp program, const MmaClassPlan &plan)
    : program(program), plan(plan), blockM(plan.layout.getBlockRows()) {
  MLIRContext *ctx = program.getContext();
  acc = plan.layout;
  row = SliceEncodingAttr::get(ctx, 1, plan.layout);
  col = SliceEncodingAttr::get(ctx, 0, plan.layout);
  operandA = DotOperandEncodingAttr::get(ctx, 0, plan.layout);
  operandB = DotOperandEncodingAttr::get(ctx, 1, plan.layout);
}

LogicalResult LayoutAssigner::run() {
  if (failed(demandAll()))
    return failure();
  cloneMultiLayoutValues();
  rewriteTypes();
  return success();
}

bool LayoutAssigner::fits(RankedTensorType type, Attribute layout) const {
  ArrayRef<int64_t> s = type.getShape();
  if (layout == acc)
    return type.getRank() == 2 && s[0] == blockM && s[1] % 8 == 0;
  if (layout == row)
    return (type.getRank() == 1 && s[0] == blockM) ||
           (type.getRank() == 2 && s[0] == blockM && s[1] == 1);
  if (layout == col) {
    int64_t n = type.getRank() == 1 ? s[0] : (s[0] == 1 ? s[1] : -1);
    return n > 0 && n % 8 == 0;
  }
  return true;
}

Attribute LayoutAssigner::producedLayout(Value v) const {
  auto carried = [&](Type t) -> Attribute {
    return cast<RankedTensorType>(t).getRank() == 2 ? acc : row;
  };
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    auto forOp = dyn_cast<scf::ForOp>(arg.getOwner()->getParentOp());
    if (forOp && arg != forOp.getInductionVar())
      return carried(v.getType());
    return {};
  }
  Operation *def = v.getDefiningOp();
  if (isa<tile::DotOp>(def))
    return acc;
  if (isa<tile::ReduceOp>(def))
    return row;
  if (auto trans = dyn_cast<tile::TransOp>(def)) {
    // A loaded block read transposed: Kᵀ of Q·Kᵀ (B), or of dQᵀ = Kᵀ·dSᵀ (A, MmaClass.cpp).
    bool readAsA = !v.use_empty() && llvm::all_of(v.getUses(), [](OpOperand &use) {
      return isa<tile::DotOp>(use.getOwner()) && use.getOperandNumber() == 0;
    });
    return readAsA ? operandA : operandB;
  }
  if (isa<tile::LoadOp>(def)) {
    if (!plan.loads.count(def))
      return {}; // a vector read into the slice its consumers ask for
    return plan.loads.lookup(def).role == LoadRole::A ? operandA : operandB;
  }
  if (isa<scf::ForOp>(def))
    return carried(v.getType());
  return {};
}

LogicalResult LayoutAssigner::demandUse(OpOperand &use, Attribute layout) {
  useLayout[&use] = layout;
  return demandValue(use.get(), layout, use.getOwner());
}

LogicalResult LayoutAssigner::demandOperand(Operation *op, unsigned index, Attribute layout,
                                            Attribute resultLayout) {
  operandLayouts[{op, index, resultLayout}] = layout;
  return demandValue(op->getOperand(index), layout, op);
}

LogicalResult LayoutAssigner::demandValue(Value v, Attribute layout, Operation *user) {
  auto type = cast<RankedTensorType>(v.getType());
  if (!fits(type, layout))
    return user->emitOpError("uses a tile of type ")
           << type << " in a way convert-tile-to-mma cannot place in registers";
  if (Attribute produced = producedLayout(v)) {
    if (produced != layout)
      return user->emitOpError("needs a register tile in another layout than the one it has");
    return success();
  }
  SmallVector<Attribute, 2> &layouts = valueLayouts[v];
  if (llvm::is_contained(layouts, layout))
    return success();
  layouts.push_back(layout);
  Operation *def = v.getDefiningOp();
  if (!def)
    return user->emitOpError("reads a tile block argument convert-tile-to-mma did not place");
  if (isa<tile::SplatOp>(def))
    return success();
  if (auto cst = dyn_cast<arith::ConstantOp>(def)) {
    auto dense = dyn_cast<DenseElementsAttr>(cst.getValue());
    if (!dense || !dense.isSplat())
      return def->emitOpError("is a non-splat tile constant (convert-tile-to-mma)");
    return success();
  }
  if (isa<tile::IotaOp>(def)) {
    if (layout != row && layout != col)
      return def->emitOpError("is an iota used as a 2-D tile");
    return success();
  }
  if (isa<tile::LoadOp>(def)) {
    if (layout != row && layout != col)
      return def->emitOpError("is a vector load used as a 2-D tile");
    return success();
  }
  if (auto ed = dyn_cast<tile::ExpandDimsOp>(def)) {
    if ((ed.getAxis() == 1 ? row : col) != layout)
      return user->emitOpError("uses an expand_dims along the other axis than it broadcasts");
    return demandOperand(def, 0, layout, layout);
  }
  if (auto bc = dyn_cast<tile::BroadcastOp>(def)) {
    auto inType = cast<RankedTensorType>(bc.getInput().getType());
    if (inType.getShape() == type.getShape())
      return demandOperand(def, 0, layout, layout);
    if (layout == acc && inType.getShape()[1] == 1)
      return demandOperand(def, 0, row, layout);
    if (layout == acc && inType.getShape()[0] == 1)
      return demandOperand(def, 0, col, layout);
    return def->emitOpError("is a broadcast convert-tile-to-mma cannot place in registers");
  }
  // A gather reads an element per register: its index tiles are needed where its result is.
  if (isa<tile::GatherOp>(def) || tile::isElementwiseOp(def)) {
    if (def->getNumResults() != 1)
      return def->emitOpError("has several results (convert-tile-to-mma)");
    for (OpOperand &o : def->getOpOperands())
      if (isa<RankedTensorType>(o.get().getType()) &&
          failed(demandOperand(def, o.getOperandNumber(), layout, layout)))
        return failure();
    return success();
  }
  return def->emitOpError("makes a tile convert-tile-to-mma cannot compute in registers");
}

LogicalResult LayoutAssigner::demandAll() {
  WalkResult walk = program.walk([&](Operation *op) -> WalkResult {
    if (auto dot = dyn_cast<tile::DotOp>(op)) {
      // A B operand computed in registers (the backward's dSᵀ) reaches wgmma through shared
      // memory: it is made in the accumulator layout, and tilegpu-allocate-shared stores it.
      if (producedLayout(dot.getB()) != operandB) {
        if (plan.layout.getKind() != MmaKind::Wgmma)
          return dot.emitOpError("reads a B operand that is not a loaded block "
                                 "(convert-tile-to-mma; on wgmma, a computed B goes through "
                                 "shared memory)");
        if (failed(demandUse(dot->getOpOperand(1), acc)))
          return WalkResult::interrupt();
      }
      bool loadedA = dot.getA().getDefiningOp<tile::LoadOp>() ||
                     producedLayout(dot.getA()) == operandA;
      if (!loadedA && failed(demandUse(dot->getOpOperand(0), acc)))
        return WalkResult::interrupt();
      return failure(failed(demandUse(dot->getOpOperand(2), acc)));
    }
    if (auto red = dyn_cast<tile::ReduceOp>(op)) {
      auto inType = cast<RankedTensorType>(red.getInput().getType());
      if (inType.getRank() != 2 || red.getAxis() != 1)
        return red.emitOpError("reduces along another axis than the rows' (convert-tile-to-mma)");
      Type elem = inType.getElementType();
      if (!elem.isF32() && !elem.isInteger(32))
        return red.emitOpError("reduces ") << elem << ": convert-tile-to-mma shuffles f32 or i32";
      return failure(failed(demandUse(red->getOpOperand(0), acc)));
    }
    // A stored or atomically added value: accumulator rows (2-D) or a row vector.
    auto written = [&](auto st) -> LogicalResult {
      if (st.getMask())
        return st.emitOpError("has a mask, which convert-tile-to-mma does not handle");
      auto type = cast<RankedTensorType>(st.getValue().getType());
      return failure(failed(demandUse(st.getValueMutable(), type.getRank() == 2 ? acc : row)));
    };
    if (auto st = dyn_cast<tile::StoreOp>(op))
      return written(st);
    if (auto add = dyn_cast<tile::AtomicAddOp>(op))
      return written(add);
    if (auto forOp = dyn_cast<scf::ForOp>(op)) {
      auto yield = cast<scf::YieldOp>(forOp.getBody()->getTerminator());
      for (auto [i, arg] : llvm::enumerate(forOp.getRegionIterArgs())) {
        Attribute layout = producedLayout(arg);
        if (!layout)
          continue;
        if (failed(demandUse(forOp.getInitArgsMutable()[i], layout)) ||
            failed(demandUse(yield->getOpOperand(i), layout)))
          return WalkResult::interrupt();
      }
    }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

void LayoutAssigner::cloneMultiLayoutValues() {
  SmallVector<Operation *> ops;
  program.walk([&](Operation *op) { ops.push_back(op); });
  OpBuilder b(program.getContext());
  for (Operation *op : llvm::reverse(ops)) {
    if (op->getNumResults() != 1)
      continue;
    Value v = op->getResult(0);
    auto it = valueLayouts.find(v);
    if (it == valueLayouts.end())
      continue;
    SmallVector<Attribute, 2> layouts = it->second;
    auto setOperandUses = [&](Operation *user, Attribute resultLayout) {
      for (OpOperand &o : user->getOpOperands())
        if (Attribute l = operandLayouts.lookup({op, o.getOperandNumber(), resultLayout}))
          useLayout[&o] = l;
    };
    setOperandUses(op, layouts.front());
    it->second.resize(1);
    for (Attribute layout : ArrayRef(layouts).drop_front()) {
      b.setInsertionPointAfter(op);
      Operation *copy = b.clone(*op);
      // The operands of the copy are needed in the layouts the original's were for `layout`.
      setOperandUses(copy, layout);
      for (OpOperand &use : llvm::make_early_inc_range(v.getUses()))
        if (useLayout.lookup(&use) == layout)
          use.set(copy->getResult(0));
      valueLayouts[copy->getResult(0)] = {layout};
    }
  }
}

void LayoutAssigner::rewriteTypes() {
  auto retype = [&](Value v, Attribute layout) {
    v.setType(withEncoding(cast<RankedTensorType>(v.getType()), layout));
  };
  program.walk([&](Operation *op) {
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument arg : block.getArguments())
          if (Attribute l = producedLayout(arg))
            retype(arg, l);
    for (Value v : op->getResults()) {
      if (!isa<RankedTensorType>(v.getType()))
        continue;
      if (Attribute l = producedLayout(v))
        retype(v, l);
      else if (auto it = valueLayouts.find(v); it != valueLayouts.end())
        retype(v, it->second.front());
    }
  });
  retypeConstants(program);
  OpBuilder b(program.getContext());
  // The P re-pack: a dot's A computed in registers arrives in the accumulator layout; so does
  // a computed B (through shared memory, tilegpu-allocate-shared). Dots of one block that read
  // the same value in the same role share one conversion (dSᵀ stored once for both halves of
  // dQᵀ).
  DenseMap<std::tuple<Value, Attribute, Block *>, Value> converted;
  program.walk([&](tile::DotOp dot) {
    for (auto [index, layout] : {std::pair{0u, operandA}, std::pair{1u, operandB}}) {
      Value operand = dot->getOperand(index);
      auto type = cast<RankedTensorType>(operand.getType());
      if (type.getEncoding() != acc)
        continue;
      Value &done = converted[{operand, layout, dot->getBlock()}];
      if (!done) {
        b.setInsertionPoint(dot);
        done = ConvertLayoutOp::create(b, dot.getLoc(), withEncoding(type, layout), operand);
      }
      dot->setOperand(index, done);
    }
  });
}

struct AssignLayouts : tessel::tilegpu::impl::TileGPUAssignLayoutsBase<AssignLayouts> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp program = getOperation();
    if (!program.isExternal() && failed(assignLayouts(program, wgmma, warpRows)))
      signalPassFailure();
  }
};

} // namespace

LogicalResult tessel::tilegpu::assignLayouts(func::FuncOp program, bool wgmma,
                                             int64_t warpRowsOption) {
  if (failed(markTileLoop(program)))
    return failure();
  FailureOr<MmaClassPlan> plan = planMmaClass(program, wgmma, warpRowsOption);
  if (failed(plan))
    return failure();
  LayoutAssigner assigner(program, *plan);
  // Demands are collected before anything changes, so a refusal leaves the program as it was.
  return assigner.run();
}

MmaEncodingAttr tessel::tilegpu::programLayout(func::FuncOp program) {
  MmaEncodingAttr found;
  program.walk([&](Operation *op) {
    for (Type t : op->getResultTypes())
      if (auto rt = dyn_cast<RankedTensorType>(t); rt && !found)
        found = getMmaParent(rt.getEncoding());
  });
  return found;
}

void tessel::tilegpu::stripLayouts(func::FuncOp program) {
  auto strip = [](Value v) {
    if (auto rt = dyn_cast<RankedTensorType>(v.getType()); rt && rt.getEncoding())
      v.setType(withEncoding(rt, Attribute()));
  };
  program.walk([&](Operation *op) {
    if (auto cvt = dyn_cast<ConvertLayoutOp>(op)) {
      cvt.getResult().replaceAllUsesWith(cvt.getInput());
      cvt.erase();
      return;
    }
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument arg : block.getArguments())
          strip(arg);
    for (Value v : op->getResults())
      strip(v);
  });
  retypeConstants(program);
}

/// Tensor constants whose result type was given (or lost) a layout: the same value, retyped
/// (arith.constant's value must have its result's type).
void tessel::tilegpu::retypeConstants(func::FuncOp program) {
  OpBuilder b(program.getContext());
  program.walk([&](arith::ConstantOp cst) {
    auto type = dyn_cast<RankedTensorType>(cst.getType());
    auto dense = dyn_cast<DenseElementsAttr>(cst.getValue());
    if (!type || !dense || dense.getType() == type)
      return;
    b.setInsertionPoint(cst);
    auto copy = arith::ConstantOp::create(b, cst.getLoc(), type, dense.reshape(type));
    cst.replaceAllUsesWith(copy.getResult());
    cst.erase();
  });
}
