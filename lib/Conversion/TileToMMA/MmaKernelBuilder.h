//===- MmaKernelBuilder.h - convert-tile-to-mma's kernel builder --------------------*- C++ -*-===//
//
// Private to lib/Conversion/TileToMMA. MmaKernelBuilder turns one tile program of the attention
// class into a gpu.func: tiles in registers in the mma.sync accumulator layout, loads through
// swizzled shared memory (cp.async, ldmatrix), dots as mma.sync (sm_80) or wgmma.mma_async
// (sm_90a). This header declares the class and the types and helpers its parts share; the
// definitions are in the files named after what they emit:
//   ConvertTileToMMA.cpp  the pass; the builder's entry, op dispatch and scalar helpers
//   Planning.cpp          plan: the class check, load roles, shared-memory slots and stages
//   Registers.cpp         register layouts: materialize (on-demand index and element-wise tiles)
//   SharedLoads.cpp       cp.async into swizzled shared memory, ldmatrix addresses
//   VectorLoads.cpp       1-D loads (row and column vectors) and gathers from global memory
//                         into registers
//   SharedMemoryOps.cpp   the tilegpu memory ops: alloc, async_copy/commit/wait, fences and
//                         barriers, local_load
//   MmaSync.cpp           A fragments and dots as mma.sync.m16n8k16
//   Wgmma.cpp             dots, tilegpu.wgmma and tilegpu.wgmma_wait as wgmma.mma_async, the
//                         inline-PTX helpers for values in flight
//   Softmax.cpp           row reductions (quad shuffles) and the single-FFMA scaled scores
//   Loops.cpp             scf.for, and the stores
//   BulkReduce.cpp        tilegpu.bulk_add: atomic adds through shared memory and
//                         cp.reduce.async.bulk
//   WarpRoles.cpp         tilegpu.warp_specialize (consumers and a producer) and mbarriers
// docs/dev/codegen-mma.md and docs/dev/codegen-wgmma.md explain the choices.
//
//===------------------------------------------------------------------------------------------===//

#ifndef TESSEL_LIB_CONVERSION_TILETOMMA_MMAKERNELBUILDER_H
#define TESSEL_LIB_CONVERSION_TILETOMMA_MMAKERNELBUILDER_H

#include "tessel/Conversion/KernelWalker.h"

#include "tile/IR/TileDialect.h"
#include "tilegpu/Transforms/MmaClass.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <utility>

namespace mlir::func {
class FuncOp;
} // namespace mlir::func

