//===- Interpreter.cpp - the CPU interpreter of tile programs -------------===//
//
// A tree-walking interpreter over the ops of a kernel: each op reads its operands' run-time
// values from the current call frame and writes its results there. Tiles are flat row-major
// arrays (doubles for floats, int64 for integers) with their shape; descriptors and pointers
// refer to kernel arguments by index. See Interpreter.h for the rounding model and the
// three-pass semantics of the streamed softmax.
//
//===----------------------------------------------------------------------===//

#include "InterpreterImpl.h"
#include "tessel/Interpreter/Rounding.h"

#include "tile/IR/TileDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Verifier.h"

#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <unordered_map>
#include <variant>

using namespace mlir;
using namespace tessel;
using namespace tessel::interp;
using namespace tessel::interp::detail;

//===----------------------------------------------------------------------===//
// Run-time values
//===----------------------------------------------------------------------===//

int64_t tessel::interp::detail::product(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

unsigned tessel::interp::detail::bitWidth(Type t) {
  if (auto it = dyn_cast<IntegerType>(t))
    return it.getWidth();
  return 64; // index
}

// Wraps `v` to the bit width of the integer type `t`, sign-extended.
int64_t tessel::interp::detail::wrapInt(Type t, int64_t v) {
  unsigned w = bitWidth(t);
  return w >= 64 ? v : llvm::SignExtend64(static_cast<uint64_t>(v), w);
}

uint64_t tessel::interp::detail::toUnsigned(int64_t v, unsigned w) {
  return w >= 64 ? static_cast<uint64_t>(v) : static_cast<uint64_t>(v) & ((uint64_t(1) << w) - 1);
}

int64_t tessel::interp::detail::minSigned(unsigned w) {
  return w >= 64 ? std::numeric_limits<int64_t>::min() : -(int64_t(1) << (w - 1));
}

double tessel::interp::detail::roundFloat(Type t, double v) {
  if (isa<Float8E4M3FNType>(t))
    return roundToE4M3(v);
  if (t.isF16())
    return roundToF16(v);
  if (t.isBF16())
    return roundToBF16(v);
  if (t.isF32())
    return roundToF32(v);
  return v; // f64
}

bool tessel::interp::detail::isSupportedElement(Type t) {
  if (isa<Float8E4M3FNType>(t) || t.isF16() || t.isBF16() || t.isF32() || t.isF64() || t.isIndex())
    return true;
  auto it = dyn_cast<IntegerType>(t);
  return it && it.getWidth() >= 1 && it.getWidth() <= 64;
}

namespace {
// Splits `shape` around `axis`: element (o, k, n) sits at (o·size + k)·inner + n.
struct AxisSplit {
  int64_t outer, size, inner;
};

AxisSplit splitAt(ArrayRef<int64_t> shape, int64_t axis) {
  return {product(shape.take_front(axis)), shape[axis], product(shape.drop_front(axis + 1))};
}

bool isNegInf(double v) { return std::isinf(v) && v < 0; }

// Folds the maximum of `s` along `axis` into `max`, NaN-propagating.
void foldRowMax(const Tile &s, int64_t axis, std::vector<double> &max) {
  AxisSplit a = splitAt(s.shape, axis);
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t k = 0; k < a.size; ++k)
      for (int64_t n = 0; n < a.inner; ++n) {
        double v = s.f[(o * a.size + k) * a.inner + n];
        double &m = max[o * a.inner + n];
        if (std::isnan(v) || v > m)
          m = v;
      }
}

// Folds Σ exp(s − max) along `axis` into `sum`; rows whose max is −inf are all masked.
void foldRowSum(const Tile &s, int64_t axis, const std::vector<double> &max,
                std::vector<double> &sum) {
  AxisSplit a = splitAt(s.shape, axis);
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t k = 0; k < a.size; ++k)
      for (int64_t n = 0; n < a.inner; ++n) {
        double m = max[o * a.inner + n];
        double v = s.f[(o * a.size + k) * a.inner + n];
        if (!isNegInf(m) && !isNegInf(v))
          sum[o * a.inner + n] += std::exp(v - m);
      }
}

// p = exp(s − M) / L, 0 where s = −inf or the row is all masked; lse = M + log(L).
void applySoftmax(const Tile &s, int64_t axis, const SoftmaxStats &st, Tile &p, Tile &lse) {
  AxisSplit a = splitAt(s.shape, axis);
  Type et = s.elementType;
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t n = 0; n < a.inner; ++n) {
      double m = st.max[o * a.inner + n], l = st.sum[o * a.inner + n];
      bool masked = isNegInf(m) || l == 0.0;
      lse.f[o * a.inner + n] = masked ? -std::numeric_limits<double>::infinity()
                                      : roundFloat(et, m + std::log(l));
      for (int64_t k = 0; k < a.size; ++k) {
        int64_t idx = (o * a.size + k) * a.inner + n;
        double v = s.f[idx];
        p.f[idx] = masked || isNegInf(v) ? 0.0 : roundFloat(et, std::exp(v - m) / l);
      }
    }
}
} // namespace

//===----------------------------------------------------------------------===//
// Values and frames
//===----------------------------------------------------------------------===//

FailureOr<const RValue *> Interpreter::lookup(Frame &fr, Operation *op, Value v) {
  auto it = fr.values.find(v.getAsOpaquePointer());
  if (it == fr.values.end())
    return op->emitOpError() << "uses a value the interpreter has not computed";
  return &it->second;
}

FailureOr<const Tile *> Interpreter::tile(Frame &fr, Operation *op, Value v) {
  FailureOr<const RValue *> rv = lookup(fr, op, v);
  if (failed(rv))
    return failure();
  if (auto *t = std::get_if<Tile>(*rv))
    return t;
  return op->emitOpError() << "expects a scalar or tile operand, not " << v.getType();
}

