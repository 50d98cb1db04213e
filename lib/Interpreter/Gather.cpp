//===- Gather.cpp - tile.gather on the CPU interpreter --------------------===//
//
// A tile read one element per index: every result element computes its own address from its
// indices (scalars shared by all elements, tiles one per element). Indices outside the
// descriptor's shape give the padding and are never read; an in-shape index whose address falls
// outside the buffer is a located error, as for tile.load.
//
//===----------------------------------------------------------------------===//

#include "InterpreterImpl.h"

#include "llvm/Support/CheckedArithmetic.h"

using namespace mlir;
using namespace tessel;
using namespace tessel::interp;
using namespace tessel::interp::detail;

LogicalResult Interpreter::gather(Frame &fr, tile::GatherOp op) {
  FailureOr<Tile> r = newTile(op, op.getType());
  if (failed(r) || failed(fillWithPadding(op, *r, op.getPadding().convertToDouble())))
    return failure();
  FailureOr<const RValue *> dv = lookup(fr, op, op.getDesc());
  if (failed(dv))
    return failure();
  const auto *desc = std::get_if<DescValue>(*dv);
  if (!desc)
    return op.emitOpError() << "expects a descriptor";
  if (desc->arg >= args.size() || args[desc->arg].kind != KernelArg::Kind::Buffer)
    return op.emitOpError() << "uses argument #" << desc->arg << ", which is not a buffer";
  Buffer &buf = args[desc->arg].buffer;
  std::optional<ElementKind> kind = elementKindOf(r->elementType);
  if (!kind || *kind != buf.kind())
    return op.emitOpError() << "reads " << r->elementType << " elements in argument #" << desc->arg
                            << ", a buffer of " << elementKindName(buf.kind());
  size_t rank = desc->shape.size();
  if (op.getIndices().size() != rank)
    return op.emitOpError() << "needs " << rank << " indices for a rank-" << rank << " descriptor";
  // Per axis: the index tile, or null with the scalar in `scalars`.
  SmallVector<const Tile *, 4> tiles;
  SmallVector<int64_t, 4> scalars;
  for (Value v : op.getIndices()) {
    FailureOr<const Tile *> t = tile(fr, op, v);
    if (failed(t))
      return failure();
    if ((*t)->isFloat())
      return op.emitOpError() << "expects integer indices";
    bool isScalar = (*t)->shape.empty();
    if (!isScalar && (*t)->size() != r->size())
      return op.emitOpError() << "has an index tile shaped unlike its result";
    tiles.push_back(isScalar ? nullptr : *t);
    scalars.push_back(isScalar ? (*t)->i[0] : 0);
  }
  int64_t n = r->size();
  if (failed(step(op, n)))
    return failure();
  for (int64_t k = 0; k < n; ++k) {
    bool inBounds = true;
    std::optional<int64_t> addr = desc->offset;
    for (size_t a = 0; a < rank && inBounds; ++a) {
      int64_t g = tiles[a] ? tiles[a]->i[k] : scalars[a];
      inBounds = g >= 0 && g < desc->shape[a];
      if (inBounds && addr)
        addr = llvm::checkedMulAdd(g, desc->strides[a], *addr);
    }
    if (!inBounds)
      continue;
    if (!addr)
      return op.emitOpError() << "reads an element whose address overflows 64 bits, in argument #"
                              << desc->arg;
    if (*addr < 0 || *addr >= buf.size())
      return op.emitOpError() << "reads element " << *addr << " of argument #" << desc->arg
                              << ", a buffer of " << buf.size() << " elements";
    double v = buf.get(*addr);
    if (r->isFloat())
      r->f[k] = v;
    else
      r->i[k] = static_cast<int64_t>(v);
  }
  set(fr, op.getResult(), std::move(*r));
  return success();
}
