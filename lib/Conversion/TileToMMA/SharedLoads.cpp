//===- SharedLoads.cpp - cp.async into swizzled shared memory, ldmatrix -----------------------===//
//
// How loaded blocks reach the tensor cores: the XOR-swizzled shared-memory addresses (the mma
// path's swizzle, and wgmma's 128-byte-swizzle slabs), cp.async of a block with the bounds
// checked once per block (zero fill past them) and the ldmatrix reads of A fragments from shared
// memory. When and into which stage each block is copied is the IR's (SharedMemoryOps.cpp).
//
//===------------------------------------------------------------------------------------------===//

#include "MmaKernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace tessel::mma {

//===----------------------------------------------------------------------===//
// Shared-memory addresses
//===----------------------------------------------------------------------===//

Value MmaKernelBuilder::smemChunk(int64_t base, int64_t cols, Value row, Value chunk, Value stage,
                                  int64_t slabBytes) {
  Location loc = b.getUnknownLoc();
  // The swizzle XORs address bits 7 and up into the chunk's bits 4 and up, as many as the
  // swizzle's width has chunks: with 128-byte rows the row's low 3 bits, with 64-byte rows
  // bits 1-2 of the row, with 32-byte rows bit 2.
  int64_t swizzle = tilegpu::swizzleBytes(cols, wgmma), shift = llvm::Log2_64(128 / swizzle);
  Value shifted = shift ? Value(arith::ShRUIOp::create(b, loc, row, ci32(shift))) : row;
  Value rowBits = arith::AndIOp::create(b, loc, shifted, ci32(swizzle / 16 - 1));
  Value swz = arith::XOrIOp::create(b, loc, chunk, rowBits);
  Value bytes = swizzledOffset(base, cols, row, swz, stage, slabBytes);
  auto ptr3 = LLVM::LLVMPointerType::get(b.getContext(), 3);
  return LLVM::GEPOp::create(b, loc, ptr3, b.getI8Type(), smemBase, ValueRange{bytes});
}

Value MmaKernelBuilder::ldmatrixLaneOffset(int64_t cols, Value row8, Value chunkLo) {
  // The tile starts at a multiple of 2·cols bytes (slots and stages are whole tiles), so bits
  // 4 and up of a row's bytes below 2·cols are the swizzled chunk alone: chunk c + 2·step of the
  // lane's row sits at (offset of chunk c) XOR 32·step, as (c + 2·step) XOR r = (c XOR r) XOR
  // 2·step for c < 2. One XOR per ldmatrix instead of a full address, and one live register
  // per operand and lane instead of one per k step. The XOR touches bits below 2·cols only, so
  // it commutes with adding the tile's start: (L + t) XOR x = (L XOR x) + t. The start (slot,
  // stage, the warp's first row) is uniform and ptxas adds it in the ldmatrix's address
  // ([R + UR + imm]): one lane register for Q and V together (the same matrix order), one for K.
  assert(tilegpu::swizzleBytes(cols, wgmma) == 128 && "ldmatrix reads 128-byte swizzles");
  Location loc = b.getUnknownLoc();
  Value lane7 = arith::AndIOp::create(b, loc, lane, ci32(7));
  Value row = arith::AddIOp::create(b, loc, row8, lane7);
  Value swz = arith::XOrIOp::create(b, loc, chunkLo, lane7);
  return swizzledOffset(0, cols, row, swz, Value());
}

Value MmaKernelBuilder::swizzledOffset(int64_t base, int64_t cols, Value row, Value swizzled,
                                       Value stage, int64_t slabBytes) {
  Location loc = b.getUnknownLoc();
  Value chunkBytes = arith::MulIOp::create(b, loc, swizzled, ci32(16));
  if (slabBytes) {
    // wgmma's 128-byte-swizzle canonical layout: 64-column slabs of 128-byte rows one after
    // the other; the XOR keeps bit 3 of the chunk, which is the slab.
    Value slab = arith::ShRUIOp::create(b, loc, swizzled, ci32(3));
    chunkBytes = arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, slab, ci32(slabBytes)),
        arith::MulIOp::create(b, loc, arith::AndIOp::create(b, loc, swizzled, ci32(7)), ci32(16)));
  }
  Value bytes = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, row, ci32(rowBytes(cols))), chunkBytes);
  bytes = arith::AddIOp::create(b, loc, bytes, ci32(base));
  if (stage)
    bytes = arith::AddIOp::create(b, loc, bytes, stage);
  return bytes;
}