namespace tessel::mma {

// The builder's parts are written against MLIR's names, as the rest of lib/Conversion is (with
// `using namespace mlir` in its .cpp files); inside this private namespace only.
using namespace mlir;

/// How a tile value is spread over the registers of the CTA (docs/dev/codegen-mma.md, Layouts).
/// Acc: [BM, N], regs[(n/8)*4 + r]; Row: [BM] or [BM, 1], regs[h]; Col: [N] or [1, N],
/// regs[(n/8)*2 + c].
enum class Layout { Acc = 0, Row = 1, Col = 2 };

/// A descriptor after lowering, all i64.
using Desc = tessel::conversion::LoweredDesc;

/// Where a block lives in shared memory and its shape (bufferPlan: from the tilegpu.alloc of
/// its buffer), in the slot type of the tilegpu level's plan (tilegpu/Transforms/MmaClass.h).
using LoadPlan = tessel::tilegpu::LoadSlot;

/// Where a dot operand read by tilegpu.local_load lives: its buffer's place and the byte offset
/// (i32) of the stage it reads, null for stage 0.
struct SharedView {
  LoadPlan plan;
  Value stage;
  /// An A block read transposed (wgmma: an MN-major descriptor, the Kᵀ of dQᵀ = Kᵀ·dSᵀ).
  bool transposed = false;
};

/// Whether `t` is a tile (a ranked tensor).
bool isTensor(Type t);
/// A [BM, N] tile that is a [BM, 1] column broadcast along the rows.
bool isRowBroadcast(Value v);
/// A [M, N] tile that is a [1, N] row vector broadcast down the rows (a value per column).
bool isColBroadcast(Value v);
/// The value of an integer constant, INT64_MIN when `v` is not one.
int64_t constantOf(Value v);
/// A number `v` is known to be a multiple of (a constant, or a product with one: `n · BLOCK`);
/// 1 when nothing is known, INT64_MAX for 0.
int64_t knownMultipleOf(Value v);

/// Inline PTX `text` with results of `types` ("=f" for f32, "=h" for i16, "=r" otherwise),
/// each tied to the operand of the same position in `tied` when `tied` is given (the
/// statement reads and writes it in place), then `inputs` read with `inputConstraints`.
SmallVector<Value> asmResults(OpBuilder &b, Location loc, StringRef text, TypeRange types,
                              ValueRange tied, ValueRange inputs,
                              ArrayRef<StringRef> inputConstraints);
/// Inline PTX `text` that reads and writes `tied` in place and reads `inputs`; the new values
/// of `tied`. Values read by an asynchronous wgmma go through such statements so that LLVM
/// cannot move an ordinary read or write of them across the fence or the wait.
SmallVector<Value> tiedAsm(OpBuilder &b, Location loc, StringRef text, ValueRange tied,
                           ValueRange inputs, ArrayRef<StringRef> inputConstraints);
/// Whether `v` is a splat 0.0 tile constant (a dot's accumulator that wgmma need not read).
bool isZeroTile(Value v);
/// Whether `op` is a dot whose result is ready right after it: a tile.dot (mma.sync), or a
/// tilegpu.wgmma waited for by the next op with pending 0 (tilegpu-async-dots{eager}).
bool isSynchronousDot(Operation *op);

/// Elements of the descriptor `d` in a 16-byte chunk: 8 of f16/bf16, 16 of FP8 (bytes in
/// memory). Shared-memory plans count columns of 16 bits (LoadSlot), whatever the element.
inline int64_t chunkElements(const Desc &d) {
  return 128 / static_cast<int64_t>(d.elementType.getIntOrFloatBitWidth());
}

/// SMs the global slots of tilegpu-tma-producer's maps cover (a copy on an SM past them takes
/// cp.async).
constexpr int64_t kTmaSms = 256;

/// Inline PTX without results that orders memory around it.
void ptxStatement(OpBuilder &b, Location loc, StringRef text, ValueRange operands,
                  StringRef constraints);

class MmaKernelBuilder : public tessel::conversion::KernelWalker {
public:
  MmaKernelBuilder(gpu::GPUFuncOp kernel, LLVM::GlobalOp smem)
      : KernelWalker(kernel), smemGlobal(smem) {}

  /// Takes the plan of `program`, whose tiles carry their tilegpu layouts and whose loads are
  /// placed (tilegpu.alloc): the block size, the instruction family and the shared memory.
  LogicalResult plan(func::FuncOp program);
  LogicalResult build(func::FuncOp program) { return walk(program); }
  /// Whether 16-bit accumulator tiles are stored 16 bytes a thread after a quad transpose
  /// (convert-tile-to-mma vector-stores; Loops.cpp storeQuadVectors).
  bool vectorStores = true;
  /// TMA copies without the run-time check and the cp.async copy beside them (tma-only; the
  /// launcher guarantees what TMA needs: TmaCopies.cpp).
  bool tmaOnly = false;
  /// Dots whose B block is read along its columns take k steps only over the columns the
  /// block's copies fill (convert-tile-to-mma trim-zero-columns; columnReach).
  bool trimZeroColumns = false;
  /// Dots whose B block is read as stored compute only the output columns its copies fill
  /// (convert-tile-to-mma trim-output-columns; dotNColumns): wgmma's N (mma.sync keeps its n
  /// tiles, MmaSync.cpp says why).
  bool trimOutputColumns = false;

