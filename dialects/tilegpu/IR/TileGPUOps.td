//===- TileGPUOps.td - the ops of the GPU level ------------*- tablegen -*-===//
//
// Data movement (global → shared → registers), layout conversion, tensor-core ops, and the
// warp roles of a warp-specialized kernel with the mbarriers between them. CTA barriers are
// upstream `gpu.barrier`.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_TILEGPU_OPS_TD
#define TESSEL_TILEGPU_OPS_TD

include "TileGPUDialect.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class TileGPU_Op<string mnemonic, list<Trait> traits = []>
    : Op<TileGPU_Dialect, mnemonic, traits>;

// tile's descriptor type, by C++ class (including tile's .td would emit its enums here too).
def TileGPU_Desc : Type<CPred<"::llvm::isa<::tessel::tile::DescType>($_self)">,
                        "a tile descriptor", "::tessel::tile::DescType">;
def TileGPU_Tile : StaticShapeTensorOf<[F16, BF16, F8E4M3FN, F32, I32, I1]>;
def TileGPU_OperandTile : StaticShapeTensorOf<[F16, BF16, F8E4M3FN]>;
def TileGPU_AccTile : StaticShapeTensorOf<[F32]>;
def TileGPU_WaitedTile : AnyTypeOf<[TileGPU_AccTile, TileGPU_OperandTile]>;