FailureOr<int64_t> Interpreter::intScalar(Frame &fr, Operation *op, Value v) {
  FailureOr<const Tile *> t = tile(fr, op, v);
  if (failed(t))
    return failure();
  if ((*t)->isFloat() || (*t)->size() != 1 || !(*t)->shape.empty())
    return op->emitOpError() << "expects an integer scalar operand";
  return (*t)->i[0];
}

FailureOr<Tile> Interpreter::newTile(Operation *op, Type type) {
  Tile t;
  if (auto tensor = dyn_cast<RankedTensorType>(type)) {
    if (!tensor.hasStaticShape())
      return op->emitOpError() << "produces " << type
                               << "; the interpreter needs statically shaped tensors";
    t.elementType = tensor.getElementType();
    t.shape.assign(tensor.getShape().begin(), tensor.getShape().end());
  } else {
    t.elementType = type;
  }
  if (!isSupportedElement(t.elementType) || isa<ShapedType>(t.elementType))
    return op->emitOpError() << "produces a value of type " << type
                             << ", which the interpreter does not support";
  int64_t n = 1;
  for (int64_t d : t.shape) {
    if (d < 0 || (d > 0 && n > options.maxTileElements / d))
      return op->emitOpError() << "produces a tile of type " << type << ", larger than the "
                               << options.maxTileElements << " elements the interpreter allows";
    n *= d;
  }
  if (n > options.maxTileElements)
    return op->emitOpError() << "produces a tile of type " << type << ", larger than the "
                             << options.maxTileElements << " elements the interpreter allows";
  if (t.isFloat())
    t.f.assign(n, 0.0);
  else
    t.i.assign(n, 0);
  return t;
}

FailureOr<SmallVector<RValue>> Interpreter::call(func::FuncOp fn, ArrayRef<RValue> params,
                                                 unsigned callDepth) {
  if (fn.isExternal())
    return fn.emitOpError() << "@" << fn.getSymName() << " has no body to interpret";
  Block &entry = fn.getBody().front();
  if (entry.getNumArguments() != params.size())
    return fn.emitOpError() << "@" << fn.getSymName() << " takes " << entry.getNumArguments()
                            << " arguments, but " << params.size() << " were given";
  Frame fr;
  for (auto [arg, value] : llvm::zip(entry.getArguments(), params))
    set(fr, arg, value);
  unsigned saved = depth;
  depth = callDepth;
  SmallVector<RValue> results;
  LogicalResult ok = runBlock(fr, entry, results);
  depth = saved;
  if (failed(ok))
    return failure();
  return results;
}