  /// The threads the layouts count: the consumers when the kernel is warp-specialized.
  int64_t numThreads() const { return numWarps * 32; }
  /// The CTA's threads: numThreads() and the producer's warps, if any.
  int64_t blockThreads() const { return numThreads() + producerThreads; }
  /// A warp-specialized kernel's registers a thread at launch (`.maxnreg`), what setmaxnreg
  /// then moves between the roles; 0 otherwise (ptxas chooses).
  int64_t launchRegisters() const { return launchRegs; }
  bool usesWgmma() const { return wgmma; }
  int64_t sharedBytes() const { return smemBytes; }

private:
  /// Thread coordinates and the shared-memory base, at the kernel's entry.
  void emitPrologue(Location loc) override;
  LogicalResult emitOp(Operation *op) override;
  /// One of the tilegpu memory ops (isSharedMemoryOp), in SharedMemoryOps.cpp.
  LogicalResult emitSharedMemoryOp(Operation *op);
  static bool isSharedMemoryOp(Operation *op);
  /// The buffer `buffer` (a tilegpu.alloc, or a loop-carried buffer that starts as one) as a
  /// plan: the place of that alloc, rows and columns.
  FailureOr<LoadPlan> bufferPlan(Value buffer, Operation *user);
  /// With trimZeroColumns: for each buffer whose every writer is an async copy from a
  /// descriptor of constant columns at a constant column offset, the columns (elements) those
  /// copies can fill; the rest of its rows are zeros (the copies zero-fill outside the
  /// descriptor). Buffers written otherwise are left out.
  void planColumnReach(func::FuncOp program);
  /// The k steps of `perStep` of a dot summing over K on B block `buffer`: ceil(K / perStep),
  /// fewer where the sum runs along the block's columns (`alongColumns`: S = Q·Kᵀ's K block)
  /// and columnReach says its last columns are zero.
  int64_t dotKSteps(Value buffer, bool alongColumns, int64_t K, int64_t perStep);
  /// The output columns, in whole units of `unit`, a dot of N columns computes on B block
  /// `buffer` read as stored: N, fewer with trimOutputColumns where columnReach says the
  /// block's last columns are zero (they add nothing to the accumulator's columns there).
  int64_t dotNColumns(Value buffer, int64_t N, int64_t unit);
  llvm::DenseMap<Operation *, int64_t> columnReach;
  /// Bytes of stage `stage` (an i32 of the program) of `buffer`: null for a constant 0.
  Value stageBytes(Value buffer, Value stage);
  /// The byte offset (i32) of stage `stage` of `buffer` in the kernel's shared memory.
  Value bufferBytes(Value buffer, Value stage);
  /// The B operand of `op` in shared memory, a tilegpu.local_load, and whether it is the
  /// transpose of the stored block.
  FailureOr<std::pair<SharedView, bool>> dotB(Value bOperand, Operation *op);
  /// tilegpu.local_store: each thread's pairs of accumulator-layout columns, one st.shared
  /// of 32 bits each, at their swizzled places in the buffer.
  LogicalResult emitLocalStore(tilegpu::LocalStoreOp op);
  /// Element (r0 + row, c0 + col) of the descriptor `d` (r0, c0 i64; row, col i32): whether it
  /// is inside (with `width` elements from it along the row), and its element offset. With a
  /// null `col`, the row alone (1-D).
  std::pair<Value, Value> elementAt(Location loc, const Desc &d, Value r0, Value c0, Value row,
                                    Value col, int64_t width);
  /// The global address of element (r0, c0) (i64) of the descriptor `d`.
  Value blockStart(Location loc, const Desc &d, Value r0, Value c0);
  /// Adds the accumulator-layout registers `regs` of a 2-D tile of `type` to the block of
  /// `desc` at `offsets`, element by element (atomics; unchecked when the whole tile is in
  /// bounds, a uniform branch).
  void atomicAddTile(Location loc, Value desc, ValueRange offsets, RankedTensorType type,
                     ArrayRef<Value> regs);
  /// tilegpu.bulk_add: the tile staged in shared memory in runs, each added to global memory
  /// by cp.reduce.async.bulk (BulkReduce.cpp).
  LogicalResult emitBulkAdd(tilegpu::BulkAddOp op);
  /// Before the kernel returns: waits for the bulk reductions still reading shared memory.
  void emitEpilogue(Location loc) override;
  /// tile.store, or tile.atomic_add (element by element: llvm.atomicrmw, a RED in SASS).
  template <typename WriteOp>
  LogicalResult emitStore(WriteOp op);
  /// The 16-bit accumulator tile `regs` (2-D, `slabs` 8-column slabs, a multiple of 4) stored
  /// 16 bytes a thread at (r0, c0) of `d`: per row and group of four slabs, the quad's 4×4
  /// transpose of its 32-bit pairs (two butterfly stages of shuffles), then one vector store
  /// of eight consecutive columns per thread.
  void storeQuadVectors(Location loc, const Desc &d, Value r0, Value c0, Type elem, int64_t slabs,
                        ArrayRef<Value> regs);
  /// A row or column vector (a 1-D tile.load in a slice layout) read into registers.
  LogicalResult emitVectorLoad(tile::LoadOp op);
  /// The `n` registers of a tile.gather in `layout`: one global read per register.
  FailureOr<SmallVector<Value>> gatherRegisters(tile::GatherOp op, Layout layout, int64_t n);
  LogicalResult emitMma(tilegpu::MmaOp op);
  /// The k steps of one warpgroup dot as wgmma.mma_async (no fence, commit or wait): A as b32
  /// registers, four per k step; `acc` the accumulator registers tied through the chain, or
  /// empty for a fresh one (the first step does not read it); B the block of plan `p` at
  /// `offset` bytes (i32); with `aView`, A is not in registers (`a` empty) but the block of
  /// that view in shared memory (its stage of a loop's ring, or its own slot). Returns the
  /// accumulator, in flight until a wait re-defines it.
  SmallVector<Value> wgmmaChain(ArrayRef<Value> a, ArrayRef<Value> acc, Value offset,
                                const LoadPlan &p, bool transposed, int64_t n, int64_t kSteps,
                                const SharedView *aView = nullptr);
  /// The shared-memory matrix descriptor (i64) of k step 0 of a block at `offset` bytes (i32)
  /// with plan `p`, K-major (`kMajor`: K of Q·Kᵀ, an A block) or N-major (V of P·V); and the
  /// descriptor's increment for k step `kt`.
  Value wgmmaDescriptor(Value offset, const LoadPlan &p, bool kMajor);
  int64_t wgmmaDescriptorStep(const LoadPlan &p, bool kMajor, int64_t kt);
  /// tilegpu.wgmma: the chain of k steps and its commit group; the registers it reads that
  /// ordinary instructions wrote are fenced once for a run of consecutive wgmmas.
  LogicalResult emitWgmma(tilegpu::WgmmaOp op);
  /// tilegpu.wgmma_wait: wait_group with the values in flight tied through it.
  LogicalResult emitWgmmaWait(tilegpu::WgmmaWaitOp op);
  /// The b32 registers of an A operand of wgmma: read once from shared memory (Q), carried by
  /// a loop, a zero constant, or the P re-pack of an accumulator tile.
  FailureOr<SmallVector<Value>> wgmmaA(Value a, Operation *user);
  /// The A fragments of the dot `user`'s operand `a`, `K` columns wide,
  /// a[(mt·K/16 + kt)·4 + i], when they are in registers (a loaded block read once, or a
  /// register tile packed pairwise); empty when they are read from shared memory at every k
  /// step.
  FailureOr<SmallVector<Value>> aFragmentsOf(Value a, int64_t K, Operation *user);
  /// Orders the landed cp.async (generic proxy) writes before wgmma's (async proxy) reads.
  void fenceSharedForAsyncProxy(Location loc);
  LogicalResult emitReduce(tile::ReduceOp op);
  LogicalResult emitFor(scf::ForOp op);
  /// scf.if on a scalar condition whose results are register tiles (Acc or Row) or scalars,
  /// each branch emitted in its own scope (tilegpu-skip-masked-warpgroups' branch).
  LogicalResult emitIf(scf::IfOp op);
  /// tilegpu.warp_specialize: the consumers' region for tid < numThreads(), the producer's for
  /// the warps after them (WarpRoles.cpp).
  LogicalResult emitWarpSpecialize(tilegpu::WarpSpecializeOp op);
  /// The mbarrier ops (init, arrive, async_copy_arrive, wait), in WarpRoles.cpp.
  LogicalResult emitMbarrierOp(Operation *op);
  /// tilegpu.turn_start / turn_wait / turn_pass: named barriers 2 and 3 between the two
  /// consumer warpgroups (WarpRoles.cpp).
  LogicalResult emitTurn(Operation *op);
  static bool isMbarrierOp(Operation *op);
  /// The shared address of an mbarrier `bytes` (i32) into the kernel's shared memory.
  Value barrierAddress(Value bytes);
  /// The same as an i32 of the shared window, what inline PTX takes.
  Value sharedAddress(Value bytes);
  /// A copy tilegpu-tma-producer marked (`tma_map`): one cp.async.bulk.tensor per 64-column
  /// slab from the producer's first thread, its map built first where the descriptor changed,
  /// or issueBlock's cp.async where the descriptor fails TMA's rules (TmaCopies.cpp).
  LogicalResult emitTmaCopy(tilegpu::AsyncCopyOp copy, const LoadPlan &p, Value stage);
  /// At the producer's entry: the maps' records zeroed (no map built yet).
  void emitTmaSetup(Location loc);
  /// A barrier of the threads that run this code: the CTA's, or the consumers' named barrier
  /// inside a warp-specialized kernel's consumer region.
  void emitBarrier(Location loc);
  /// The threads that deal a block's copies among them, and this thread's index among them:
  /// the CTA's (or its consumers': tilegpu::copyingThreads of them), or the producer's inside
  /// its region.
  int64_t copyThreadCount() const {
    return copyThreads ? copyThreads : tessel::tilegpu::copyingThreads(numThreads());
  }
  Value copyThreadIndex() const { return copyTid ? copyTid : tid; }