Value MmaKernelBuilder::ldmatrixAt(Value laneOffset, int64_t xorBytes, Value tileBytes,
                                   int64_t addBytes, bool transpose) {
  Location loc = b.getUnknownLoc();
  Value bytes = xorBytes ? Value(arith::XOrIOp::create(b, loc, laneOffset, ci32(xorBytes)))
                         : laneOffset;
  auto ptr3 = LLVM::LLVMPointerType::get(b.getContext(), 3);
  Value addr = LLVM::GEPOp::create(b, loc, ptr3, b.getI8Type(), smemBase, ValueRange{tileBytes});
  addr = LLVM::GEPOp::create(b, loc, ptr3, b.getI8Type(), addr, ValueRange{bytes});
  if (addBytes)
    addr = LLVM::GEPOp::create(b, loc, ptr3, b.getI8Type(), addr,
                               ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(addBytes)});
  return ldmatrix4(addr, transpose);
}

Value MmaKernelBuilder::ldmatrix4(Value addr, bool transpose) {
  Location loc = b.getUnknownLoc();
  Type i32 = b.getI32Type();
  auto structType = LLVM::LLVMStructType::getLiteral(b.getContext(), {i32, i32, i32, i32});
  return NVVM::LdMatrixOp::create(
      b, loc, structType, addr, 4, transpose ? NVVM::MMALayout::col : NVVM::MMALayout::row,
      NVVM::LdStMatrixShapeAttr::get(b.getContext(), 8, 8), NVVM::LdStMatrixEltType::B16);
}

std::pair<int64_t, int64_t> MmaKernelBuilder::chunkStep(const LoadPlan &p, int64_t step) const {
  if (!wgmma)
    return {32 * step, 0};
  return {32 * (step % 4), step / 4 * slabBytes(p)};
}

//===----------------------------------------------------------------------===//
// cp.async of a block
//===----------------------------------------------------------------------===//

namespace {

/// The comparisons, conjunctions and global element addresses a block copy is made of.
struct CopyOps {
  OpBuilder &b;
  Location loc;
  Type elementType;
  Value cmp(arith::CmpIPredicate pred, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, pred, x, y);
  }
  Value andi(Value x, Value y) { return arith::AndIOp::create(b, loc, x, y); }
  Value gep(Value base, Value elems) {
    return LLVM::GEPOp::create(b, loc, LLVM::LLVMPointerType::get(b.getContext(), 1), elementType,
                               base, ValueRange{elems});
  }
};

} // namespace

void MmaKernelBuilder::issueBlock(Location loc, Value desc, const LoadPlan &p, Value row0,
                                  Value col0, Value stage) {
  // Threads past copyThreadCount() (the third consumer warpgroup) copy nothing.
  if (!copyTid && copyThreadCount() < numThreads()) {
    Value mine = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, tid,
                                       ci32(copyThreadCount()));
    auto copying = scf::IfOp::create(b, loc, mine, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(copying.thenBlock()->getTerminator());
    issueBlockChunks(loc, desc, p, row0, col0, stage);
    return;
  }
  issueBlockChunks(loc, desc, p, row0, col0, stage);
}