LogicalResult Interpreter::runBlock(Frame &fr, Block &block, SmallVectorImpl<RValue> &yielded) {
  for (Operation &op : block) {
    if (op.hasTrait<OpTrait::IsTerminator>()) {
      if (!isa<scf::YieldOp, func::ReturnOp>(op))
        return unsupported(&op);
      yielded.clear();
      for (Value v : op.getOperands()) {
        FailureOr<const RValue *> rv = lookup(fr, &op, v);
        if (failed(rv))
          return failure();
        yielded.push_back(**rv);
      }
      return success();
    }
    if (failed(runOp(fr, &op)))
      return failure();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

LogicalResult Interpreter::runOp(Frame &fr, Operation *op) {
  if (failed(step(op, 1)))
    return failure();
  using llvm::TypeSwitch;
  return TypeSwitch<Operation *, LogicalResult>(op)
      // Tile ops.
      .Case<tile::ProgramIdOp, tile::NumProgramsOp>([&](auto o) -> LogicalResult {
        FailureOr<Tile> r = newTile(op, o.getType());
        if (failed(r))
          return failure();
        unsigned axis = o.getAxis();
        if (axis > 2)
          return o.emitOpError() << "has axis " << axis << "; the grid has three";
        int64_t v = isa<tile::ProgramIdOp>(op) ? pid[axis] : grid[axis];
        r->i[0] = wrapInt(r->elementType, v);
        set(fr, o.getResult(), std::move(*r));
        return success();
      })
      .Case([&](tile::MakeDescOp o) { return makeDesc(fr, o); })
      .Case([&](tile::LoadOp o) { return load(fr, o); })
      .Case([&](tile::GatherOp o) { return gather(fr, o); })
      .Case([&](tile::LoadScalarOp o) { return loadScalar(fr, o); })
      .Case([&](tile::StoreOp o) { return store(fr, o); })
      .Case([&](tile::AtomicAddOp o) { return atomicAdd(fr, o); })
      .Case([&](tile::DotOp o) { return dot(fr, o); })
      .Case([&](tile::ReduceOp o) { return reduce(fr, o); })
      .Case([&](tile::ScanOp o) { return scan(fr, o); })
      .Case([&](tile::SplatOp o) -> LogicalResult {
        FailureOr<const Tile *> s = tile(fr, op, o.getValue());
        FailureOr<Tile> r = newTile(op, o.getType());
        if (failed(s) || failed(r))
          return failure();
        if ((*s)->size() != 1 || (*s)->isFloat() != r->isFloat())
          return o.emitOpError() << "expects a scalar of the tile's element type";
        if (r->isFloat())
          std::fill(r->f.begin(), r->f.end(), (*s)->f[0]);
        else
          std::fill(r->i.begin(), r->i.end(), (*s)->i[0]);
        if (failed(step(op, r->size())))
          return failure();
        set(fr, o.getResult(), std::move(*r));
        return success();
      })
      .Case([&](tile::IotaOp o) -> LogicalResult {
        FailureOr<Tile> r = newTile(op, o.getType());
        if (failed(r) || r->isFloat())
          return failed(r) ? failure() : o.emitOpError() << "expects an integer tile";
        for (int64_t k = 0; k < r->size(); ++k)
          r->i[k] = wrapInt(r->elementType, k);
        if (failed(step(op, r->size())))
          return failure();
        set(fr, o.getResult(), std::move(*r));
        return success();
      })
      .Case<tile::ExpandDimsOp, tile::BroadcastOp>(
          [&](auto o) { return reshape(fr, op, /*transpose=*/false); })
      .Case([&](tile::TransOp o) { return reshape(fr, op, /*transpose=*/true); })
      .Case([&](tile::SoftmaxOp o) { return softmax(fr, o); })
      // Control flow.
      .Case([&](scf::ForOp o) { return forOp(fr, o); })
      .Case([&](scf::IfOp o) { return ifOp(fr, o); })
      .Case([&](func::CallOp o) { return callOp(fr, o); })
      .Default([&](Operation *) {
        std::optional<LogicalResult> result = runElementwise(fr, op);
        return result ? *result : unsupported(op);
      });
}

//===----------------------------------------------------------------------===//
// Tile ops
//===----------------------------------------------------------------------===//

LogicalResult Interpreter::makeDesc(Frame &fr, tile::MakeDescOp op) {
  FailureOr<const RValue *> base = lookup(fr, op, op.getBase());
  if (failed(base))
    return failure();
  const auto *ptr = std::get_if<PtrValue>(*base);
  if (!ptr)
    return op.emitOpError() << "expects a pointer base";
  DescValue d{ptr->arg, 0, {}, {}};
  if (op.getOffset()) {
    FailureOr<int64_t> off = intScalar(fr, op, op.getOffset());
    if (failed(off))
      return failure();
    d.offset = *off;
  }
  for (Value v : op.getShape()) {
    FailureOr<int64_t> s = intScalar(fr, op, v);
    if (failed(s))
      return failure();
    d.shape.push_back(*s);
  }
  for (Value v : op.getStrides()) {
    FailureOr<int64_t> s = intScalar(fr, op, v);
    if (failed(s))
      return failure();
    d.strides.push_back(*s);
  }
  if (d.shape.size() != d.strides.size())
    return op.emitOpError() << "needs as many strides as sizes";
  if (op.isPaged()) {
    FailureOr<const RValue *> tv = lookup(fr, op, op.getPages());
    if (failed(tv))
      return failure();
    const auto *table = std::get_if<DescValue>(*tv);
    FailureOr<int64_t> numPages = intScalar(fr, op, op.getNumPages());
    if (!table || table->shape.size() != 1 || failed(numPages))
      return op.emitOpError() << "needs a rank-1 page table and a page count";
    d.paging = Paging{table->arg,        table->offset,     table->shape[0],
                      table->strides[0], *op.getPageSize(), *numPages};
  }
  set(fr, op.getResult(), std::move(d));
  return success();
}

FailureOr<std::optional<int64_t>> Interpreter::pagedRow(Operation *op, const Paging &p,
                                                        int64_t row) {
  int64_t entry = row / p.pageSize;
  if (entry >= p.tableLength)
    return std::optional<int64_t>();
  if (p.tableArg >= args.size() || args[p.tableArg].kind != KernelArg::Kind::Buffer)
    return op->emitOpError() << "reads its page table from argument #" << p.tableArg
                             << ", which is not a buffer";
  Buffer &table = args[p.tableArg].buffer;
  std::optional<int64_t> at = llvm::checkedMulAdd(entry, p.tableStride, p.tableOffset);
  if (!at || *at < 0 || *at >= table.size())
    return op->emitOpError() << "reads page table entry " << entry << " outside argument #"
                             << p.tableArg;
  auto page = static_cast<int64_t>(table.get(*at));
  if (page < 0 || page >= p.numPages)
    return std::optional<int64_t>();
  return std::optional<int64_t>(page * p.pageSize + row % p.pageSize);
}

// The shared walk of load and store: for every element of the tile (`result` for a load,
// `value` for a store) whose global index lies inside the descriptor's shape, computes its
// address, checks it lies in the buffer, and reads or (where `mask` allows) writes it. A store
// checks every address before writing any, so a failing store leaves memory as it was.
LogicalResult Interpreter::access(Frame &fr, Operation *op, Value descV, ValueRange offsetVs,
                                  const Tile *value, const Tile *mask, Tile *result, bool add) {
  FailureOr<const RValue *> dv = lookup(fr, op, descV);
  if (failed(dv))
    return failure();
  const auto *desc = std::get_if<DescValue>(*dv);
  if (!desc)
    return op->emitOpError() << "expects a descriptor";
  SmallVector<int64_t, 4> offsets;
  for (Value v : offsetVs) {
    FailureOr<int64_t> o = intScalar(fr, op, v);
    if (failed(o))
      return failure();
    offsets.push_back(*o);
  }
  const Tile &t = result ? *result : *value;
  size_t rank = t.shape.size();
  if (offsets.size() != rank || desc->shape.size() != rank)
    return op->emitOpError() << "needs a rank-" << rank << " descriptor and " << rank << " offsets";
  if (desc->arg >= args.size() || args[desc->arg].kind != KernelArg::Kind::Buffer)
    return op->emitOpError() << "uses argument #" << desc->arg << ", which is not a buffer";
  Buffer &buf = args[desc->arg].buffer;
  std::optional<ElementKind> kind = elementKindOf(t.elementType);
  if (!kind || *kind != buf.kind())
    return op->emitOpError() << "accesses " << t.elementType << " elements in argument #"
                             << desc->arg << ", a buffer of " << elementKindName(buf.kind());
  if (mask && mask->size() != t.size())
    return op->emitOpError() << "has a mask shaped unlike its value";
  bool isLoad = result != nullptr;
  int64_t n = t.size();
  if (failed(step(op, n)))
    return failure();

  SmallVector<int64_t, 4> idx(rank, 0);
  SmallVector<std::pair<int64_t, int64_t>> writes; // (address, element) of a store
  for (int64_t k = 0; k < n; ++k) {
    // The global index of element k; it is in bounds when inside the descriptor's shape.
    bool inBounds = true;
    std::optional<int64_t> addr = desc->offset;
    for (size_t a = 0; a < rank && inBounds; ++a) {
      std::optional<int64_t> g = llvm::checkedAdd(offsets[a], idx[a]);
      inBounds = g && *g >= 0 && *g < desc->shape[a];
      if (inBounds && a == 0 && desc->paging) {
        FailureOr<std::optional<int64_t>> row = pagedRow(op, *desc->paging, *g);
        if (failed(row))
          return failure();
        inBounds = row->has_value();
        if (inBounds)
          g = **row;
      }
      if (inBounds && addr)
        addr = llvm::checkedMulAdd(*g, desc->strides[a], *addr);
    }
    if (inBounds && !(mask && mask->i[k] == 0)) {
      if (!addr)
        return op->emitOpError() << (isLoad ? "reads" : "writes")
                                 << " an element whose address overflows 64 bits, in argument #"
                                 << desc->arg;
      if (*addr < 0 || *addr >= buf.size())
        return op->emitOpError() << (isLoad ? "reads" : "writes") << " element " << *addr
                                 << " of argument #" << desc->arg << ", a buffer of " << buf.size()
                                 << " elements";
      if (isLoad) {
        double v = buf.get(*addr);
        if (result->isFloat())
          result->f[k] = v;
        else
          result->i[k] = static_cast<int64_t>(v);
      } else {
        writes.push_back({*addr, k});
      }
    }
    for (size_t a = rank; a-- > 0;) { // next row-major index
      if (++idx[a] < t.shape[a])
        break;
      idx[a] = 0;
    }
  }
  for (auto [addr, k] : writes) {
    double v = value->isFloat() ? value->f[k] : static_cast<double>(value->i[k]);
    buf.set(addr, add ? buf.get(addr) + v : v); // programs run one after another: atomic
  }
  return success();
}

LogicalResult Interpreter::fillWithPadding(Operation *op, Tile &t, double pad) {
  if (t.isFloat()) {
    std::fill(t.f.begin(), t.f.end(), roundFloat(t.elementType, pad));
    return success();
  }
  if (!std::isfinite(pad) || pad != std::trunc(pad) || std::fabs(pad) > 9.0e18)
    return op->emitOpError() << "pads an integer tile with " << pad << ", which is not an integer";
  std::fill(t.i.begin(), t.i.end(), wrapInt(t.elementType, static_cast<int64_t>(pad)));
  return success();
}

LogicalResult Interpreter::load(Frame &fr, tile::LoadOp op) {
  FailureOr<Tile> r = newTile(op, op.getType());
  if (failed(r))
    return failure();
  if (failed(fillWithPadding(op, *r, op.getPadding().convertToDouble())))
    return failure();
  if (failed(access(fr, op, op.getDesc(), op.getOffsets(), nullptr, nullptr, &*r)))
    return failure();
  set(fr, op.getResult(), std::move(*r));
  return success();
}

// One element; an index outside the descriptor's shape gives the padding without a read.
LogicalResult Interpreter::loadScalar(Frame &fr, tile::LoadScalarOp op) {
  FailureOr<Tile> r = newTile(op, op.getType());
  FailureOr<const RValue *> dv = lookup(fr, op, op.getDesc());
  if (failed(r) || failed(dv))
    return failure();
  const auto *desc = std::get_if<DescValue>(*dv);
  if (!desc)
    return op.emitOpError() << "expects a descriptor";
  if (desc->shape.size() != op.getIndices().size())
    return op.emitOpError() << "needs " << desc->shape.size() << " indices";
  double v = op.getPadding().convertToDouble();
  bool inBounds = true;
  std::optional<int64_t> addr = desc->offset;
  for (auto [a, iv] : llvm::enumerate(op.getIndices())) {
    FailureOr<int64_t> i = intScalar(fr, op, iv);
    if (failed(i))
      return failure();
    inBounds = inBounds && *i >= 0 && *i < desc->shape[a];
    if (inBounds && addr)
      addr = llvm::checkedMulAdd(*i, desc->strides[a], *addr);
  }
  if (inBounds) {
    if (desc->arg >= args.size() || args[desc->arg].kind != KernelArg::Kind::Buffer)
      return op.emitOpError() << "uses argument #" << desc->arg << ", which is not a buffer";
    Buffer &buf = args[desc->arg].buffer;
    std::optional<ElementKind> kind = elementKindOf(r->elementType);
    if (!kind || *kind != buf.kind())
      return op.emitOpError() << "reads " << r->elementType << " from argument #" << desc->arg
                              << ", a buffer of " << elementKindName(buf.kind());
    if (!addr || *addr < 0 || *addr >= buf.size())
      return op.emitOpError() << "reads an element outside argument #" << desc->arg
                              << ", a buffer of " << buf.size() << " elements";
    v = buf.get(*addr);
  }
  if (r->isFloat())
    r->f[0] = roundFloat(r->elementType, v);
  else
    r->i[0] = wrapInt(r->elementType, static_cast<int64_t>(v));
  set(fr, op.getResult(), std::move(*r));
  return success();
}

template <typename WriteOp>
LogicalResult Interpreter::write(Frame &fr, WriteOp op, bool add) {
  FailureOr<const Tile *> v = tile(fr, op, op.getValue());
  if (failed(v))
    return failure();
  const Tile *mask = nullptr;
  if (op.getMask()) {
    FailureOr<const Tile *> m = tile(fr, op, op.getMask());
    if (failed(m))
      return failure();
    mask = *m;
  }
  return access(fr, op, op.getDesc(), op.getOffsets(), *v, mask, nullptr, add);
}

LogicalResult Interpreter::store(Frame &fr, tile::StoreOp op) {
  return write(fr, op, /*add=*/false);
}

LogicalResult Interpreter::atomicAdd(Frame &fr, tile::AtomicAddOp op) {
  return write(fr, op, /*add=*/true);
}

LogicalResult Interpreter::dot(Frame &fr, tile::DotOp op) {
  FailureOr<const Tile *> a = tile(fr, op, op.getA());
  FailureOr<const Tile *> b = tile(fr, op, op.getB());
  FailureOr<const Tile *> c = tile(fr, op, op.getAcc());
  FailureOr<Tile> r = newTile(op, op.getType());
  if (failed(a) || failed(b) || failed(c) || failed(r))
    return failure();
  const Tile &A = **a, &B = **b, &C = **c;
  if (A.shape.size() != 2 || B.shape.size() != 2 || r->shape.size() != 2 || !A.isFloat() ||
      !B.isFloat() || !C.isFloat() || A.shape[1] != B.shape[0] || A.shape[0] != r->shape[0] ||
      B.shape[1] != r->shape[1] || C.size() != r->size())
    return op.emitOpError() << "has operands whose shapes do not multiply";
  int64_t M = A.shape[0], K = A.shape[1], N = B.shape[1];
  if (failed(step(op, static_cast<uint64_t>(M) * N * (K + 1))))
    return failure();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = C.f[m * N + n];
      for (int64_t k = 0; k < K; ++k)
        acc += A.f[m * K + k] * B.f[k * N + n];
      r->f[m * N + n] = roundFloat(r->elementType, acc);
    }
  set(fr, op.getResult(), std::move(*r));
  return success();
}

LogicalResult Interpreter::reduce(Frame &fr, tile::ReduceOp op) {
  FailureOr<const Tile *> in = tile(fr, op, op.getInput());
  FailureOr<Tile> r = newTile(op, op.getType());
  if (failed(in) || failed(r))
    return failure();
  const Tile &s = **in;
  int64_t axis = op.getAxis();
  if (axis >= static_cast<int64_t>(s.shape.size()) || s.isFloat() != r->isFloat() ||
      s.size() != r->size() * s.shape[axis])
    return op.emitOpError() << "has a result that does not match its input and axis";
  if (failed(step(op, s.size())))
    return failure();
  AxisSplit a = splitAt(s.shape, axis);
  tile::ReduceKind kind = op.getKind();
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t n = 0; n < a.inner; ++n) {
      if (s.isFloat()) {
        double acc = kind == tile::ReduceKind::Sum ? 0.0 : s.f[o * a.size * a.inner + n];
        for (int64_t k = 0; k < a.size; ++k) {
          double v = s.f[(o * a.size + k) * a.inner + n];
          if (kind == tile::ReduceKind::Sum)
            acc += v;
          else if (kind == tile::ReduceKind::Max)
            acc = maximumF(acc, v);
          else
            acc = minimumF(acc, v);
        }
        r->f[o * a.inner + n] = roundFloat(r->elementType, acc);
      } else {
        int64_t acc = kind == tile::ReduceKind::Sum ? 0 : s.i[o * a.size * a.inner + n];
        for (int64_t k = 0; k < a.size; ++k) {
          int64_t v = s.i[(o * a.size + k) * a.inner + n];
          if (kind == tile::ReduceKind::Sum)
            acc = wrapInt(r->elementType, static_cast<int64_t>(uint64_t(acc) + uint64_t(v)));
          else
            acc = kind == tile::ReduceKind::Max ? std::max(acc, v) : std::min(acc, v);
        }
        r->i[o * a.inner + n] = acc;
      }
    }
  set(fr, op.getResult(), std::move(*r));
  return success();
}