  /// A tile of scaled scores `x = S·c` or `x = select(mask, S·c, -inf)` with `c` a splat scalar
  /// (tile-optimize's scale·log2e) and `product` the S·c tile.
  struct ScaledScores {
    Value scores, scale, mask, product;
    /// The select(mask, S·c, -inf) matched, if any.
    Value selected;
  };
  std::optional<ScaledScores> matchScaledScores(Value x);
  /// The single-FFMA softmax (docs/dev/codegen-mma.md): for a match whose S is a register tile
  /// used only by S·c, replaces S's registers by T = (0 < c < inf) ? S : S·c (a uniform branch
  /// that does nothing on the fast side) and records k = (0 < c < inf) ? c : 1, so that
  /// S·c = T·k exactly on both sides; the row max is k·max(T) and exp2(S·c - m) is
  /// ex2(fma(T, k, -m)). Returns the match once that is in place.
  std::optional<ScaledScores> prepareScaled(Value x);
  /// T, or select(mask, T, -inf), per register of the Acc layout. A mask `inner | splat(c)`
  /// (tilegpu-fuse-masked-loops) is computed only where the uniform `c` is false.
  FailureOr<SmallVector<Value>> maskedScores(const ScaledScores &m, Operation *user);
  /// The row reduction of Acc registers `in` of a tile of `slabs` 8-column slabs: the thread's
  /// registers of each row, then two quad shuffles.
  SmallVector<Value> reduceRows(ArrayRef<Value> in, int64_t slabs,
                                function_ref<Value(Value, Value)> combine);