def TileGPU_AllocOp : TileGPU_Op<"alloc", [MemoryEffects<[MemAlloc]>]> {
  let summary = "A shared-memory buffer; `offset` is its place in the CTA's shared memory.";
  let description = [{
    Layout assignment leaves `offset` out; `tilegpu-allocate-shared` fills it in (bytes from
    the start of the kernel's shared memory). Two buffers may share bytes when their lives do
    not overlap; the allocation pass decides. `stride` is the distance in bytes from one stage
    to the next (default: one stage's bytes): buffers of one ring interleave their stages, so
    that stage s of every buffer of the ring is one contiguous block.

    ```mlir
    %k = tilegpu.alloc {offset = 16384 : i64, stride = 32768 : i64} : !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128>
    ```
  }];
  let arguments = (ins OptionalAttr<I64Attr>:$offset, OptionalAttr<I64Attr>:$stride);
  let extraClassDeclaration = [{
    /// Bytes from one stage of the buffer to the next.
    int64_t getStageStride() {
      return getStride().value_or(getResult().getType().getStageBytes());
    }
  }];
  let results = (outs TileGPU_SharedBufferType:$result);
  let assemblyFormat = "attr-dict `:` qualified(type($result))";
  let hasVerifier = 1;
}

def TileGPU_AsyncCopyOp : TileGPU_Op<"async_copy", [MemoryEffects<[MemRead, MemWrite]>,
                                                    AttrSizedOperandSegments]> {
  let summary = "Copy a block from global to shared memory without the registers (cp.async).";
  let description = [{
    Starts copying the block of the descriptor at `offsets` (element offsets per dim, as for
    `tile.load`) into stage `stage` of `buffer`, in 16-byte chunks
    (`cp.async.cg.shared.global`, PTX ISA 9.7.9.25.3). Elements outside the descriptor's shape
    are filled with zeros (the chunk's source size is cut to what is in bounds). The copy is
    in flight until a `tilegpu.async_wait` covers the commit group that holds its token. With
    `if %pred` (uniform across the CTA) nothing is copied when it is false — the copies of an
    iteration past the loop's end, which software pipelining would otherwise issue — and the
    token is still valid to commit and wait for.

    ```mlir
    %t = tilegpu.async_copy %kd[%j, %c0] into %k[%stage] if %more : !tile.desc<2, f16> -> !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128>
    ```
  }];
  let arguments = (ins TileGPU_Desc:$desc, Variadic<I32>:$offsets,
                       TileGPU_SharedBufferType:$buffer, I32:$stage, Optional<I1>:$predicate);
  let results = (outs TileGPU_AsyncTokenType:$token);
  let assemblyFormat = [{
    $desc `[` $offsets `]` `into` $buffer `[` $stage `]` (`if` $predicate^)? attr-dict `:` qualified(type($desc)) `->` qualified(type($buffer))
  }];
  let hasVerifier = 1;
}

def TileGPU_AsyncCommitOp : TileGPU_Op<"async_commit"> {
  let summary = "Close a group of async copies (cp.async.commit_group).";
  let description = [{
    The copies named by `tokens` (and, as in PTX, every copy this thread issued since the last
    commit) form one group; its token is what `tilegpu.async_wait` waits for.

    ```mlir
    %g = tilegpu.async_commit %t0, %t1
    ```
  }];
  let arguments = (ins Variadic<TileGPU_AsyncTokenType>:$tokens);
  let results = (outs TileGPU_AsyncTokenType:$group);
  let assemblyFormat = "$tokens attr-dict";
}

def TileGPU_AsyncWaitOp : TileGPU_Op<"async_wait"> {
  let summary = "Wait until at most `pending` commit groups are in flight (cp.async.wait_group).";
  let description = [{
    After the wait, the groups named by `groups` have landed in this thread's view; a barrier
    (`gpu.barrier`) makes them visible to the other threads. `pending` is the number of younger
    groups allowed to stay in flight (the pipeline depth minus one).

    ```mlir
    tilegpu.async_wait %g {pending = 1 : i32}
    ```
  }];
  let arguments = (ins Variadic<TileGPU_AsyncTokenType>:$groups, I32Attr:$pending);
  let assemblyFormat = "$groups attr-dict";
  let hasVerifier = 1;
}

def TileGPU_LocalLoadOp : TileGPU_Op<"local_load", [MemoryEffects<[MemRead]>]> {
  let summary = "Read a block from shared memory into registers (ldmatrix, with .trans).";
  let description = [{
    Reads stage `stage` of `buffer` into the register layout of the result type, a
    `#tilegpu.dot_operand` (`ldmatrix.sync.aligned.m8n8.x4`, PTX ISA 9.7.14.5.15). The result
    is the block as stored, `[a, b]` for a buffer of `[a, b]`, or with `transpose` the block
    transposed, `[b, a]` (the K block of Q·Kᵀ read as the B operand Kᵀ). Which ldmatrix the
    lowering uses follows from the two: a B operand is read with `.trans` exactly when it is
    not transposed here (mma.sync wants B column-major; a `[K, N]` row-major block is not).

    ```mlir
    %q = tilegpu.local_load %qs[%c0] : !tilegpu.smem<64x128xf16, stages = 1, swizzle = 128> -> tensor<64x128xf16, #a>
    ```
  }];
  let arguments = (ins TileGPU_SharedBufferType:$buffer, I32:$stage, UnitAttr:$transpose);
  let results = (outs TileGPU_OperandTile:$result);
  let assemblyFormat = [{
    $buffer `[` $stage `]` attr-dict `:` qualified(type($buffer)) `->` type($result)
  }];
  let hasVerifier = 1;
}

def TileGPU_LocalStoreOp : TileGPU_Op<"local_store", [MemoryEffects<[MemWrite]>]> {
  let summary = "Write a register tile into shared memory as stored (st.shared).";
  let description = [{
    Writes `value`, an f16/bf16 tile in a `#tilegpu.mma` accumulator layout, into stage
    `stage` of `buffer`, row-major in the buffer's swizzled form: the inverse of a
    `tilegpu.local_load` without `transpose`. Each thread stores its pairs of adjacent
    columns as one 32-bit `st.shared`. What it makes is a dot operand that was computed in
    registers and that a wgmma reads from shared memory: the backward's dSᵀ as the B operand
    of dQᵀ = Kᵀ·dSᵀ (tilegpu-allocate-shared writes it for a
    `tilegpu.convert_layout` from an accumulator to a B operand). The writes are the generic
    proxy's: a `tilegpu.fence_async_shared` and a barrier before a wgmma reads them.

    ```mlir
    tilegpu.local_store %ds, %dsb[%c0] : tensor<64x64xf16, #mma> -> !tilegpu.smem<64x64xf16, stages = 1, swizzle = 128>
    ```
  }];
  let arguments = (ins TileGPU_OperandTile:$value, TileGPU_SharedBufferType:$buffer, I32:$stage);
  let assemblyFormat = [{
    $value `,` $buffer `[` $stage `]` attr-dict `:` type($value) `->` qualified(type($buffer))
  }];
  let hasVerifier = 1;
}

def TileGPU_BulkAddOp : TileGPU_Op<"bulk_add", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "tile.atomic_add through shared memory and the bulk reduction unit (sm_90).";
  let description = [{
    Adds `value`, a float32 tile in a `#tilegpu.mma` accumulator layout, to the block of
    `desc` at `offsets`, as `tile.atomic_add` does. The tile goes through `buffer` in runs
    along the descriptor's unit-stride dim (`run_dim`: 0 or 1), a run being one row (or
    column) of the block, contiguous in global memory: the threads write the runs into the
    buffer, one thread a run then adds its run to global memory with
    `cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32` (PTX ISA 9.7.9.25.4.2): the
    L2 adds whole lines instead of one element per request. A buffer of fewer runs than the
    tile has takes them in rounds. Each round first waits until the bulk reductions issued
    from the buffer before have read it; the kernel waits for all of them before it exits. A
    block whose runs are not whole inside the tensor or 16-byte aligned is added element by
    element instead (atomics from registers). Buffer: `[runs, run length + 4]` float32 (the 4
    keep the writes of one instruction on distinct banks).

    ```mlir
    tilegpu.bulk_add %dq[%c0, %i], %acc via %stage {run_dim = 0 : i64} : !tile.desc<2, f32>, tensor<64x64xf32, #mma>, !tilegpu.smem<32x68xf32, stages = 1, swizzle = 0>
    ```
  }];
  let arguments = (ins TileGPU_Desc:$desc, Variadic<I32>:$offsets, TileGPU_AccTile:$value,
                       TileGPU_SharedBufferType:$buffer, I64Attr:$run_dim);
  let assemblyFormat = [{
    $desc `[` $offsets `]` `,` $value `via` $buffer attr-dict `:` qualified(type($desc)) `,` type($value) `,` qualified(type($buffer))
  }];
  let hasVerifier = 1;
}

def TileGPU_ConvertLayoutOp : TileGPU_Op<"convert_layout", [Pure]> {
  let summary = "The same tile in another layout.";
  let description = [{
    Moves elements between threads (or only between registers of a thread) so that the result
    is the operand in the layout its consumer needs. The one the attention class needs is the
    P re-pack: the f16/bf16 probabilities of a `#tilegpu.mma` accumulator become the A operand
    of the P·V product (`#tilegpu.dot_operand<operand = 0>`) — within each thread, two
    adjacent columns packed into one b32 register, no data crosses threads.

    ```mlir
    %pa = tilegpu.convert_layout %p : tensor<64x64xf16, #mma> -> tensor<64x64xf16, #a>
    ```
  }];
  let arguments = (ins TileGPU_Tile:$input);
  let results = (outs TileGPU_Tile:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def TileGPU_MmaOp : TileGPU_Op<"mma", [Pure, AllTypesMatch<["acc", "result"]>]> {
  let summary = "acc + a·b on the tensor cores with mma.sync.m16n8k16 (sm_80+).";
  let description = [{
    `a` is `[M, K]` in `#tilegpu.dot_operand<operand = 0>`, `b` is `[K, N]` in
    `#tilegpu.dot_operand<operand = 1>` of the same parent, `acc` and the result are `[M, N]`
    f32 in the parent `#tilegpu.mma<mma_sync, …>`. Lowered to one
    `mma.sync.aligned.m16n8k16.row.col.f32` per m16 tile, 8 columns and k step (PTX ISA
    9.7.14.5.14).

    ```mlir
    %o = tilegpu.mma %pa, %vb, %acc : tensor<64x64xf16, #a>, tensor<64x128xf16, #b> -> tensor<64x128xf32, #mma>
    ```
  }];
  let arguments = (ins TileGPU_OperandTile:$a, TileGPU_OperandTile:$b, TileGPU_AccTile:$acc);
  let results = (outs TileGPU_AccTile:$result);
  let assemblyFormat = [{
    $a `,` $b `,` $acc attr-dict `:` type($a) `,` type($b) `->` type($result)
  }];
  let hasVerifier = 1;
}

def TileGPU_WgmmaOp : TileGPU_Op<"wgmma", [AllTypesMatch<["acc", "result"]>,
                                            MemoryEffects<[MemRead]>]> {
  let summary = "Start acc + a·b on a warpgroup with wgmma.mma_async (sm_90a).";
  let description = [{
    `a` is `[M, K]` in registers (`#tilegpu.dot_operand<operand = 0>` of a `#tilegpu.mma<wgmma,
    …>`), B is read from stage `stage` of the shared buffer `b` through a matrix descriptor:
    with `transpose_b` the buffer holds Bᵀ, `[N, K]` (K-major, e.g. the K block of Q·Kᵀ),
    otherwise B, `[K, N]` (N-major, e.g. the V block of P·V). The product is asynchronous: the
    result is in flight, and only the results of a `tilegpu.wgmma_wait` that names it may be
    read (PTX ISA 9.7.15.5.2, wgmma.mma_async; the ops of one chain form a commit group).

    ```mlir
    %s = tilegpu.wgmma %q, %k[%stage], %zero {transpose_b} : tensor<64x128xf16, #a>, !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128> -> tensor<64x64xf32, #mma>
    ```
  }];
  let arguments = (ins TileGPU_OperandTile:$a, TileGPU_SharedBufferType:$b, I32:$stage,
                       TileGPU_AccTile:$acc, UnitAttr:$transpose_b);
  let results = (outs TileGPU_AccTile:$result);
  let assemblyFormat = [{
    $a `,` $b `[` $stage `]` `,` $acc attr-dict `:` type($a) `,` qualified(type($b)) `->` type($result)
  }];
  let hasVerifier = 1;
}

def TileGPU_WgmmaWaitOp : TileGPU_Op<"wgmma_wait", [AllTypesMatch<["values", "results"]>]> {
  let summary = "Wait for wgmma groups; the results are the values that were in flight.";
  let description = [{
    `wgmma.wait_group.sync.aligned pending` (PTX ISA 9.7.15.7.4): at most `pending` commit
    groups stay in flight. The operands are accumulators in flight and the results are the
    same values, now safe to read: every use after the wait takes the result, so nothing can
    be moved across the wait (FA3's intra-warpgroup overlap keeps P·V in flight over the
    softmax with `pending = 1`). An A operand (`#tilegpu.dot_operand<operand = 0>`) may be
    named too: the wait then also orders the code that made it before the wait — the
    overlapped schedule ties the next P so that its softmax stays under the P·V in flight.
    A wait may name no value: it then only frees what older groups read from shared memory
    (a GEMM's loop keeps its accumulating group in flight and waits with `pending = 1`, so
    the stage of two iterations back may be overwritten).

    ```mlir
    %o2, %s2 = tilegpu.wgmma_wait %o, %s {pending = 0 : i32} : tensor<64x128xf32, #mma>, tensor<64x64xf32, #mma>
    ```
  }];
  let arguments = (ins Variadic<TileGPU_WaitedTile>:$values, I32Attr:$pending);
  let results = (outs Variadic<TileGPU_WaitedTile>:$results);
  let assemblyFormat = "$values attr-dict (`:` type($values)^)?";
  let hasVerifier = 1;
}

def TileGPU_FenceAsyncSharedOp : TileGPU_Op<"fence_async_shared"> {
  let summary = "Order shared-memory writes of the generic proxy before async-proxy reads.";
  let description = [{
    `fence.proxy.async.shared::cta` (PTX ISA 9.7.13.4.2): what cp.async or st.shared wrote is
    seen by later wgmma or TMA reads of the same bytes. Between a landed `tilegpu.async_copy`
    and the `tilegpu.wgmma` that reads its buffer.

    ```mlir
    tilegpu.fence_async_shared
    ```
  }];
  let assemblyFormat = "attr-dict";
}

//===----------------------------------------------------------------------===//
// Warp specialization: a producer warpgroup fills the ring, mbarriers say when
//===----------------------------------------------------------------------===//

def TileGPU_Barriers : Type<CPred<[{::llvm::isa<::tessel::tilegpu::SharedBufferType>($_self) &&
    ::llvm::cast<::tessel::tilegpu::SharedBufferType>($_self).getShape() ==
        ::llvm::ArrayRef<int64_t>{1} &&
    ::llvm::cast<::tessel::tilegpu::SharedBufferType>($_self).getElementType().isInteger(64)}]>,
    "a ring of mbarriers (!tilegpu.smem<1xi64, stages = S>)",
    "::tessel::tilegpu::SharedBufferType">;

def TileGPU_MbarrierInitOp : TileGPU_Op<"mbarrier_init", [MemoryEffects<[MemWrite]>]> {
  let summary = "Set up every stage of a ring of mbarriers with an arrival count.";
  let description = [{
    `mbarrier.init.shared.b64` of each stage, by one thread; a `gpu.barrier` after it makes the
    barriers visible to the CTA. A phase of a barrier completes when `count` arrivals have
    been made on it (`tilegpu.mbarrier_arrive`, `tilegpu.async_copy_arrive`).

    ```mlir
    tilegpu.mbarrier_init %full count 128 : !tilegpu.smem<1xi64, stages = 2>
    ```
  }];
  let arguments = (ins TileGPU_Barriers:$barriers, I32Attr:$count);
  let assemblyFormat = "$barriers `count` $count attr-dict `:` qualified(type($barriers))";
}

def TileGPU_MbarrierArriveOp : TileGPU_Op<"mbarrier_arrive",
                                          [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "This thread's arrival on stage `stage` of a ring of mbarriers (release).";
  let description = [{
    `mbarrier.arrive.shared.b64`: what this thread read or wrote before is ordered before
    whatever a thread that waits for the phase does after its wait. The consumers of a
    warp-specialized loop arrive on the `empty` barrier of a stage once they are done with it.

    With `if %pred`, only where `%pred` holds (the same value in every thread of the
    warpgroup): the consumers of an overlapped loop release a stage one iteration late, and
    not in the first iteration (tilegpu-overlap-consumers).

    ```mlir
    tilegpu.mbarrier_arrive %empty[%s] : !tilegpu.smem<1xi64, stages = 2>
    tilegpu.mbarrier_arrive %empty_v[%prev] if %real : !tilegpu.smem<1xi64, stages = 2>
    ```
  }];
  let arguments = (ins TileGPU_Barriers:$barriers, I32:$stage, Optional<I1>:$pred);
  let assemblyFormat = [{
    $barriers `[` $stage `]` (`if` $pred^)? attr-dict `:` qualified(type($barriers))
  }];
}

def TileGPU_AsyncCopyArriveOp : TileGPU_Op<"async_copy_arrive",
                                           [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "Arrive on an mbarrier once this thread's copies so far have landed.";
  let description = [{
    `cp.async.mbarrier.arrive.noinc.shared.b64` (PTX ISA 9.7.9.25.3.4): the arrival is made
    by the hardware when every `tilegpu.async_copy` this thread issued before it has landed,
    and counts as one of the barrier's expected arrivals. A thread that waits for the phase
    then sees the copied bytes: no commit group, no wait_group, no CTA barrier.

    ```mlir
    tilegpu.async_copy_arrive %full[%s] : !tilegpu.smem<1xi64, stages = 2>
    ```
  }];
  let arguments = (ins TileGPU_Barriers:$barriers, I32:$stage);
  let assemblyFormat = "$barriers `[` $stage `]` attr-dict `:` qualified(type($barriers))";
}

def TileGPU_MbarrierWaitOp : TileGPU_Op<"mbarrier_wait", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "Wait until the phase of parity `phase` of a stage's mbarrier has completed.";
  let description = [{
    `mbarrier.try_wait.parity.shared.b64` until it succeeds (acquire): after it, this thread
    sees what the arrivals of that phase released. A barrier starts in phase 0, which is not
    complete; waiting for parity 1 then returns at once (the phase "before" the first), which
    is how a producer passes its first lap of the ring's `empty` barriers.

    With `if %pred`, only where `%pred` holds (uniform over the warpgroup).

    ```mlir
    tilegpu.mbarrier_wait %full[%s], %phase : !tilegpu.smem<1xi64, stages = 2>
    tilegpu.mbarrier_wait %full_v[%prev], %prev_phase if %real : !tilegpu.smem<1xi64, stages = 2>
    ```
  }];
  let arguments = (ins TileGPU_Barriers:$barriers, I32:$stage, I32:$phase, Optional<I1>:$pred);
  let assemblyFormat = [{
    $barriers `[` $stage `]` `,` $phase (`if` $pred^)? attr-dict `:` qualified(type($barriers))
  }];
}

def TileGPU_TurnStartOp : TileGPU_Op<"turn_start", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "The second consumer warpgroup gives the first the first turn at the dots.";
  let description = [{
    Ping-pong between the two consumer warpgroups of a warp-specialized kernel
    (tilegpu-pingpong): each waits for its turn (`tilegpu.turn_wait`) before issuing an
    iteration's wgmmas and hands the turn over (`tilegpu.turn_pass`) once they are issued, so
    one warpgroup's softmax runs while the other's dots do. Warpgroup w's turn is named barrier
    2 + w over both warpgroups' 256 threads (w's 128 wait on it, the other's 128 arrive); this
    op is the second warpgroup's arrival that lets the first start (`bar.arrive 2, 256`).
  }];
  let assemblyFormat = "attr-dict";
}

def TileGPU_TurnWaitOp : TileGPU_Op<"turn_wait", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "Wait until the other consumer warpgroup has passed this one the turn.";
  let description = [{
    `bar.sync 2 + w, 256` for consumer warpgroup w (tilegpu.turn_start says the protocol).
  }];
  let assemblyFormat = "attr-dict";
}