LogicalResult Interpreter::scan(Frame &fr, tile::ScanOp op) {
  FailureOr<const Tile *> in = tile(fr, op, op.getInput());
  FailureOr<Tile> r = newTile(op, op.getType());
  if (failed(in) || failed(r))
    return failure();
  const Tile &s = **in;
  if (failed(step(op, s.size())))
    return failure();
  AxisSplit a = splitAt(s.shape, op.getAxis());
  tile::ReduceKind kind = op.getKind();
  Type f32 = Float32Type::get(op.getContext());
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t n = 0; n < a.inner; ++n) {
      double carry = 0.0;
      for (int64_t t = 0; t < a.size; ++t) {
        int64_t k = op.getReverse() ? a.size - 1 - t : t;
        int64_t at = (o * a.size + k) * a.inner + n;
        int64_t prev = op.getReverse() ? at + a.inner : at - a.inner;
        if (s.isFloat()) {
          // The running value in f32 (16-bit tiles too), each element rounded to the tile's type.
          double v = s.f[at], acc = t == 0 ? v : carry;
          if (t > 0)
            acc = kind == tile::ReduceKind::Sum   ? roundFloat(f32, acc + v)
                  : kind == tile::ReduceKind::Max ? maximumF(acc, v)
                                                  : minimumF(acc, v);
          carry = acc;
          r->f[at] = roundFloat(r->elementType, acc);
        } else {
          int64_t v = s.i[at];
          if (t > 0) {
            int64_t p = r->i[prev];
            v = kind == tile::ReduceKind::Sum
                    ? wrapInt(r->elementType, static_cast<int64_t>(uint64_t(p) + uint64_t(v)))
                : kind == tile::ReduceKind::Max ? std::max(p, v)
                                                : std::min(p, v);
          }
          r->i[at] = v;
        }
      }
    }
  set(fr, op.getResult(), std::move(*r));
  return success();
}