  /// The registers of tile `v` in `layout`, computing index/element-wise tiles on demand.
  FailureOr<SmallVector<Value>> materialize(Value v, Layout layout, Operation *user);
  FailureOr<int64_t> regCount(RankedTensorType type, Layout layout, Operation *user);

  /// Issues cp.async for the block of descriptor `desc` (of the program) at (`row0`, `col0`)
  /// into the place of `p`, `stage` bytes (i32, or null) further.
  void issueBlock(Location loc, Value desc, const LoadPlan &p, Value row0, Value col0, Value stage);
  void issueBlockChunks(Location loc, Value desc, const LoadPlan &p, Value row0, Value col0,
                        Value stage);
  /// issueBlock for a block kept transposed in shared memory (tilegpu.transposed: an FP8 B
  /// block read as stored): loaded through the registers, transposed by byte permutes, stored
  /// row by row of the buffer, fenced for the async proxy (SharedLoads.cpp).
  void issueTransposedBlock(Location loc, Value desc, const LoadPlan &p, Value row0, Value col0,
                            Value stage);
  /// The 16-byte cp.async copies of a block (issueBlock's, where they may be used): plain ones
  /// when the block is inside the tensor, else zero-filling ones per chunk (`wholeChunks`:
  /// a chunk is known to be wholly inside a row or wholly outside).
  void emitChunks(Location loc, const Desc &d, const LoadPlan &p, Value r0, Value c0, Value rowT,
                  Value chunk, int64_t steps, int64_t rowsPerStep, bool wholeChunks,
                  llvm::function_ref<Value(int64_t)> dstAt,
                  llvm::function_ref<Value(int64_t)> srcAt);
  /// The thread's chunk of a block row: its first column (i64), whether it lies in the row and
  /// the bytes a cp.async copies (16, or with `wholeChunks` false those inside the row).
  struct ChunkColumns {
    Value column, inside, bytes;
  };
  ChunkColumns chunkColumns(Location loc, const Desc &d, Value c0, Value chunk, bool wholeChunks);
  /// issueBlock's copies of a block of a paged descriptor: each row looked up in the page
  /// table, every chunk checked and zero-filled outside.
  void issuePagedChunks(Location loc, const Desc &d, Value r0, Value c0, Value rowT, Value chunk,
                        int64_t steps, int64_t rowsPerStep,
                        llvm::function_ref<Value(int64_t)> dstAt);
  /// Whether `desc` can be copied in 16-byte chunks (inner stride 1, a constant row stride
  /// of a multiple of 8 elements); the reason at `op` when it cannot.
  LogicalResult checkChunked(Operation *op, Value desc);
  /// The A fragments of a block at `p` (outside loops): kept in registers within a budget of
  /// 32 a thread for all such blocks, else recorded for the dots to read from shared memory;
  /// under `result`. `stage`: the bytes of its stage (i32) when not the first, or null.
  void takeAFragments(Value result, const LoadPlan &p, Value stage = Value());
  /// Byte offset of the already swizzled 16-byte chunk `swizzled` of row `row` of a tile of
  /// `cols` 16-bit columns at `base` (+ `stage`, the ring slot's offset, when given). With
  /// `slabBytes` (wgmma, d128: see slabBytes) chunks 8 and up are in the second slab.
  Value swizzledOffset(int64_t base, int64_t cols, Value row, Value swizzled, Value stage,
                       int64_t slabBytes = 0);
  /// The shared-memory address of the 16-byte chunk `chunk` of row `row` of a tile of `cols`
  /// 16-bit columns at `base` bytes (XOR swizzle of the chunk with row % 8; rows of 64 or 32
  /// bytes take the swizzle of their width, tilegpu::swizzleBytes: address bits 7 and up into
  /// the chunk's, as wgmma reads them).
  Value smemChunk(int64_t base, int64_t cols, Value row, Value chunk, Value stage = {},
                  int64_t slabBytes = 0);
  /// The byte offset (i32) of the ldmatrix row address of this lane inside a tile of `cols`
  /// 16-bit columns: matrix row `row8 + lane%8` (row8 = 0 or 8), chunk `chunkLo` (0 or 1) XOR
  /// the swizzle. Other k/n steps of the same lane are this offset XOR 32·step (chunk + 2·step)
  /// plus a constant row offset: see chunkStep and ldmatrixAt. It depends on the lane alone, so
  /// Q and V (the same matrix order) share it, and the tile's place (slot, stage, warp rows) is
  /// added after.
  Value ldmatrixLaneOffset(int64_t cols, Value row8, Value chunkLo);
  /// Bytes between two rows of a tile of `cols` 16-bit columns: the whole row (mma.sync), or
  /// one 128-byte slab row (wgmma: a [rows, 128] tile is two [rows, 64] slabs; 32- and 16-column
  /// tiles have rows of 64 and 32 bytes, tilegpu::swizzleBytes).
  int64_t rowBytes(int64_t cols) const {
    return wgmma ? std::min<int64_t>(cols * 2, 128) : cols * 2;
  }
  /// Bytes between the two 64-column slabs of the tile `p` (wgmma, 128 columns), else 0.
  int64_t slabBytes(const LoadPlan &p) const { return wgmma && p.cols > 64 ? p.rows * 128 : 0; }
  /// 16-column step `step` of a lane's ldmatrix address relative to step 0: {XOR, add} bytes.
  /// Chunk 2·step lies at XOR 32·step inside a 128-byte slab row; past 64 columns (wgmma), in
  /// the next slab.
  std::pair<int64_t, int64_t> chunkStep(const LoadPlan &p, int64_t step) const;
  /// ldmatrix.x4 at `laneOffset` XOR `xorBytes`, plus `tileBytes` (where the tile starts, a
  /// multiple of the row bytes and of 128, uniform across the warp), plus `addBytes` (a whole
  /// number of 8-row groups, folded into the instruction's immediate offset).
  Value ldmatrixAt(Value laneOffset, int64_t xorBytes, Value tileBytes, int64_t addBytes,
                   bool transpose);
  Value ldmatrix4(Value addr, bool transpose);
  /// The A fragments (4 registers) of m tile `mt`, k step `kt` of a block in shared memory
  /// (`stage`: the bytes of its ring stage, i32, or null).
  SmallVector<Value> loadAFragments(const LoadPlan &p, int64_t mt, int64_t kt,
                                    Value stage = Value());
  /// Acc register `i` of a tile of `slabs` 8-column slabs: its Row and Col register.
  int64_t accRow(int64_t i, int64_t slabs) const { return i / (slabs * 4) * 2 + (i % 4) / 2; }
  int64_t accCol(int64_t i, int64_t slabs) const { return (i / 4) % slabs * 2 + i % 2; }
  Value packPair(Value lo, Value hi);
  /// Elements of the K axis an instruction consumes: 16 of 16-bit operands (32 bytes of a row),
  /// 32 of FP8 (wgmma's k32: the same 32 bytes).
  int64_t kPerStep() const { return 256 / operandType.getIntOrFloatBitWidth(); }
  /// The A fragments of one k step of FP8 P from its f32 accumulator registers `acc` (the
  /// accumulator layout of four adjacent 8-column slabs): cvt to e4m3 pairs and a quad shuffle
  /// into wgmma's k32 A layout (MmaSync.cpp).
  SmallVector<Value> fp8Fragments(ArrayRef<Value> acc);
  Value fragmentOf(Value i32reg);