def TileGPU_TurnPassOp : TileGPU_Op<"turn_pass", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "Pass the turn at the dots to the other consumer warpgroup.";
  let description = [{
    `bar.arrive 2 + (1 − w), 256` for consumer warpgroup w (tilegpu.turn_start says the
    protocol).
  }];
  let assemblyFormat = "attr-dict";
}

def TileGPU_WarpgroupRowOp : TileGPU_Op<"warpgroup_row", [Pure]> {
  let summary = "The first row of the executing warpgroup's rows in the program's row block.";
  let description = [{
    In a program of wgmma layouts (`#tilegpu.mma<wgmma, …>`: 64 rows a warpgroup), the index,
    within the block's rows, of the first row the executing warpgroup owns: 0, 64, 128, …; the
    same for every thread of the warpgroup. tilegpu-skip-masked-warpgroups builds conditions
    on it that a warpgroup branches on as a whole.

    ```mlir
    %r = tilegpu.warpgroup_row : i32
    ```
  }];
  let results = (outs I32:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def TileGPU_WarpSpecializeOp : TileGPU_Op<"warp_specialize",
    [SingleBlock, NoTerminator, RecursiveMemoryEffects]> {
  let summary = "The rest of the kernel as two warp roles: consumers and a producer.";
  let description = [{
    The CTA's threads that the tile layouts count (the consumers) run the `consumers` region;
    `producer_warps` more warps, after them, run the `producer` region. Registers move from
    the producer to the consumers (`setmaxnreg`: `producer_registers` and
    `consumer_registers` a thread). A `gpu.barrier` in the consumers' region synchronizes the
    consumers only (a named barrier): the producer never takes part in one. Values defined
    before the op may be used in both regions; each region computes what else it needs.
    `tilegpu-warp-specialize` builds it: the producer copies a loop's blocks into the ring and
    the consumers compute, `tilegpu.mbarrier_*` ops between them.

    ```mlir
    tilegpu.warp_specialize producer_warps 4 registers 40, 232 consumers {
      ...
    } producer {
      ...
    }
    ```
  }];
  let arguments = (ins I32Attr:$producer_warps, I32Attr:$producer_registers,
                       I32Attr:$consumer_registers);
  let regions = (region SizedRegion<1>:$consumers, SizedRegion<1>:$producer);
  let assemblyFormat = [{
    `producer_warps` $producer_warps `registers` $producer_registers `,` $consumer_registers
    `consumers` $consumers `producer` $producer attr-dict
  }];
  let hasVerifier = 1;
}

#endif // TESSEL_TILEGPU_OPS_TD