// expand_dims, broadcast and trans: every result element copies one input element.
LogicalResult Interpreter::reshape(Frame &fr, Operation *op, bool transpose) {
  FailureOr<const Tile *> in = tile(fr, op, op->getOperand(0));
  FailureOr<Tile> r = newTile(op, op->getResult(0).getType());
  if (failed(in) || failed(r))
    return failure();
  const Tile &s = **in;
  if (s.isFloat() != r->isFloat())
    return op->emitOpError() << "changes the element type";
  size_t rank = r->shape.size();
  // Input strides seen from the result's axes.
  SmallVector<int64_t, 4> srcStride(rank, 0);
  if (transpose) {
    if (rank != 2 || s.shape.size() != 2 || s.shape[0] != r->shape[1] || s.shape[1] != r->shape[0])
      return op->emitOpError() << "has a result that is not its input transposed";
    srcStride = {1, s.shape[1]};
  } else if (isa<tile::ExpandDimsOp>(op)) {
    if (s.size() != r->size())
      return op->emitOpError() << "changes the number of elements";
    int64_t st = 1;
    for (size_t a = rank; a-- > 0;) {
      srcStride[a] = st;
      st *= r->shape[a];
    }
  } else { // broadcast
    if (s.shape.size() != rank)
      return op->emitOpError() << "changes the rank";
    int64_t st = 1;
    for (size_t a = rank; a-- > 0;) {
      if (s.shape[a] != r->shape[a] && s.shape[a] != 1)
        return op->emitOpError() << "broadcasts an axis of size " << s.shape[a] << " to "
                                 << r->shape[a];
      srcStride[a] = s.shape[a] == 1 ? 0 : st;
      st *= s.shape[a];
    }
  }
  if (failed(step(op, r->size())))
    return failure();
  SmallVector<int64_t, 4> idx(rank, 0);
  for (int64_t k = 0; k < r->size(); ++k) {
    int64_t src = 0;
    for (size_t a = 0; a < rank; ++a)
      src += idx[a] * srcStride[a];
    if (r->isFloat())
      r->f[k] = s.f[src];
    else
      r->i[k] = s.i[src];
    for (size_t a = rank; a-- > 0;) {
      if (++idx[a] < r->shape[a])
        break;
      idx[a] = 0;
    }
  }
  set(fr, op->getResult(0), std::move(*r));
  return success();
}