  Value toI64(Value v);
  Value toI32(Value v);

  LLVM::GlobalOp smemGlobal;

  // The class: query rows, element type of the operands.
  int64_t blockM = 0;
  int64_t numWarps = 0;
  /// sm_90a wgmma dots (16 rows per warp, 128-byte-swizzled slabs in shared memory).
  bool wgmma = false;
  /// Query rows per warp (16 or 32) and m16 row tiles per warp (1 or 2).
  int64_t warpRows = 16, mTiles = 1;
  Type operandType;
  int64_t smemBytes = 0;
  /// Warp specialization: the producer's threads (0: none); while its region is lowered, the
  /// thread's index among them and their count; while the consumers' is, whether barriers are
  /// the consumers' named barrier.
  int64_t producerThreads = 0, launchRegs = 0;
  Value copyTid;
  int64_t copyThreads = 0;
  bool consumerBarriers = false;
  /// Whether the consumers' dots are overlapped with their softmax (tilegpu-overlap-consumers).
  bool overlappedConsumers = false;
  /// tilegpu-tma-producer's plan (`tilegpu.tma`): maps, slots a map, the byte offsets of the
  /// records and images in shared memory; and the global array of the maps' slots (by SM).
  int64_t tmaMaps = 0, tmaSlots = 0, tmaRecords = 0, tmaImages = 0;
  LLVM::GlobalOp tmaGlobal;
  /// Whether the kernel issues bulk reductions (tilegpu.bulk_add), which it waits for before
  /// it exits.
  bool bulkReductions = false;
  /// Dot operands in shared memory, by tilegpu.local_load result.
  DenseMap<Value, SharedView> views;
  /// The scf.if of the last predicated async_copy emitted and its predicate: the copies of one
  /// group that follow it with the same predicate go into it (one branch per group).
  scf::IfOp copyGuard;
  Value copyGuardPredicate;

