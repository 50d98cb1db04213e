//===- TmaCopies.cpp - the producer's copies through TMA, with maps built in the kernel ------===//
//
// What tilegpu-tma-producer marked: a block copied by one thread of the producer with
// cp.async.bulk.tensor (one 2-D box of 64 columns a slab), completing on the stage's `full`
// mbarrier by bytes (expect_tx), instead of 128 threads' cp.async. The tensor map comes from
// the descriptor at run time: the producer's warp 0 builds it in a shared-memory image
// (tensormap.replace, field codes confirmed on the H200: docs/dev/notes/2026-12-04-tma-ptx.md)
// and publishes it to the map's global slot for this SM when the descriptor changed — into
// the next of the map's slots, after the copy's `empty` wait, so no copy through the slot it
// overwrites is still in flight. A descriptor TMA cannot read (an origin not 16-byte aligned,
// a row stride not a multiple of 16 bytes) takes the cp.async path under the same branch;
// every producer thread still arrives on `full` (its async_copy_arrive), so the barriers do
// not change. With tma-only the launcher guarantees what the check asks (tessel.attention's
// dense and block-sparse kernels: 16-byte aligned inputs; sm_90a devices have under kTmaSms
// SMs), and neither is emitted.
//
//===------------------------------------------------------------------------------------------===//

#include "MmaKernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace tessel::mma {

namespace {

/// PTX's element type code of a 16-bit float (tensormap.replace .elemtype).
int64_t elementTypeCode(Type t) { return t.isBF16() ? 10 : 6; }

/// Zeroes the 16 bytes of shared memory at `address` (an i32 of the shared window).
void zero16(OpBuilder &b, Location loc, Value address) {
  Value z = arith::ConstantIntOp::create(b, loc, b.getI32Type(), 0);
  ptxStatement(b, loc, "st.shared.v4.b32 [$0], {$1, $1, $1, $1};", {address, z}, "r,r");
}

/// The warp's threads meet, their shared-memory accesses ordered.
void warpSync(OpBuilder &b, Location loc) { ptxStatement(b, loc, "bar.warp.sync -1;", {}, ""); }

} // namespace

void MmaKernelBuilder::emitTmaSetup(Location loc) {
  if (!tmaMaps)
    return;
  // Lanes of warp 0 zero the records (16 bytes each, 64 a map): no map built, a build count
  // of 0.
  Value mine = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, copyTid, ci32(4 * tmaMaps));
  auto zero = scf::IfOp::create(b, loc, mine, /*withElseRegion=*/false);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(zero.thenBlock()->getTerminator());
    Value at = arith::AddIOp::create(b, loc, ci32(tmaRecords),
                                     arith::MulIOp::create(b, loc, copyTid, ci32(16)));
    zero16(b, loc, sharedAddress(at));
  }
  warpSync(b, loc);
}