LogicalResult Interpreter::softmax(Frame &fr, tile::SoftmaxOp op) {
  FailureOr<const Tile *> in = tile(fr, op, op.getInput());
  FailureOr<Tile> p = newTile(op, op.getResult().getType());
  FailureOr<Tile> lse = newTile(op, op.getLse().getType());
  if (failed(in) || failed(p) || failed(lse))
    return failure();
  const Tile &s = **in;
  int64_t axis = op.getAxis();
  if (!s.isFloat() || axis >= static_cast<int64_t>(s.shape.size()) || p->size() != s.size() ||
      lse->size() * s.shape[axis] != s.size())
    return op.emitOpError() << "has results that do not match its input and axis";
  if (failed(step(op, 3 * s.size())))
    return failure();
  SoftmaxStats local;
  const SoftmaxStats *stats = &local;
  if (op.getStreamed()) {
    auto it = fr.streamedStats.find(op);
    if (it == fr.streamedStats.end())
      return op.emitOpError() << "is streamed but does not sit directly in the body of the "
                                 "scf.for being run";
    stats = &it->second;
  } else {
    local.max.assign(lse->size(), -std::numeric_limits<double>::infinity());
    local.sum.assign(lse->size(), 0.0);
    foldRowMax(s, axis, local.max);
    foldRowSum(s, axis, local.max, local.sum);
  }
  applySoftmax(s, axis, *stats, *p, *lse);
  set(fr, op.getResult(), std::move(*p));
  set(fr, op.getLse(), std::move(*lse));
  return success();
}

//===----------------------------------------------------------------------===//
// Control flow
//===----------------------------------------------------------------------===//