void MmaKernelBuilder::issueBlockChunks(Location loc, Value desc, const LoadPlan &p, Value row0,
                                        Value col0, Value stage) {
  const Desc &d = descs[desc];
  // wgmma's slabs lie one after the other, each a [rows, 64] block of its own: a block whose
  // row of chunks does not divide the copying threads (192 columns: 24) is copied a slab at a
  // time, 8 chunks a row.
  if (int64_t slab = slabBytes(p); slab && copyThreadCount() % (p.cols / 8) != 0) {
    LoadPlan part = p;
    part.cols = 64;
    for (int64_t s = 0; s < p.cols / 64; ++s) {
      part.smemOffset = p.smemOffset + s * slab;
      Value col = arith::AddIOp::create(
          b, loc, col0,
          arith::ConstantOp::create(b, loc, col0.getType(),
                                    b.getIntegerAttr(col0.getType(), s * 64)));
      issueBlockChunks(loc, desc, part, row0, col, stage);
    }
    return;
  }
  // Thread t copies chunk t % cpr of rows t / cpr + i·rps (rps = threads / cpr rows per step):
  // the chunk and the row's swizzle bits are the same for every step when rps is a multiple of
  // 8, so one shared and one global address per thread serve every step with constant offsets.
  int64_t chunksPerRow = p.cols / 8;
  int64_t rowsPerStep = copyThreadCount() / chunksPerRow;
  // Elements of a 16-byte chunk: 8 (f16, bf16), 16 (FP8).
  int64_t ce = chunkElements(d);
  int64_t steps = p.rows / rowsPerStep;
  // Strides known at compile time to suit 16-byte copies (unit inner stride, rows a multiple of
  // 16 bytes: every attention program) take constant offsets; a row stride known to be such a
  // multiple (`n · BLOCK`: an FP8 V given transposed) is taken as it is; others are checked at
  // run time, and a block that cannot be copied in 16-byte chunks is read element by element.
  auto md = desc.getDefiningOp<tile::MakeDescOp>();
  int64_t rowStride = constantOf(md.getStrides()[0]);
  bool unitInner = constantOf(md.getStrides()[1]) == 1;
  bool staticChunks = unitInner && rowStride != INT64_MIN && rowStride % ce == 0;
  bool chunkedRows = staticChunks ||
                     (unitInner && knownMultipleOf(md.getStrides()[0]) % ce == 0 &&
                      (!md.getOffset() || knownMultipleOf(md.getOffset()) % ce == 0));
  Value r0 = toI64(row0), c0 = toI64(col0);
  Value zero = ci64(0);
  auto ptr1 = LLVM::LLVMPointerType::get(b.getContext(), 1);
  auto ptr3 = LLVM::LLVMPointerType::get(b.getContext(), 3);
  CopyOps ops{b, loc, d.elementType};
  auto cmp = [&](arith::CmpIPredicate pred, Value x, Value y) { return ops.cmp(pred, x, y); };
  auto andi = [&](Value x, Value y) { return ops.andi(x, y); };
  auto gep1 = [&](Value base, Value elems) { return ops.gep(base, elems); };
  Value rowT = arith::DivUIOp::create(b, loc, copyThreadIndex(), ci32(chunksPerRow));
  Value chunk = arith::RemUIOp::create(b, loc, copyThreadIndex(), ci32(chunksPerRow));
  // The block's first element (uniform: the same for every thread, so ptxas keeps it in uniform
  // registers) and the thread's element offset inside the block (loop-invariant, the same for
  // every load of the same row stride: K and V share it). Two live values instead of one 64-bit
  // address per load that LLVM would strength-reduce into a loop-carried pointer per load.
  Value blockElem = arith::AddIOp::create(
      b, loc, d.offset,
      arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, r0, d.strides[0]),
                            arith::MulIOp::create(b, loc, c0, d.strides[1])));
  // An opaque copy of `v` (a side-effecting move LLVM cannot hoist): what is computed from it
  // is computed where it is used instead of hoisted out of the loop into registers live across
  // it (LLVM moves loop-invariant arithmetic out of branches and loops: 218 registers a thread
  // instead of 98 on a 128x128 GEMM with run-time strides).
  auto opaque = [&](Value v) {
    bool wide = v.getType().isInteger(64);
    return tessel::conversion::inlinePtx(b, loc, v.getType(), v,
                                         wide ? "mov.b64 $0, $1;" : "mov.b32 $0, $1;",
                                         wide ? "=l,l" : "=r,r")
        .front();
  };
  // The row stride, when known only at run time, recomputed at each copy (one register).
  Value rowStrideV = staticChunks ? Value() : opaque(d.strides[0]);
  Value threadElem =
      staticChunks
          ? Value(arith::ExtUIOp::create(
                b, loc, b.getI64Type(),
                arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, rowT, ci32(rowStride)),
                                      arith::MulIOp::create(b, loc, chunk, ci32(ce)))))
          : Value(arith::AddIOp::create(b, loc,
                                        arith::MulIOp::create(b, loc, toI64(rowT), d.strides[0]),
                                        toI64(arith::MulIOp::create(b, loc, chunk, ci32(ce)))));
  Value src0 = gep1(gep1(d.base, blockElem), threadElem);
  bool sameSwizzle = rowsPerStep % 8 == 0;
  Value dst0 = smemChunk(p.smemOffset, p.cols, rowT, chunk, stage, slabBytes(p));
  auto dstAt = [&](int64_t i) -> Value {
    if (i == 0)
      return dst0;
    if (sameSwizzle)
      return LLVM::GEPOp::create(
          b, loc, ptr3, b.getI8Type(), dst0,
          ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(i * rowsPerStep * rowBytes(p.cols))});
    Value row = arith::AddIOp::create(b, loc, rowT, ci32(i * rowsPerStep));
    return smemChunk(p.smemOffset, p.cols, row, chunk, stage, slabBytes(p));
  };
  auto srcAt = [&](int64_t i) -> Value {
    if (i == 0)
      return src0;
    if (!staticChunks)
      return gep1(src0, arith::MulIOp::create(b, loc, ci64(i * rowsPerStep), rowStrideV));
    return LLVM::GEPOp::create(
        b, loc, ptr1, d.elementType, src0,
        ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(i * rowsPerStep * rowStride)});
  };
  if (d.pages) {
    issuePagedChunks(loc, d, r0, c0, rowT, chunk, steps, rowsPerStep, dstAt);
    return;
  }
  if (!chunkedRows) {
    // 16-byte chunks need a unit inner stride, rows a multiple of 16 bytes and the block's
    // first element 16-byte aligned (a view may start anywhere): uniform conditions, so the
    // branch is uniform. Otherwise each thread reads its chunks' elements (zero outside the
    // tensor, read from the base instead) and stores them to shared memory itself.
    Value addr = LLVM::PtrToIntOp::create(b, loc, b.getI64Type(), gep1(d.base, blockElem));
    Value chunkable = andi(
        andi(cmp(arith::CmpIPredicate::eq, d.strides[1], ci64(1)),
             cmp(arith::CmpIPredicate::eq,
                 arith::AndIOp::create(b, loc, d.strides[0], ci64(ce - 1)), zero)),
        andi(cmp(arith::CmpIPredicate::eq, arith::AndIOp::create(b, loc, addr, ci64(15)), zero),
             cmp(arith::CmpIPredicate::sge, c0, zero)));
    auto split = scf::IfOp::create(b, loc, chunkable, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(split.elseBlock());
    // Element by element: positions made opaque again, so that this seldom-taken branch's
    // arithmetic stays in it.
    Value r0x = opaque(r0), c0x = opaque(c0), rowTx = opaque(rowT), chunkx = opaque(chunk);
    auto vt = VectorType::get({ce}, d.elementType);
    Value zeroElem = arith::ConstantOp::create(b, loc, b.getZeroAttr(d.elementType));
    for (int64_t i = 0; i < steps; ++i) {
      Value grow = arith::AddIOp::create(
          b, loc, r0x, toI64(arith::AddIOp::create(b, loc, rowTx, ci32(i * rowsPerStep))));
      Value rowIn = andi(cmp(arith::CmpIPredicate::sge, grow, zero),
                         cmp(arith::CmpIPredicate::slt, grow, d.shape[0]));
      Value rowElem = arith::AddIOp::create(b, loc, d.offset,
                                            arith::MulIOp::create(b, loc, grow, d.strides[0]));
      Value vec = LLVM::PoisonOp::create(b, loc, vt);
      for (int64_t e = 0; e < ce; ++e) {
        Value gcol = arith::AddIOp::create(
            b, loc, c0x,
            toI64(arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, chunkx, ci32(ce)),
                                        ci32(e))));
        Value in = andi(rowIn, andi(cmp(arith::CmpIPredicate::sge, gcol, zero),
                                    cmp(arith::CmpIPredicate::slt, gcol, d.shape[1])));
        Value at = gep1(d.base,
                        arith::AddIOp::create(b, loc, rowElem,
                                              arith::MulIOp::create(b, loc, gcol, d.strides[1])));
        Value v = LLVM::LoadOp::create(b, loc, d.elementType,
                                       arith::SelectOp::create(b, loc, in, at, d.base));
        vec = LLVM::InsertElementOp::create(
            b, loc, vec, arith::SelectOp::create(b, loc, in, v, zeroElem), ci32(e));
      }
      LLVM::StoreOp::create(b, loc, vec, dstAt(i), /*alignment=*/16);
    }
    b.setInsertionPointToStart(split.thenBlock());
    emitChunks(loc, d, p, r0, c0, rowT, chunk, steps, rowsPerStep, false, dstAt, srcAt);
    return;
  }
  // Chunks are whole or wholly outside when the block starts on a chunk boundary of a row
  // whose length is a multiple of 8, both known at compile time (attention's head dims);
  // otherwise the last chunk of a row may be partial.
  int64_t width = constantOf(md.getShape()[1]), col = constantOf(col0);
  bool wholeChunks = width != INT64_MIN && width % ce == 0 && col != INT64_MIN && col % ce == 0;
  emitChunks(loc, d, p, r0, c0, rowT, chunk, steps, rowsPerStep, wholeChunks, dstAt, srcAt);
}