LogicalResult MmaKernelBuilder::emitTmaCopy(tilegpu::AsyncCopyOp copy, const LoadPlan &p,
                                            Value stage) {
  Location loc = copy.getLoc();
  tilegpu::AsyncCopyArriveOp arrive = tilegpu::arrivalOf(copy);
  if (!arrive || !copyTid)
    return copy.emitOpError("is marked for TMA (tma_map) outside a producer's copies that "
                            "arrive on an mbarrier");
  int64_t map = copy->getAttrOfType<IntegerAttr>("tma_map").getInt();
  const Desc &d = descs[copy.getDesc()];
  Value row0 = scalars.lookup(copy.getOffsets()[0]);
  Value col0 = scalars.lookup(copy.getOffsets()[1]);
  auto cmp = [&](arith::CmpIPredicate pred, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, pred, x, y);
  };
  auto andi = [&](Value x, Value y) { return arith::AndIOp::create(b, loc, x, y); };
  auto eq = arith::CmpIPredicate::eq, ne = arith::CmpIPredicate::ne;
  Value origin = LLVM::PtrToIntOp::create(b, loc, b.getI64Type(),
                                          blockStart(loc, d, ci64(0), ci64(0)));
  Value rows = d.shape[0], cols = d.shape[1];
  Value strideBytes = arith::MulIOp::create(b, loc, d.strides[0], ci64(2));
  Value smid = NVVM::SmIdOp::create(b, loc, b.getI32Type());
  Value int32Max = ci64(INT32_MAX);
  OpBuilder::InsertionGuard guard(b);
  if (!tmaOnly) {
    // What TMA needs, checked at run time; a copy that fails it takes the cp.async path.
    Value ok = andi(cmp(eq, andi(origin, ci64(15)), ci64(0)),
                    cmp(eq, andi(strideBytes, ci64(15)), ci64(0)));
    ok = andi(ok, cmp(arith::CmpIPredicate::ult, smid, ci32(kTmaSms)));
    ok = andi(ok, andi(cmp(arith::CmpIPredicate::sle, rows, int32Max),
                       cmp(arith::CmpIPredicate::sle, cols, int32Max)));
    ok = andi(ok, andi(cmp(arith::CmpIPredicate::sgt, rows, ci64(0)),
                       cmp(arith::CmpIPredicate::sgt, cols, ci64(0))));
    auto split = scf::IfOp::create(b, loc, ok, /*withElseRegion=*/true);
    b.setInsertionPointToStart(split.elseBlock());
    issueBlock(loc, copy.getDesc(), p, row0, col0, stage);
    b.setInsertionPointToStart(split.thenBlock());
  }
  auto warp0 = scf::IfOp::create(b, loc, cmp(arith::CmpIPredicate::ult, copyTid, ci32(32)),
                                 /*withElseRegion=*/false);
  b.setInsertionPoint(warp0.thenBlock()->getTerminator());
  Value lane0 = cmp(eq, copyTid, ci32(0));
  Value rows32 = arith::TruncIOp::create(b, loc, b.getI32Type(), rows);
  Value cols32 = arith::TruncIOp::create(b, loc, b.getI32Type(), cols);
  // The record (64 bytes): the descriptor's origin it was made for (i64, at 0), the map's start,
  // rows and row stride (i64, at 8, 16, 24), columns, build count and the origin's head (i32,
  // at 32, 36, 40). Every lane of warp 0 stores the same values.
  int64_t record = tmaRecords + 64 * map;
  auto load = [&](Type t, int64_t at) -> Value {
    return LLVM::LoadOp::create(b, loc, t, barrierAddress(ci32(at)),
                                /*alignment=*/t.isInteger(64) ? 8 : 4);
  };
  auto store = [&](Value v, int64_t at) {
    LLVM::StoreOp::create(b, loc, v, barrierAddress(ci32(at)),
                          /*alignment=*/v.getType().isInteger(64) ? 8 : 4);
  };
  // The map has a third dimension, the descriptor's blocks of `rows` rows (a head of a [..,
  // heads, rows, cols] tensor). Where the descriptor's offset is a whole number of them, the
  // map starts at the tensor and the block is the copy's third coordinate: one map serves
  // every head (built once a kernel, where a map starting at each head's origin was rebuilt,
  // through a GPU-scope fence, at every tile of a persistent kernel); rows past the head's
  // end are still zero-filled. Otherwise the map starts at the origin (coordinate 0).
  // Worked out once a descriptor (a tile's head), the map rebuilt only if its start or its
  // shape changed.
  auto moved = scf::IfOp::create(b, loc, cmp(ne, load(b.getI64Type(), record), origin),
                                 /*withElseRegion=*/false);
  b.setInsertionPoint(moved.thenBlock()->getTerminator());
  // In 32 bits (the kernels' offsets are i32 in the tile IR; a larger one keeps a map at its
  // origin): an i64 division spilled the producer.
  Value headElems = arith::MulIOp::create(b, loc, rows, d.strides[0]);
  Value headBytes = arith::MulIOp::create(b, loc, strideBytes, rows);
  Value fits = andi(andi(cmp(arith::CmpIPredicate::sge, d.offset, ci64(0)),
                         cmp(arith::CmpIPredicate::sle, d.offset, int32Max)),
                    andi(cmp(arith::CmpIPredicate::sgt, headElems, ci64(0)),
                         cmp(arith::CmpIPredicate::sle, headElems, int32Max)));
  fits = andi(fits, cmp(arith::CmpIPredicate::slt, headBytes, ci64(int64_t(1) << 40)));
  Value offset32 = toI32(d.offset);
  Value head32 = arith::MaxUIOp::create(b, loc, toI32(headElems), ci32(1));
  Value heads = arith::DivUIOp::create(b, loc, offset32, head32);
  Value wholeHeads = andi(fits, cmp(eq, arith::MulIOp::create(b, loc, heads, head32), offset32));
  Value head = arith::SelectOp::create(b, loc, wholeHeads, heads, ci32(0));
  Value mapStart = arith::SelectOp::create(
      b, loc, wholeHeads, LLVM::PtrToIntOp::create(b, loc, b.getI64Type(), d.base), origin);
  // A map of one head (at its origin) still needs a valid third stride.
  Value headStride = arith::SelectOp::create(b, loc, wholeHeads, headBytes, ci64(16));
  Value kStart = load(b.getI64Type(), record + 8), kRows = load(b.getI64Type(), record + 16);
  Value kStride = load(b.getI64Type(), record + 24), kCols = load(b.getI32Type(), record + 32);
  Value kCount = load(b.getI32Type(), record + 36);
  Value changed = arith::OrIOp::create(
      b, loc, arith::OrIOp::create(b, loc, cmp(ne, kStart, mapStart), cmp(ne, kRows, rows)),
      arith::OrIOp::create(b, loc, cmp(ne, kStride, d.strides[0]), cmp(ne, kCols, cols32)));
  // Slot s of the map: its image in shared memory, its global place for this SM.
  auto image = [&](Value slot) {
    return arith::AddIOp::create(b, loc, ci32(tmaImages + 128 * tmaSlots * map),
                                 arith::MulIOp::create(b, loc, slot, ci32(128)));
  };
  auto global = [&](Value slot) -> Value {
    Value index = arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, smid, ci32(tmaMaps * tmaSlots)),
        arith::AddIOp::create(b, loc, ci32(map * tmaSlots), slot));
    Value bytes = arith::MulIOp::create(b, loc, toI64(index), ci64(128));
    Value base = LLVM::AddressOfOp::create(b, loc, tmaGlobal);
    return LLVM::GEPOp::create(b, loc, LLVM::LLVMPointerType::get(b.getContext(), 1), b.getI8Type(),
                               base, ValueRange{bytes});
  };
  auto build = scf::IfOp::create(b, loc, changed, /*withElseRegion=*/false);
  {
    OpBuilder::InsertionGuard inBuild(b);
    b.setInsertionPoint(build.thenBlock()->getTerminator());
    Value count = arith::AddIOp::create(b, loc, kCount, ci32(1));
    Value slot = arith::RemUIOp::create(b, loc, count, ci32(tmaSlots));
    Value img = image(slot);
    // No branch inside the warp from here to the publication: LLVM does not know inline PTX
    // is convergent and would give lane 0 a copy of its own of the `.sync.aligned` fence
    // (measured: the warp hung). Lanes zero the image 16 bytes each (lanes 8 apart the same
    // bytes), lane 0 writes the fields under a predicate, every lane stores the same record.
    Value at = arith::AddIOp::create(
        b, loc, img,
        arith::MulIOp::create(b, loc, arith::AndIOp::create(b, loc, copyTid, ci32(7)), ci32(16)));
    zero16(b, loc, sharedAddress(at));
    warpSync(b, loc);
    std::string r = "@p tensormap.replace.tile.";
    std::string on = ".shared::cta.b1024.b32 [$0], ";
    // Three dimensions (rank field 2: dimensions − 1): columns, rows, heads (as many as an
    // i32 counts: only real ones are asked for).
    std::string text =
        "{\n.reg .pred p;\nsetp.eq.u32 p, $5, 0;\n" + r +
        "global_address.shared::cta.b1024.b64 [$0], $1;\n" + r + "rank" + on + "2;\n" + r +
        "box_dim" + on + "0, 64;\n" + r + "box_dim" + on + "1, " + std::to_string(p.rows) + ";\n" +
        r + "box_dim" + on + "2, 1;\n" + r + "global_dim" + on + "0, $2;\n" + r + "global_dim" +
        on + "1, $3;\n" + r + "global_dim" + on + "2, 2147483647;\n" + r +
        "global_stride.shared::cta.b1024.b64 [$0], 0, $4;\n" + r +
        "global_stride.shared::cta.b1024.b64 [$0], 1, $6;\n" + r + "element_stride" + on +
        "0, 1;\n" + r + "element_stride" + on + "1, 1;\n" + r + "element_stride" + on + "2, 1;\n" +
        r + "elemtype" + on +
        std::to_string(elementTypeCode(copy.getBuffer().getType().getElementType())) + ";\n" + r +
        "interleave_layout" + on + "0;\n" + r + "swizzle_mode" + on + "3;\n" + r + "fill_mode" +
        on + "0;\n}";
    ptxStatement(b, loc, text,
                 {sharedAddress(img), mapStart, cols32, rows32, strideBytes, copyTid, headStride},
                 "r,l,r,r,l,r,l");
    warpSync(b, loc);
    Value where = global(slot);
    ptxStatement(b, loc,
                 "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu."
                 "sync.aligned [$0], [$1], 128;",
                 {where, sharedAddress(img)}, "l,r");
    ptxStatement(b, loc, "fence.proxy.tensormap::generic.acquire.gpu [$0], 128;", {where}, "l");
    store(mapStart, record + 8);
    store(rows, record + 16);
    store(d.strides[0], record + 24);
    store(cols32, record + 32);
    store(count, record + 36);
  }
  store(origin, record);
  store(head, record + 40);
  warpSync(b, loc);
  b.setInsertionPointAfter(moved);
  Value slot = arith::RemUIOp::create(b, loc, load(b.getI32Type(), record + 36), ci32(tmaSlots));
  Value z = load(b.getI32Type(), record + 40);
  Value where = global(slot);
  auto issue = scf::IfOp::create(b, loc, lane0, /*withElseRegion=*/false);
  b.setInsertionPoint(issue.thenBlock()->getTerminator());
  Value full = sharedAddress(bufferBytes(arrive.getBarriers(), arrive.getStage()));
  ptxStatement(b, loc, "mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [$0], $1;",
               {full, ci32(p.rows * p.cols * 2)}, "r,r");
  Value start = arith::AddIOp::create(b, loc, ci32(p.smemOffset), stage ? stage : ci32(0));
  Value y = toI32(row0);
  for (int64_t slab = 0; slab < p.cols / 64; ++slab) {
    Value dst = arith::AddIOp::create(b, loc, start, ci32(slab * p.rows * 128));
    Value x = arith::AddIOp::create(b, loc, toI32(col0), ci32(slab * 64));
    ptxStatement(b, loc,
                 "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::"
                 "bytes [$0], [$1, {$2, $3, $4}], [$5];",
                 {sharedAddress(dst), where, x, y, z, full}, "r,l,r,r,r,r");
  }
  return success();
}

} // namespace tessel::mma