LogicalResult Interpreter::forOp(Frame &fr, scf::ForOp op) {
  FailureOr<int64_t> lb = intScalar(fr, op, op.getLowerBound());
  FailureOr<int64_t> ub = intScalar(fr, op, op.getUpperBound());
  FailureOr<int64_t> st = intScalar(fr, op, op.getStep());
  if (failed(lb) || failed(ub) || failed(st))
    return failure();
  Type ivType = op.getInductionVar().getType();
  unsigned w = bitWidth(ivType);
  bool isUnsigned = op.getUnsignedCmp();
  if (isUnsigned ? toUnsigned(*st, w) == 0 : *st <= 0)
    return op.emitOpError() << "has step " << *st << "; the interpreter needs a positive step";
  // Trip count in 128-bit arithmetic: bounds may span the whole 64-bit range.
  __int128 lo = isUnsigned ? (__int128)toUnsigned(*lb, w) : (__int128)*lb;
  __int128 hi = isUnsigned ? (__int128)toUnsigned(*ub, w) : (__int128)*ub;
  __int128 stepV = isUnsigned ? (__int128)toUnsigned(*st, w) : (__int128)*st;
  __int128 trips = hi > lo ? (hi - lo + stepV - 1) / stepV : 0;
  // Every iteration costs at least one step for itself and one per op of the body: a loop that
  // cannot finish within what is left of the budget is refused before it starts.
  __int128 perIteration = 1 +
                          std::max<__int128>(0, (__int128)op.getBody()->getOperations().size() - 1);
  if (options.maxSteps &&
      trips * perIteration > (__int128)(options.maxSteps - std::min(steps, options.maxSteps)))
    return op.emitOpError() << "would run " << (int64_t)std::min<__int128>(trips, INT64_MAX)
                            << " iterations, past the interpreter's step limit of "
                            << options.maxSteps << " " << kStepLimitHint;
  if (trips > (__int128)(int64_t(1) << 40))
    return op.emitOpError() << "would run more than 2^40 iterations";
  // The induction values are computed one at a time, never stored: a loop of 2^31 iterations
  // needs no memory for them.
  auto ivAt = [&, lo, stepV](int64_t k) {
    return wrapInt(ivType, static_cast<int64_t>(lo + stepV * k));
  };
  int64_t tripCount = static_cast<int64_t>(trips);

  SmallVector<tile::SoftmaxOp> streamed;
  for (Operation &inner : *op.getBody())
    if (auto sm = dyn_cast<tile::SoftmaxOp>(inner); sm && sm.getStreamed())
      streamed.push_back(sm);
  if (!streamed.empty() && failed(prepareStreamed(fr, op, ivAt, tripCount, streamed)))
    return failure();

  SmallVector<RValue> carried;
  for (Value v : op.getInitArgs()) {
    FailureOr<const RValue *> rv = lookup(fr, op, v);
    if (failed(rv))
      return failure();
    carried.push_back(**rv);
  }
  Block *body = op.getBody();
  for (int64_t k = 0; k < tripCount; ++k) {
    if (failed(step(op, 1)))
      return failure();
    Tile ivTile;
    ivTile.elementType = ivType;
    ivTile.i = {ivAt(k)};
    set(fr, op.getInductionVar(), std::move(ivTile));
    for (auto [arg, value] : llvm::zip(op.getRegionIterArgs(), carried))
      set(fr, arg, value);
    SmallVector<RValue> yielded;
    if (failed(runBlock(fr, *body, yielded)))
      return failure();
    if (yielded.size() != carried.size())
      return op.emitOpError() << "yields " << yielded.size() << " values for " << carried.size()
                              << " iteration arguments";
    carried = std::move(yielded);
  }
  for (tile::SoftmaxOp sm : streamed)
    fr.streamedStats.erase(sm);
  for (auto [result, value] : llvm::zip(op.getResults(), carried))
    set(fr, result, value);
  return success();
}

// The first two passes of the three-pass softmax: row max M, then row sum L, each over all
// iterations, evaluating only the body ops that the softmax input depends on.
LogicalResult Interpreter::prepareStreamed(Frame &fr, scf::ForOp loop,
                                           function_ref<int64_t(int64_t)> ivAt, int64_t trips,
                                           ArrayRef<tile::SoftmaxOp> softmaxes) {
  Block *body = loop.getBody();
  Type ivType = loop.getInductionVar().getType();
  for (tile::SoftmaxOp sm : softmaxes) {
    // The backward slice of the input among the body's ops.
    llvm::SmallPtrSet<Operation *, 32> slice;
    SmallVector<Value> work{sm.getInput()};
    while (!work.empty()) {
      Value v = work.pop_back_val();
      if (auto arg = dyn_cast<BlockArgument>(v)) {
        if (arg.getOwner() == body && arg.getArgNumber() > 0)
          return sm.emitOpError() << "is streamed, but its input depends on the loop-carried "
                                     "value #"
                                  << arg.getArgNumber() - 1;
        continue;
      }
      Operation *top = body->findAncestorOpInBlock(*v.getDefiningOp());
      if (!top || !slice.insert(top).second)
        continue;
      top->walk([&](Operation *nested) { llvm::append_range(work, nested->getOperands()); });
    }
    for (Operation *top : slice) {
      Operation *effectful = nullptr;
      top->walk([&](Operation *nested) {
        if (isa<tile::StoreOp, tile::AtomicAddOp, func::CallOp>(nested))
          effectful = nested;
      });
      if (effectful)
        return sm.emitOpError() << "is streamed, but its input depends on '" << effectful->getName()
                                << "', which the interpreter will not repeat to compute the "
                                   "row statistics";
    }

    int64_t rows = 1;
    auto lseType = cast<RankedTensorType>(sm.getLse().getType());
    if (lseType.hasStaticShape())
      rows = lseType.getNumElements();
    SoftmaxStats stats;
    stats.max.assign(rows, -std::numeric_limits<double>::infinity());
    stats.sum.assign(rows, 0.0);
    int64_t axis = sm.getAxis();
    for (int sweep = 0; sweep < 2; ++sweep) {
      for (int64_t k = 0; k < trips; ++k) {
        Tile ivTile;
        ivTile.elementType = ivType;
        ivTile.i = {ivAt(k)};
        set(fr, loop.getInductionVar(), std::move(ivTile));
        for (Operation &inner : *body)
          if (slice.contains(&inner) && failed(runOp(fr, &inner)))
            return failure();
        FailureOr<const Tile *> s = tile(fr, sm, sm.getInput());
        if (failed(s))
          return failure();
        if (!(*s)->isFloat() || axis >= static_cast<int64_t>((*s)->shape.size()) ||
            (*s)->size() != rows * (*s)->shape[axis])
          return sm.emitOpError() << "has an input that does not match its log-sum-exp";
        if (failed(step(sm, (*s)->size())))
          return failure();
        if (sweep == 0)
          foldRowMax(**s, axis, stats.max);
        else
          foldRowSum(**s, axis, stats.max, stats.sum);
      }
    }
    fr.streamedStats[sm] = std::move(stats);
  }
  return success();
}