void MmaKernelBuilder::issueTransposedBlock(Location loc, Value desc, const LoadPlan &p, Value row0,
                                            Value col0, Value stage) {
  // The block [R, C] of bytes (R = the buffer's columns, C its rows) lands as [C, R]. Unit u of
  // the copying threads: 4 rows k0.. of the block × 16 columns d0.., four 16-byte loads, 4×4
  // byte transposes (prmt), one 32-bit store per column into row d of the buffer. Lanes take
  // consecutive k0: a warp's stores fill whole 128-byte rows (no bank conflict). Synchronous
  // (a load per row through the registers); then the writes are fenced for wgmma's async proxy.
  const Desc &d = descs[desc];
  Type i32 = b.getI32Type();
  int64_t R = p.cols * 2, C = p.rows, kGroups = R / 4;
  int64_t units = kGroups * (C / 16), threads = copyThreadCount();
  Value r0 = toI64(row0), c0 = toI64(col0), zero = ci64(0);
  CopyOps ops{b, loc, d.elementType};
  auto cmp = [&](arith::CmpIPredicate pred, Value x, Value y) { return ops.cmp(pred, x, y); };
  auto andi = [&](Value x, Value y) { return ops.andi(x, y); };
  auto prmt = [&](Value x, Value y, Value selector) {
    return asmResults(b, loc, "prmt.b32 $0, $1, $2, $3;", TypeRange{i32}, {},
                      ValueRange{x, y, selector}, {"r", "r", "r"})
        .front();
  };
  std::string load = "{\n.reg .pred p;\nsetp.ne.b32 p, $4, 0;\nmov.b32 $0, 0;\nmov.b32 $1, 0;\n"
                     "mov.b32 $2, 0;\nmov.b32 $3, 0;\n@p ld.global.v4.b32 {$0, $1, $2, $3}, "
                     "[$5];\n}";
  // The thread's index through an opaque move: what is computed from it stays here instead of
  // being hoisted out of the producer's loop into registers live across it (16 store
  // addresses a unit: the producer spilled 28 bytes at 56 registers).
  Value thread = tessel::conversion::inlinePtx(b, loc, i32, copyThreadIndex(), "mov.b32 $0, $1;",
                                               "=r,r")
                     .front();
  // Every unit's loads first, then the transposes and stores: one round trip to memory for
  // the whole block instead of one a unit.
  struct Unit {
    Value k0, d0;
    SmallVector<SmallVector<Value>> words;
  };
  SmallVector<Unit> mine;
  for (int64_t first = 0; first < units; first += threads) {
    Unit &unit = mine.emplace_back();
    Value u = arith::AddIOp::create(b, loc, thread, ci32(first));
    unit.k0 = arith::MulIOp::create(b, loc, arith::RemUIOp::create(b, loc, u, ci32(kGroups)),
                                    ci32(4));
    unit.d0 = arith::MulIOp::create(b, loc, arith::DivUIOp::create(b, loc, u, ci32(kGroups)),
                                    ci32(16));
    Value col = arith::AddIOp::create(b, loc, c0, toI64(unit.d0));
    Value colIn = andi(
        cmp(arith::CmpIPredicate::sge, col, zero),
        cmp(arith::CmpIPredicate::sle, arith::AddIOp::create(b, loc, col, ci64(16)), d.shape[1]));
    Value colElem = arith::AddIOp::create(b, loc, d.offset,
                                          arith::MulIOp::create(b, loc, col, d.strides[1]));
    for (int64_t r = 0; r < 4; ++r) {
      Value row = arith::AddIOp::create(b, loc, r0,
                                        toI64(arith::AddIOp::create(b, loc, unit.k0, ci32(r))));
      Value in = andi(colIn, andi(cmp(arith::CmpIPredicate::sge, row, zero),
                                  cmp(arith::CmpIPredicate::slt, row, d.shape[0])));
      Value elem = arith::AddIOp::create(b, loc, colElem,
                                         arith::MulIOp::create(b, loc, row, d.strides[0]));
      Value addr = ops.gep(d.base, arith::SelectOp::create(b, loc, in, elem, d.offset));
      unit.words.push_back(asmResults(b, loc, load, TypeRange{i32, i32, i32, i32}, {},
                                      ValueRange{arith::ExtUIOp::create(b, loc, i32, in), addr},
                                      {"r", "l"}));
    }
  }
  auto ptr3 = LLVM::LLVMPointerType::get(b.getContext(), 3);
  // Rows narrower than 128 bytes (64 or 32 keys): a warp's lanes fill G = 128 / R rows of
  // the same store at once, d0 16 rows apart, which the swizzle puts in the same banks. Lane
  // group g = (unit / kGroups) % G stores column c ^ g where the others store c: G rows of
  // distinct low bits, distinct banks. The XOR is in the prmt selectors (registers), so a
  // store costs nothing more; with 128-byte rows g is 0 and the selectors constants. g depends
  // on the thread alone, the copying threads being a multiple of kGroups · G.
  int64_t G = std::max<int64_t>(128 / R, 1);
  assert(threads % (kGroups * G) == 0 && "a lane's group is the same in all its units");
  Value g = G == 1 ? Value()
                   : arith::RemUIOp::create(
                         b, loc, arith::DivUIOp::create(b, loc, thread, ci32(kGroups)), ci32(G));
  // Selectors by a bit of g: `when` if the bit is set, else `otherwise`.
  auto selector = [&](int64_t bit, int64_t otherwise, int64_t when) -> Value {
    if (!g || (G >> bit) == 1)
      return ci32(otherwise);
    Value set = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                      arith::AndIOp::create(b, loc, g, ci32(1 << bit)), ci32(0));
    return arith::SelectOp::create(b, loc, set, ci32(when), ci32(otherwise));
  };
  Value pickLo = selector(1, 0x5140, 0x7362), pickHi = selector(1, 0x7362, 0x5140);
  Value pick0 = selector(0, 0x5410, 0x7632), pick1 = selector(0, 0x7632, 0x5410);
  for (Unit &unit : mine) {
    Value chunk = arith::ShRUIOp::create(b, loc, unit.k0, ci32(4));
    Value inChunk = arith::AndIOp::create(b, loc, unit.k0, ci32(15));
    auto &words = unit.words;
    for (int64_t j = 0; j < 4; ++j) {
      // Byte b of word j of row r is element (k0 + r, d0 + 4j + b); column[c] holds the
      // four keys of column d0 + 4j + (c ^ g).
      Value lo01 = prmt(words[0][j], words[1][j], pickLo),
            hi01 = prmt(words[0][j], words[1][j], pickHi);
      Value lo23 = prmt(words[2][j], words[3][j], pickLo),
            hi23 = prmt(words[2][j], words[3][j], pickHi);
      Value column[4] = {prmt(lo01, lo23, pick0), prmt(lo01, lo23, pick1), prmt(hi01, hi23, pick0),
                         prmt(hi01, hi23, pick1)};
      for (int64_t byte = 0; byte < 4; ++byte) {
        Value c = g ? Value(arith::XOrIOp::create(b, loc, g, ci32(byte))) : ci32(byte);
        Value row = arith::AddIOp::create(b, loc, unit.d0,
                                          arith::AddIOp::create(b, loc, ci32(4 * j), c));
        Value at = LLVM::GEPOp::create(
            b, loc, ptr3, b.getI8Type(),
            smemChunk(p.smemOffset, p.cols, row, chunk, stage, slabBytes(p)), ValueRange{inChunk});
        LLVM::StoreOp::create(b, loc, column[byte], at, /*alignment=*/4);
      }
    }
  }
  fenceSharedForAsyncProxy(loc);
}