  // Thread coordinates (i32) and the shared-memory base.
  Value tid, lane, laneRow, quadCol2, rowBase, smemBase;
  /// The query rows of the thread's Row registers ([mt·2 + h] = row of (m tile, half)) and the
  /// first of the thread's two columns of every 8-column slab: computed where they are used,
  /// from the current thread index (see emitFor), not kept from the kernel's entry.
  SmallVector<Value> rowIndices();
  Value quadColumn();
  /// The same, computed at the kernel's entry: what the epilogue's stores use (measured: the
  /// register allocation of the loops is better with these than with ones from the last loop).
  SmallVector<Value, 4> entryRows;

  DenseMap<Value, std::pair<Layout, SmallVector<Value>>> eager;
  /// A operands in registers: read once from shared memory (Q when it fits), by local_load
  /// result; and (wgmma, b32) carried by a loop or tied by a wait, by value.
  DenseMap<Value, SmallVector<Value>> aFragments;
  /// The fenced A and accumulator registers of each tilegpu.wgmma, from the first wgmma of its
  /// run (which fences them all) to the wait that names its result (which ties its A).
  DenseMap<Operation *, std::pair<SmallVector<Value>, SmallVector<Value>>> wgmmaInputs;
  /// A operands read from shared memory by every dot (those past the register budget of
  /// takeAFragments, and the A blocks a loop streams): at every k step (mma.sync) or through
  /// a descriptor (wgmma).
  DenseMap<Value, SharedView> aShared;
  /// Registers a thread holds for the A blocks kept in registers so far; the number of A
  /// blocks the program loads (plan).
  int64_t residentARegs = 0, aBlocks = 0;
  SmallVector<DenseMap<std::pair<Value, int>, SmallVector<Value>>> lazy;
  /// S·c tiles of the single-FFMA softmax whose S registers hold T: S·c = T·k, by S·c.
  DenseMap<Value, Value> scaleFactor;
};

} // namespace tessel::mma

#endif // TESSEL_LIB_CONVERSION_TILETOMMA_MMAKERNELBUILDER_H