LogicalResult Interpreter::ifOp(Frame &fr, scf::IfOp op) {
  FailureOr<int64_t> cond = intScalar(fr, op, op.getCondition());
  if (failed(cond))
    return failure();
  Region &region = *cond ? op.getThenRegion() : op.getElseRegion();
  SmallVector<RValue> yielded;
  if (!region.empty() && failed(runBlock(fr, region.front(), yielded)))
    return failure();
  if (yielded.size() != op.getNumResults())
    return op.emitOpError() << "yields " << yielded.size() << " values for " << op.getNumResults()
                            << " results";
  for (auto [result, value] : llvm::zip(op.getResults(), yielded))
    set(fr, result, value);
  return success();
}

LogicalResult Interpreter::callOp(Frame &fr, func::CallOp op) {
  auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(op, op.getCalleeAttr());
  if (!callee || callee.isExternal())
    return op.emitOpError() << "calls @" << op.getCallee()
                            << ", which is not a function with a body in this module";
  if (depth + 1 > options.maxCallDepth)
    return op.emitOpError() << "nests calls deeper than the interpreter's limit of "
                            << options.maxCallDepth;
  SmallVector<RValue> params;
  for (Value v : op.getOperands()) {
    FailureOr<const RValue *> rv = lookup(fr, op, v);
    if (failed(rv))
      return failure();
    params.push_back(**rv);
  }
  FailureOr<SmallVector<RValue>> results = call(callee, params, depth + 1);
  if (failed(results))
    return failure();
  if (results->size() != op.getNumResults())
    return op.emitOpError() << "receives " << results->size() << " values for "
                            << op.getNumResults() << " results";
  for (auto [result, value] : llvm::zip(op.getResults(), *results))
    set(fr, result, value);
  return success();
}

//===----------------------------------------------------------------------===//
// Entry point
//===----------------------------------------------------------------------===//

LogicalResult tessel::interp::runKernel(func::FuncOp kernel, MutableArrayRef<KernelArg> args,
                                        std::array<int64_t, 3> grid, const RunOptions &options) {
  Operation *root = kernel->getParentOfType<ModuleOp>();
  if (failed(mlir::verify(root ? root : kernel.getOperation())))
    return failure();
  if (kernel.isExternal())
    return kernel.emitOpError() << "@" << kernel.getSymName() << " has no body to interpret";
  ArrayRef<Type> params = kernel.getArgumentTypes();
  if (params.size() != args.size())
    return kernel.emitOpError() << "kernel @" << kernel.getSymName() << " takes " << params.size()
                                << " arguments, but " << args.size() << " were given";
  for (int64_t g : grid)
    if (g < 1)
      return kernel.emitOpError() << "cannot run on a grid of " << grid[0] << "x" << grid[1] << "x"
                                  << grid[2] << ": every axis needs at least 1 program";

  SmallVector<RValue> values;
  for (auto [i, type] : llvm::enumerate(params)) {
    KernelArg &arg = args[i];
    if (auto ptr = dyn_cast<tile::PtrType>(type)) {
      std::optional<ElementKind> kind = elementKindOf(ptr.getElementType());
      if (!kind)
        return kernel.emitOpError() << "argument #" << i << " is " << type
                                    << ", but buffers hold only f16, bf16, f32 or i32";
      if (arg.kind != KernelArg::Kind::Buffer || arg.buffer.kind() != *kind)
        return kernel.emitOpError()
               << "argument #" << i << " is " << type << " and needs a buffer of "
               << elementKindName(*kind) << ", but was given "
               << (arg.kind == KernelArg::Kind::Buffer
                       ? ("a buffer of " + elementKindName(arg.buffer.kind())).str()
                       : std::string("a scalar"));
      values.push_back(PtrValue{static_cast<unsigned>(i)});
      continue;
    }
    Tile t;
    t.elementType = type;
    if (isa<IntegerType, IndexType>(type) && isSupportedElement(type)) {
      if (arg.kind != KernelArg::Kind::Int)
        return kernel.emitOpError()
               << "argument #" << i << " is " << type << " and needs an integer scalar";
      if (wrapInt(type, arg.intValue) != arg.intValue)
        return kernel.emitOpError() << "argument #" << i << " is " << type << ", but "
                                    << arg.intValue << " does not fit in it";
      t.i = {arg.intValue};
    } else if (isa<FloatType>(type) && isSupportedElement(type)) {
      if (arg.kind == KernelArg::Kind::Buffer)
        return kernel.emitOpError()
               << "argument #" << i << " is " << type << " and needs a float scalar";
      double v = arg.kind == KernelArg::Kind::Float ? arg.floatValue
                                                    : static_cast<double>(arg.intValue);
      t.f = {roundFloat(type, v)};
    } else {
      return kernel.emitOpError() << "argument #" << i << " has type " << type
                                  << ", which the interpreter cannot pass to a kernel";
    }
    values.push_back(std::move(t));
  }

  Interpreter interp(args, grid, options);
  for (int64_t z = 0; z < grid[2]; ++z)
    for (int64_t y = 0; y < grid[1]; ++y)
      for (int64_t x = 0; x < grid[0]; ++x)
        if (failed(interp.runProgram(kernel, values, {x, y, z})))
          return failure();
  return success();
}