MmaKernelBuilder::ChunkColumns MmaKernelBuilder::chunkColumns(Location loc, const Desc &d, Value c0,
                                                              Value chunk, bool wholeChunks) {
  CopyOps ops{b, loc, d.elementType};
  auto cmp = [&](arith::CmpIPredicate pred, Value x, Value y) { return ops.cmp(pred, x, y); };
  auto andi = [&](Value x, Value y) { return ops.andi(x, y); };
  Value zero = ci64(0);
  int64_t ce = chunkElements(d);
  Value gcol = arith::AddIOp::create(b, loc, c0,
                                     toI64(arith::MulIOp::create(b, loc, chunk, ci32(ce))));
  Value colIn = andi(
      cmp(arith::CmpIPredicate::sge, gcol, zero),
      cmp(arith::CmpIPredicate::sle, arith::AddIOp::create(b, loc, gcol, ci64(ce)), d.shape[1]));
  // A chunk that may be partial copies the bytes inside the row (cp.async zero-fills the rest).
  Value chunkBytes = ci32(16);
  if (!wholeChunks) {
    Value left = arith::MinSIOp::create(
        b, loc,
        arith::MaxSIOp::create(b, loc, arith::SubIOp::create(b, loc, d.shape[1], gcol), zero),
        ci64(ce));
    colIn = andi(cmp(arith::CmpIPredicate::sge, gcol, zero),
                 cmp(arith::CmpIPredicate::sgt, left, zero));
    int64_t elemBytes = d.elementType.getIntOrFloatBitWidth() / 8;
    chunkBytes = arith::MulIOp::create(
        b, loc, arith::TruncIOp::create(b, loc, b.getI32Type(), left), ci32(elemBytes));
  }
  return {gcol, colIn, chunkBytes};
}

void MmaKernelBuilder::emitChunks(Location loc, const Desc &d, const LoadPlan &p, Value r0,
                                  Value c0, Value rowT, Value chunk, int64_t steps,
                                  int64_t rowsPerStep, bool wholeChunks,
                                  llvm::function_ref<Value(int64_t)> dstAt,
                                  llvm::function_ref<Value(int64_t)> srcAt) {
  Value zero = ci64(0);
  CopyOps ops{b, loc, d.elementType};
  auto cmp = [&](arith::CmpIPredicate pred, Value x, Value y) { return ops.cmp(pred, x, y); };
  auto andi = [&](Value x, Value y) { return ops.andi(x, y); };
  auto gep1 = [&](Value base, Value elems) { return ops.gep(base, elems); };
  // The whole block inside the tensor (every block but the last of a ragged loop): plain copies.
  // A uniform condition (rows and columns of the block, not of the thread's chunk), so the
  // branch is uniform.
  Value full = andi(andi(cmp(arith::CmpIPredicate::sge, r0, zero),
                         cmp(arith::CmpIPredicate::sle,
                             arith::AddIOp::create(b, loc, r0, ci64(p.rows)), d.shape[0])),
                    andi(cmp(arith::CmpIPredicate::sge, c0, zero),
                         cmp(arith::CmpIPredicate::sle,
                             arith::AddIOp::create(b, loc, c0, ci64(p.cols * 8 / chunkElements(d))),
                             d.shape[1])));
  auto ifOp = scf::IfOp::create(b, loc, full, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  for (int64_t i = 0; i < steps; ++i)
    NVVM::CpAsyncOp::create(b, loc, dstAt(i), srcAt(i), 16, NVVM::LoadCacheModifierKind::CG,
                            Value());
  // Otherwise each chunk is checked; out of bounds it reads nothing (src-size 0 zero-fills)
  // from an address that is valid (the descriptor's base). Everything here is computed inside
  // the branch, in 32 bits where it can be: the block's rows inside the tensor are the local
  // rows x with lo <= x < hi (lo, hi clamped to [0, rows], uniform).
  b.setInsertionPointToStart(ifOp.elseBlock());
  auto clampRows = [&](Value v) -> Value {
    Value c = arith::MinSIOp::create(b, loc, arith::MaxSIOp::create(b, loc, v, zero), ci64(p.rows));
    return arith::TruncIOp::create(b, loc, b.getI32Type(), c);
  };
  Value lo = clampRows(arith::SubIOp::create(b, loc, zero, r0));
  Value hi = clampRows(arith::SubIOp::create(b, loc, d.shape[0], r0));
  auto [gcol, colIn, chunkBytes] = chunkColumns(loc, d, c0, chunk, wholeChunks);
  Value origin = gep1(d.base, d.offset);
  // Step i of the thread (row rowT + i·rps) is inside iff first <= i < end, with
  // first = ceil((lo - rowT) / rps), end = ceil((hi - rowT) / rps): two values per block, and
  // per step a compare with a constant. (Written as rowT + i·rps against lo and hi, LLVM
  // hoists the thread's rows out of the loop: one loop-invariant register per step.)
  Value first = arith::CeilDivSIOp::create(b, loc, arith::SubIOp::create(b, loc, lo, rowT),
                                           ci32(rowsPerStep));
  Value end = arith::CeilDivSIOp::create(b, loc, arith::SubIOp::create(b, loc, hi, rowT),
                                         ci32(rowsPerStep));
  for (int64_t i = 0; i < steps; ++i) {
    Value in = andi(andi(cmp(arith::CmpIPredicate::sle, first, ci32(i)),
                         cmp(arith::CmpIPredicate::sgt, end, ci32(i))),
                    colIn);
    Value src = arith::SelectOp::create(b, loc, in, srcAt(i), origin);
    Value srcBytes = arith::SelectOp::create(b, loc, in, chunkBytes, ci32(0));
    NVVM::CpAsyncOp::create(b, loc, dstAt(i), src, 16, NVVM::LoadCacheModifierKind::CG, srcBytes);
  }
}

void MmaKernelBuilder::issuePagedChunks(Location loc, const Desc &d, Value r0, Value c0, Value rowT,
                                        Value chunk, int64_t steps, int64_t rowsPerStep,
                                        llvm::function_ref<Value(int64_t)> dstAt) {
  // Each row is looked up in the page table (rows of one block may lie in different pages),
  // so every chunk is checked: its row inside the view and in a page, its columns inside the
  // row. Outside, it reads nothing (src-size 0 zero-fills) from the descriptor's base.
  CopyOps ops{b, loc, d.elementType};
  auto cmp = [&](arith::CmpIPredicate pred, Value x, Value y) { return ops.cmp(pred, x, y); };
  auto andi = [&](Value x, Value y) { return ops.andi(x, y); };
  Value zero = ci64(0);
  auto [gcol, colIn, chunkBytes] = chunkColumns(loc, d, c0, chunk, /*wholeChunks=*/false);
  Value colElem = arith::AddIOp::create(b, loc, d.offset,
                                        arith::MulIOp::create(b, loc, gcol, d.strides[1]));
  Value rowBase = arith::AddIOp::create(b, loc, r0, toI64(rowT));
  for (int64_t i = 0; i < steps; ++i) {
    Value row = arith::AddIOp::create(b, loc, rowBase, ci64(i * rowsPerStep));
    auto [physical, exists] = tessel::conversion::pagedRow(b, loc, *d.pages, row);
    Value in = andi(andi(cmp(arith::CmpIPredicate::sge, row, zero),
                         cmp(arith::CmpIPredicate::slt, row, d.shape[0])),
                    andi(exists, colIn));
    Value elem = arith::AddIOp::create(b, loc, colElem,
                                       arith::MulIOp::create(b, loc, physical, d.strides[0]));
    Value src = ops.gep(d.base, arith::SelectOp::create(b, loc, in, elem, d.offset));
    Value srcBytes = arith::SelectOp::create(b, loc, in, chunkBytes, ci32(0));
    NVVM::CpAsyncOp::create(b, loc, dstAt(i), src, 16, NVVM::LoadCacheModifierKind::CG, srcBytes);
  }
}

LogicalResult MmaKernelBuilder::checkChunked(Operation *op, Value desc) {
  // Any strides: those not known to suit 16-byte copies are checked at run time (issueBlock).
  // A paged descriptor's rows are looked up chunk by chunk, which needs the 16-byte copies.
  auto found = descs.find(desc);
  if (found == descs.end())
    return op->emitOpError("reads a descriptor convert-tile-to-mma cannot trace to make_desc");
  if (found->second.pages) {
    auto md = desc.getDefiningOp<tile::MakeDescOp>();
    int64_t rowStride = constantOf(md.getStrides()[0]);
    if (constantOf(md.getStrides()[1]) != 1 || rowStride == INT64_MIN ||
        rowStride % chunkElements(found->second))
      return op->emitOpError("reads a paged descriptor whose strides are not known at compile "
                             "time to be 1 and a multiple of 16 bytes: convert-tile-to-mma "
                             "copies its rows in 16-byte chunks");
  }
  return success();
}

/// Whether every read of `value` sits in one scf.for (the innermost around each user).
static bool readInOneLoop(Value value) {
  scf::ForOp only;
  for (Operation *user : value.getUsers()) {
    auto loop = user->getParentOfType<scf::ForOp>();
    if (!loop || (only && loop != only))
      return false;
    only = loop;
  }
  return static_cast<bool>(only);
}

void MmaKernelBuilder::takeAFragments(Value result, const LoadPlan &p, Value stage) {
  // A fragments for every m tile and 16-column step are kept in registers while all the A
  // blocks so kept take at most 32 a thread (Q at d64, or at d128 with one m tile per warp);
  // the others are read from shared memory by each dot: ldmatrix at every k step (mma.sync),
  // or a matrix descriptor (wgmma). Q at d128 with two m tiles would take 64 registers beside
  // the 128 of the accumulator and the 64 of the scores; the backward's second A block (V
  // beside K, dO beside Q) another 32 beside two accumulators. wgmma reads an A block in
  // shared memory at full speed: with several (the backward's), all of them stay there, and
  // tilegpu's plan (MmaClass.cpp) keeps their slots out of the loops' ring. In overlapped
  // consumers (tilegpu-overlap-consumers: S, O and P in flight at once) the block has bytes
  // of its own (the producer's ring never reuses them): read by descriptor, its registers go
  // to the schedule. Synchronous warp-specialized consumers read it so too where one key
  // loop reads it all: ptxas 13.0 gave such a Q's registers to P inside the loop (d128
  // 128x128 with whole key blocks), so every S after the first read P
  // (docs/dev/codegen-wgmma.md). Read in two loops, Q stays in registers: its descriptors'
  // uniform registers made block-mask kernels spill. One warpgroup's Q goes there too where
  // tilegpu's plan says so (byDescriptor: one loop beside a P of Q's width, where ptxas did
  // the same).
  int64_t regs = mTiles * (p.cols / 16) * 4;
  if (residentARegs + regs > 32 ||
      (wgmma && (aBlocks > 1 || p.byDescriptor ||
                 (consumerBarriers && (overlappedConsumers || readInOneLoop(result)))))) {
    aShared[result] = SharedView{p, stage};
    if (wgmma) {
      // wgmma reads it through the async proxy: every thread's landed cp.async writes
      // (generic proxy) are ordered before, then the block is complete for all of them.
      fenceSharedForAsyncProxy(b.getUnknownLoc());
      emitBarrier(b.getUnknownLoc());
    }
    return;
  }
  residentARegs += regs;
  SmallVector<Value> frags;
  for (int64_t mt = 0; mt < mTiles; ++mt)
    for (int64_t kt = 0; kt < p.cols / 16; ++kt)
      llvm::append_range(frags, loadAFragments(p, mt, kt, stage));
  aFragments[result] = frags;
}

SmallVector<Value> MmaKernelBuilder::loadAFragments(const LoadPlan &p, int64_t mt, int64_t kt,
                                                    Value stage) {
  // Matrix q = lane/8 of the ldmatrix.x4 holds rows +8·(q&1) and columns +8·(q>>1) of the
  // 16×16 slab of m tile mt at k step kt.
  Location loc = b.getUnknownLoc();
  Value q = arith::ShRUIOp::create(b, loc, lane, ci32(3));
  Value row8 = arith::MulIOp::create(b, loc, arith::AndIOp::create(b, loc, q, ci32(1)), ci32(8));
  Value laneOffset = ldmatrixLaneOffset(p.cols, row8, arith::ShRUIOp::create(b, loc, q, ci32(1)));
  Value tile = arith::AddIOp::create(
      b, loc, ci32(p.smemOffset), arith::MulIOp::create(b, loc, rowBase, ci32(rowBytes(p.cols))));
  if (stage)
    tile = arith::AddIOp::create(b, loc, tile, stage);
  auto [xorBytes, addBytes] = chunkStep(p, kt);
  Value x4 = ldmatrixAt(laneOffset, xorBytes, tile, 16 * mt * rowBytes(p.cols) + addBytes, false);
  SmallVector<Value> frags;
  for (int64_t i = 0; i < 4; ++i)
    frags.push_back(fragmentOf(LLVM::ExtractValueOp::create(b, loc, x4, i)));
  return frags;
}

} // namespace tessel::mma
