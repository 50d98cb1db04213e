//===- Passes.td - passes of the GPU level ------------------*- tablegen -*-===//
//
// The decisions that make a kernel fast, each a pass on the tilegpu level that lit can run
// alone: which layout every tile has, where each block lives in shared memory.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_TILEGPU_TRANSFORMS_PASSES_TD
#define TESSEL_TILEGPU_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def TileGPUAssignLayouts : Pass<"tilegpu-assign-layouts", "::mlir::func::FuncOp"> {
  let summary = "Give every tile of an attention-class program its register layout.";
  let description = [{
    For a tile program in the attention class (docs/dev/codegen.md: a query block of 64 or 128
    rows, f16/bf16 dot operands from loads, one loop level), every tensor type gets a layout
    encoding: 2-D tiles whose rows are the query block and dot accumulators
    `#tilegpu.mma<kind, warps, warp_rows>`, row vectors `#tilegpu.slice<dim = 1>`, column
    vectors `#tilegpu.slice<dim = 0>`, loaded dot operands `#tilegpu.dot_operand<operand = 0|1>`.
    An index tile (iota, splat, broadcast and arithmetic on them) that consumers need in two
    layouts is computed twice, once per layout; a dot whose A operand is computed in registers
    (the probabilities P) reads it through a `tilegpu.convert_layout` from the accumulator
    layout, the P re-pack. A program outside the class is refused with the reason, located.
  }];
  let dependentDialects = ["::tessel::tilegpu::TileGPUDialect"];
  let options = [
    Option<"wgmma", "wgmma", "bool", /*default=*/"false",
           "sm_90a warpgroup layouts (#tilegpu.mma<wgmma, …>: 16 rows per warp).">,
    Option<"warpRows", "warp-rows", "int64_t", /*default=*/"0",
           "Query rows per warp: 16, 32, or 0 to choose (32 for a 128-row block on "
           "mma.sync, else 16).">
  ];
}

def TileGPUAssignBlocked : Pass<"tilegpu-assign-blocked", "::mlir::func::FuncOp"> {
  let summary = "Give every tile of a program without dots its row-blocked register layout.";
  let description = [{
    For a program of element-wise ops, loads, stores and row reductions (a row softmax, a
    layer norm, a fused element-wise chain; docs/dev/codegen-blocked.md), every tensor type
    gets a layout: the [R, C] block `#tilegpu.blocked<threads, vector, threads_per_row>` (rows
    split over threads in 16-byte vectors of the narrowest element the program moves), row
    vectors `#tilegpu.slice<dim = 1>`, column vectors `#tilegpu.slice<dim = 0>` of it. A tile
    its consumers need in two of these (an iota indexing rows and columns) is computed twice,
    once per layout. A program outside the class is refused with the reason, located.
    `convert-tile-to-blocked` lowers what this pass writes (and runs it when a program comes
    without layouts).
  }];
  let dependentDialects = ["::tessel::tilegpu::TileGPUDialect"];
  let options = [
    Option<"numThreads", "num-threads", "int64_t", /*default=*/"128",
           "Threads per program (a power of two up to 1024).">
  ];
}

def TileGPUAllocateShared : Pass<"tilegpu-allocate-shared", "::mlir::func::FuncOp"> {
  let summary = "Place the loaded blocks in shared memory and make their copies explicit.";
  let description = [{
    Runs after `tilegpu-assign-layouts`. Each `tile.load` of a dot operand becomes a
    `tilegpu.alloc` (a `!tilegpu.smem` buffer with its byte offset), a `tilegpu.async_copy`
    with its commit and wait, a `gpu.barrier` and a `tilegpu.local_load` into the operand
    layout (`transpose` where a `tile.trans` read it). Loads outside loops get their own bytes;
    the loads of a loop body share slots by their position in the body, in a ring of `stages`
    stages (iteration j reads stage j % stages). With wgmma layouts, when every load outside
    the loops is an A operand read into registers once, the ring reuses those bytes. The
    function gets `tilegpu.shared_bytes`, the bytes the kernel needs. With `bulk-adds`, float32
    `tile.atomic_add`s of wgmma tiles whose descriptor has a unit stride become
    `tilegpu.bulk_add` through a staging buffer (off by default: measured slower than element
    atomics for the backward's dQ on the H200, docs/bench/2026-12-03-h200-fused-dq.md).
  }];
  let dependentDialects = ["::tessel::tilegpu::TileGPUDialect", "::mlir::gpu::GPUDialect"];
  let options = [
    Option<"stages", "stages", "int64_t", /*default=*/"2",
           "Stages of the ring of loop-body loads (2: double buffering).">,
    Option<"bulkAdds", "bulk-adds", "bool", /*default=*/"false",
           "Float32 atomic adds of wgmma tiles by bulk reductions (tilegpu.bulk_add).">
  ];
}

def TileGPUPipelineLoads : Pass<"tilegpu-pipeline-loads", "::mlir::func::FuncOp"> {
  let summary = "Issue the copies of later iterations while the current one computes.";
  let description = [{
    Runs after `tilegpu-allocate-shared`, on loops whose loads are in its unpipelined form (each
    copy waited for where the load was, its stage `iteration mod S`) into buffers of `S ≥ 2`
    stages. A prologue issues the copies of the first `S − 1` iterations, one commit group per
    iteration, into stages 0 … S−2. Iteration `j` then waits for its own group with `S − 2`
    younger groups left in flight, passes one barrier (its copies are visible, and every
    thread is done with the stage the next copy overwrites), issues the copies of iteration
    `j + S − 1` into stage `(s + S − 1) mod S`, and computes; `s`, the stage it reads, is
    carried by the loop. The groups in flight are loop-carried tokens, so each wait names the
    group it waits for. Copies of iterations past the loop's end are predicated off (`if`): a
    causal loop ends before the tensor does, and its next block would be read for nothing. So
    the groups still in flight after the loop are empty, and no wait follows it. A loop marked
    `tilegpu.dots_in_flight = D` (`tilegpu-async-accumulate`) keeps D wgmma groups in flight
    across its iterations: its copies go `S − 1 − D` iterations ahead. A copy's offsets and
    descriptor may be computed in the body from the induction variable by scalar arithmetic,
    `tile.load_scalar` and `tile.make_desc` (a block list, a paged cache's page): the copies
    issued ahead compute them again for their iteration, once per group. A loop whose copies
    depend on a value it carries is left as it is.
  }];
  let dependentDialects = ["::tessel::tilegpu::TileGPUDialect", "::mlir::gpu::GPUDialect",
                           "::mlir::arith::ArithDialect"];
}

def TileGPUSinkWaits : Pass<"tilegpu-sink-waits", "::mlir::func::FuncOp"> {
  let summary = "Wait for a block loaded before a loop below the loop's first copies.";
  let description = [{
    Runs after `tilegpu-pipeline-loads`. A wait outside loops (with its fence and barrier) for
    a block copied before a loop — the attention's Q — moves down past the copies that follow
    it (the loop's prologue: its first key blocks), the commit groups it passes added to its
    `pending` count, so the block and the prologue's copies are in flight together and the
    kernel waits for one memory latency before its first block instead of two. The local loads
    of the bytes it waited for, and the pure ops computed from them, move with it. It stops at
    the first op that needs it: a copy into bytes the wait covers (the ring reusing Q's bytes,
    which allocate-shared places in the ring's last stage so that the prologue's stages are
    others), or any op with effects other than copies, commits, barriers and scalar reads of
    global memory (`tile.load_scalar`), or one with regions (the loop). A wait that would pass
    no commit group stays where it is.
  }];
  let dependentDialects = ["::tessel::tilegpu::TileGPUDialect", "::mlir::gpu::GPUDialect"];
}

def TileGPUWarpSpecialize : Pass<"tilegpu-warp-specialize", "::mlir::func::FuncOp"> {
  let summary = "A producer warpgroup copies the loops' blocks; mbarriers replace the CTA barriers.";
  let description = [{
    Runs after `tilegpu-allocate-shared`, instead of `tilegpu-pipeline-loads`, on wgmma
    programs whose loops are in its unpipelined form (one ring of S stages). The program after
    the shared buffers becomes the consumers' region of a `tilegpu.warp_specialize`; its
    producer region runs the same loops with only their copies: per iteration and load i it
    waits for the stage's `empty[i]` barrier, copies the block into the stage and arrives on
    `full[i]` as it lands (`tilegpu.async_copy_arrive`). In the consumers' loops each load's
    commit, wait and CTA barrier become a wait for `full[i]`, the stage read is the iteration
    count (carried over the loops) mod S, and the body ends with arrivals on every `empty[i]`
    (one barrier a load, so that tilegpu-overlap-consumers can release K before V). A
    buffer outside loops that the ring reused (Q) gets bytes of its own. Programs it does not
    apply to are left as they are.
  }];
  let options = [
    Option<"producerWarps", "producer-warps", "int64_t", "4", "warps of the producer">,
    Option<"producerRegisters", "producer-registers", "int64_t", "0",
           "registers a producer thread keeps (setmaxnreg); 0: 40, or what the "
           "consumers leave of the launch's registers, up to 56">,
    Option<"consumerRegisters", "consumer-registers", "int64_t", "0",
           "registers a consumer thread gets (setmaxnreg); 0: what the CTAs an SM holds by "
           "their shared memory leave beside the producer's, at most 240">,
  ];
  let dependentDialects = ["::tessel::tilegpu::TileGPUDialect", "::mlir::gpu::GPUDialect",
                           "::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect"];
}

def TileGPUProducerOnce : Pass<"tilegpu-producer-once", "::mlir::func::FuncOp"> {
  let summary = "The producer warpgroup copies the blocks loaded once a tile (Q) as well.";
  let description = [{
    Runs after `tilegpu-warp-specialize`. The consumers' copies of blocks loaded once a tile
    (outside the streamed loops: Q) move to the producer, which issues them at the start of
    each tile once every consumer is past its last read of the buffer (`once_empty`, one
    arrival per consumer thread after the last op that reads the block or a value loaded from
    it) and arrives on `once_full` as they land; the consumers' copy, wait and CTA barriers
    become a wait for `once_full`. In a tile loop, each block gets a second buffer where
    `shared-limit` allows (past the end, 1024-byte aligned): tile i uses buffer i mod 2 and
    lap (i / 2) mod 2 of two-stage barriers, so the producer copies the next tile's block
    while the consumers read this one's and goes on into its K/V; else one buffer, tile i in
    lap i mod 2 (i = (iv − lb) / step of the tile loop). Programs it does not apply to (no
    producer, a once-load not in allocate-shared's form, an address the producer cannot
    compute) are left as they are.
  }];
  let options = [
    Option<"sharedLimit", "shared-limit", "int64_t", /*default=*/"232448",
           "Bytes of shared memory a block may have (a second buffer only within them).">,
  ];
  let dependentDialects = ["::tessel::tilegpu::TileGPUDialect", "::mlir::gpu::GPUDialect",
                           "::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect"];
}

def TileGPUTmaProducer : Pass<"tilegpu-tma-producer", "::mlir::func::FuncOp"> {
  let summary = "The producer warpgroup's block copies go through TMA (in-kernel tensor maps).";
  let description = [{
    Runs after `tilegpu-warp-specialize` (and `tilegpu-producer-once`). Marks each copy of the
    producer `tma_map = m` where TMA can make it — a 2-D block of 16-bit floats in 64-column,
    128-byte-swizzled slabs of at most 256 rows, from an unpaged descriptor with unit inner
    stride, unpredicated, its `async_copy_arrive` after it — for every copy of its descriptor,
    which must all fill one ring. Map m has as many slots as that ring has stages; the program
    gets `tilegpu.tma = {maps, slots, records, images}`: 32-byte records (what each map's
    current slot describes, and how many builds it had) and 128-byte map images, past the
    end of its shared memory, which must stay within `shared-limit` and past half of it (one
    CTA an SM: the lowering's global map slots are indexed by the SM). Programs it does not
    apply to are left as they are. The lowering builds a map into its next slot at the first
    copy that finds the descriptor changed (after the copy's `empty` wait), issues the copy
    from one thread with `expect_tx` on the stage's `full` barrier, and keeps cp.async where
    the descriptor fails TMA's rules at run time (docs/dev/notes/2026-12-04-tma-ptx.md).
  }];
  let options = [
    Option<"sharedLimit", "shared-limit", "int64_t", /*default=*/"232448",
           "Bytes of shared memory a block may have.">,
  ];
  let dependentDialects = ["::tessel::tilegpu::TileGPUDialect"];
}

def TileGPUDropTmaFences : Pass<"tilegpu-drop-tma-fences", "::mlir::func::FuncOp"> {
  let summary = "No proxy fence after a consumer's wait for stages only TMA fills.";
  let description = [{
    For programs whose `tma_map` copies always go through TMA (convert-tile-to-mma's
    `tma-only`: the caller guarantees aligned origins and row strides, so the lowering keeps
    no cp.async path beside them), run after the schedule passes (overlap-consumers,
    pingpong, pipeline-tiles); convert-tile-to-mma runs it with `drop-tma-fences`. A
    `tilegpu.fence_async_shared` whose ops right above it are `tilegpu.mbarrier_wait`s (and
    pure ops) on `full` rings that only TMA copies complete is erased: TMA writes through the async proxy that wgmma reads, and the mbarrier's
    completion makes them visible to the thread that waited. A ring is TMA-only when every
    copy that arrives on it is TMA-marked and no generic-proxy write (another copy, a
    `local_store`, a `bulk_add`'s staging) reaches the bytes of its buffers; a program with a
    buffer at an unknown place keeps every fence. Other fences (a block the consumers copy
    themselves, a B operand stored from registers) stay.
  }];
  let dependentDialects = ["::tessel::tilegpu::TileGPUDialect"];
}

def TileGPUOverlapConsumers : Pass<"tilegpu-overlap-consumers", "::mlir::func::FuncOp"> {
  let summary = "FA3's intra-warpgroup overlap in the consumers of a producer warpgroup.";
  let description = [{
    Runs after `tilegpu-warp-specialize`, on the consumers' loops that have the attention shape
    (the dots `tilegpu-overlap-wgmma` rewrites; K's and V's full barriers waited for right
    before each is read, both released at the end of the body). The first iteration is peeled
    into a loop of at most one step: S_0 and its softmax as before, K_0 released, V_0 left in
    the ring, P_0 and V_0's stage yielded. The loop then starts one step later; iteration j
    (count i) waits for K_j and V_{j−1}, issues S_j = Q·K_jᵀ and P_{j−1}·V_{j−1} as two
    `tilegpu.wgmma` groups, waits with `pending = 1` for S_j and releases K_j, computes the
    softmax while P·V runs, waits with `pending = 0` for O (tying P_j) and releases V_{j−1},
    and yields f(O). The loop carries P and where its V block is (buffer, stage). After it the
    last P·V is drained (wait for V_last, P·V, release) in a loop of at most one iteration: none
    where the loop ran none, peel included (O kept; no P·V issued). The producer
    is unchanged. Nothing is done where the registers the schedule holds (S, O, P, Q) would
    not fit the consumers' (d256). With `late-p`, where they do not fit but would with P_j
    made after that wait — the float exponentials tied through it, so one P is live, not two
    (FA3's order) — and the consumers' registers are then enough, or become enough once a
    producer that only copies by cp.async keeps 24 and gives them the rest of the roles' total
    (d64's three consumer warpgroups: 160, the producer 32), the schedule takes that form.
    With `transposed-v`, loops whose V is read transposed (FP8's) are taken too, their P·V
    reading it so. With `masked-synchronous`, the loops tile-split-masked-loops left masked
    (`tile.block_mask = "mixed"`: the boundary blocks, one or two a tile) stay synchronous:
    overlapped, they peel and drain a pipeline of one or two steps, the same work in twice
    the code (a quarter of a d128 kernel, a sixth of d256's, so of their compile).
    With `rescale-under-s`, f(O) = O·α_j (tile-online-softmax's rescale) is not made after
    O's wait but in the next iteration, between the S group and the P·V group it feeds: its
    multiplies issue while S's wgmma runs instead of between the warpgroup's tensor work
    (d256: 128 a thread a key block). The loop carries α's row vector (1 into the first
    iteration); O·α_last is made after the loop, before the drain. The same products: the
    same bits.
  }];
  let options = [
    Option<"lateP", "late-p", "bool", /*default=*/"false",
           "Where the registers are short, P_j made after the previous P·V's wait, the "
           "registers of a cp.async producer given to the consumers.">,
    Option<"transposedV", "transposed-v", "bool", /*default=*/"false",
           "Loops whose V is read transposed too (FP8's, stored K-major by the producer).">,
    Option<"maskedSynchronous", "masked-synchronous", "bool", /*default=*/"false",
           "The split's masked loops (the boundary blocks) left synchronous.">,
    Option<"rescaleUnderS", "rescale-under-s", "bool", /*default=*/"false",
           "O's rescale by α_j made in iteration j+1 between S's group and P·V's (beside S's "
           "wgmma), α's row vector carried; false: after O's wait, as f(O).">,
  ];
  let dependentDialects = ["::tessel::tilegpu::TileGPUDialect", "::mlir::arith::ArithDialect"];
}

def TileGPUFuseMaskedLoops : Pass<"tilegpu-fuse-masked-loops", "::mlir::func::FuncOp"> {
  let summary = "One key loop where tile-split-masked-loops made an unmasked and masked copies.";
  let description = [{
    Runs on tile IR before the layouts. tile-split-masked-loops copies a masked key loop into
    an unmasked loop over the blocks the mask shows whole (`tile.block_mask = "all_true"`) and
    masked loops before and after it (`"mixed"`): on the fast paths every copy is a whole
    pipeline of dots and softmax, so the boundary blocks (at most a block or two a tile) double
    the kernel's code and its compile. This pass runs the adjacent copies as the masked one
    over their joint range, its mask or-ed with a scalar guard, `lb(all_true) <= j <
    ub(all_true)`, splat over the tile: exact, since the guarded blocks are the ones the split
    proved all-true. convert-tile-to-mma skips the mask's arithmetic there under a uniform
    branch. The loop is marked `tile.block_mask = "guarded"`. Loops that are not such a chain
    (a residual mask, other uses of the carried values, an op with effects between them), and
    masked scores that do not feed the softmax as they are (`select(mask, S·c, -inf)` read by
    the row max and `exp2(x - m)` only: the form the lowering branches on), are left as they
    are. Off by default (`GpuOptions(fuse_masked_loops)`): half the compile, 2-6 % slower on
    the H200 (docs/bench/2026-12-05-h200-fuse-masked-loops.md).
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def TileGPUSkipMaskedWarpgroups : Pass<"tilegpu-skip-masked-warpgroups", "::mlir::func::FuncOp"> {
  let summary = "A consumer warpgroup skips the masked loop's blocks its own rows cannot see.";
  let description = [{
    tile-split-masked-loops leaves the blocks the mask's boundary crosses in a masked copy of
    the key loop, decided for the block's rows as a whole. A warpgroup owns 64 of them: with
    192-row blocks (d64) or 128 rows over 64-key blocks (d256) the causal diagonal hides whole
    blocks from the first warpgroups' rows. In the consumers of a warp-specialized program of
    two consumer warpgroups or more, for each synchronous masked loop whose body is the
    online-softmax step (m' = max(m, rowmax(X)), α = exp2(m − m̂), P = exp2(X − m̂),
    l' = l·α + rowsum(P), O' = O·α + P·V, X = select(mask, T, −inf), m, l and O starting at
    −inf, 0 and 0), the mask analysis restricted to the rows [r, r + 64) of
    `tilegpu.warpgroup_row` r gives a scalar "hidden" condition; the ops from K's read to P·V
    go under `scf.if` on its negation, the other side yielding m, l and O unchanged — exact,
    since a step whose scores are all −inf changes nothing. The ring's waits and the
    ping-pong's turns in that span are repeated on the skipping side, so the phases and turns
    stay in step; the arrivals that free the stages stay after the branch. Loops of another
    shape are left as they are.
  }];
  let dependentDialects = ["::tessel::tilegpu::TileGPUDialect", "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect"];
}

def TileGPUPingPong : Pass<"tilegpu-pingpong", "::mlir::func::FuncOp"> {
  let summary = "The two consumer warpgroups take turns issuing their dots (FA3's ping-pong).";
  let description = [{
    Runs after `tilegpu-overlap-consumers`, on warp-specialized programs of two consumer
    warpgroups whose loops issue a pair of wgmma groups (S_j and the previous P·V) followed by a
    wait with one group in flight. Before each pair a warpgroup waits for its turn
    (`tilegpu.turn_wait`), after it passes the turn to the other (`tilegpu.turn_pass`); the
    consumers' region starts with `tilegpu.turn_start`, the second warpgroup's arrival that gives
    the first warpgroup the first turn. Both warpgroups run the same loops, so the turns
    balance. A loop whose two attention dots stayed synchronous (overlap-consumers off) takes
    its turn from after S = Q·Kᵀ to before P·V: around the softmax, as cuDNN's Hopper kernel
    does. Other programs are left as they are.
  }];
  let dependentDialects = ["::tessel::tilegpu::TileGPUDialect"];
}

def TileGPUPipelineTiles : Pass<"tilegpu-pipeline-tiles", "::mlir::func::FuncOp"> {
  let summary = "Issue the next tile's first S = Q·K₀ᵀ before this tile's epilogue.";
  let description = [{
    Runs after `tilegpu-overlap-consumers` (and `tilegpu-pingpong`) on a persistent program
    whose Q the producer copies (`tilegpu-producer-once`): the consumers' tile loop carries the
    first S of a tile in flight. It is issued before the tile loop for the first tile, and for
    tile t + 1 after tile t's last loop (its last P·V waited for), before t's epilogue — in a
    loop of at most one iteration that runs when tile t + 1 exists and its peeled first
    iteration runs: it waits for Q(t + 1) and for the K block at the count tile t ended with
    (the producer copies a tile's key blocks in loop order, so that is the peel's), fences
    them and issues the wgmma. The peel waits for the carried S (pending 0) in place of its
    wait, read and dot of K. What tile t + 1's head computes from the tile index (the peel's
    bounds, Q's stage and lap) is computed again there from t + 1 (a schedule read included);
    a program whose values are not of that kind, or not in that form, is left as it is.
  }];
  let dependentDialects = ["::tessel::tilegpu::TileGPUDialect", "::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect"];
}

def TileGPUOverlapWgmma : Pass<"tilegpu-overlap-wgmma", "::mlir::func::FuncOp"> {
  let summary = "FA3's intra-warpgroup overlap: P·V of one key block runs under the next softmax.";
  let description = [{
    Runs after `tilegpu-allocate-shared` (two stages), before `tilegpu-pipeline-loads`, on the
    loops of a wgmma program that have the attention shape: two dots, S = Q·Kᵀ (Q from outside
    the loop, a fresh zero accumulator) and O' = f(O) + P·V (P computed in the body, f(O) the
    carried O or O·α), with their K and V blocks loaded in the unpipelined form. Iteration j
    then waits for K_j and V_{j−1}, issues S_j = Q·K_jᵀ and the previous iteration's P_{j−1}·V_{j−1}
    as two `tilegpu.wgmma` groups, copies K_{j+1} into the other stage and V_j into this one,
    waits with `pending = 1` for S_j, computes the softmax while P·V runs, waits with
    `pending = 0` for O (and ties P_j there, so the softmax stays above the wait) and yields
    f(O). The loop carries the stage, the copy group in flight, P and where its V block is (a
    buffer and a stage). Before the first iteration nothing is pending: P = 0 against the K
    block of that iteration (landed, finite: the prologue copies it unconditionally, zero-filled
    past the tensor), which adds exactly 0. After the loop the last P·V is drained, or, when
    the next loop also overlaps and starts from this loop's O, handed to it with the stage it
    starts in. Other loops are left to `tilegpu-pipeline-loads`.
  }];
  let dependentDialects = ["::tessel::tilegpu::TileGPUDialect", "::mlir::gpu::GPUDialect",
                           "::mlir::arith::ArithDialect"];
}

def TileGPUAsyncAccumulate : Pass<"tilegpu-async-accumulate", "::mlir::func::FuncOp"> {
  let summary = "Keep a loop's accumulating wgmma in flight into the next iteration (GEMM).";
  let description = [{
    Runs after `tilegpu-allocate-shared` (four stages or more), before
    `tilegpu-pipeline-loads`, on the loops of a wgmma program whose body has one dot, of
    blocks loaded in the unpipelined form, accumulating into a value the loop carries and
    yields and nothing else reads: a GEMM's `acc += A_k·B_k`. The dot becomes a
    `tilegpu.wgmma` followed by a `tilegpu.wgmma_wait {pending = 1}` that names no value: the
    iteration's wgmma stays in flight while the next one waits for its copies and issues its
    own (wgmmas on the same accumulator run in order without a wait), and the previous one
    is done when the iteration ends. After the loop a wait with `pending = 0` gives the
    accumulator. The loop gets `tilegpu.dots_in_flight = 1`, which makes
    `tilegpu-pipeline-loads` issue copies `S − 2` iterations ahead instead of `S − 1`: the
    stage they overwrite was read by the wgmma of two iterations back, which every warpgroup
    has waited for before the barrier that precedes the copies. Loops with fewer than four
    stages (copies one iteration ahead expose their latency: measured slower), with other
    dots or already scheduled are left alone.
  }];
  let dependentDialects = ["::tessel::tilegpu::TileGPUDialect"];
}

def TileGPUAsyncDots : Pass<"tilegpu-async-dots", "::mlir::func::FuncOp"> {
  let summary = "Issue each wgmma dot where it stands and wait for it where its result is used.";
  let description = [{
    On a wgmma program in `tilegpu-allocate-shared`'s form: every `tile.dot` whose B is a
    `tilegpu.local_load` becomes a `tilegpu.wgmma` (its B the local load's buffer and stage),
    and a `tilegpu.wgmma_wait` goes before the first op that reads its result (or the block's
    terminator). Commit groups complete in issue order, so the wait names every group up to
    that one, with `pending` the younger groups left in flight. Dots that follow each other
    run back to back, and what lies between a dot and its first use runs under it. Blocks that
    `tilegpu-overlap-wgmma` scheduled already are left alone. Opt-in (not yet measured):
    `convert-tile-to-mma{wgmma-async-dots}`. With `eager`, every dot left, in any block,
    becomes a `tilegpu.wgmma` followed by its `tilegpu.wgmma_wait {pending = 0}`: the
    synchronous form `convert-tile-to-mma` gives every wgmma dot nothing else scheduled.
  }];
  let options = [
    Option<"eager", "eager", "bool", /*default=*/"false",
           "Wait for each dot right after it (pending 0), in every block">,
  ];
  let dependentDialects = ["::tessel::tilegpu::TileGPUDialect"];
}

def TileGPUMmaDots : Pass<"tilegpu-mma-dots", "::mlir::func::FuncOp"> {
  let summary = "Make the tile.dots of an mma.sync program tilegpu.mma.";
  let description = [{
    On an mma.sync program with its layouts assigned (`tilegpu-assign-layouts`): every
    `tile.dot` whose A and B carry their `#tilegpu.dot_operand` layouts (a register tile, a
    `tilegpu.local_load`, the P re-pack) becomes a `tilegpu.mma`, the op `convert-tile-to-mma`
    lowers to `mma.sync.m16n8k16` — as `tilegpu-async-dots{eager}` makes the wgmma dots
    `tilegpu.wgmma` + `tilegpu.wgmma_wait`. A no-op on wgmma programs.
  }];
  let dependentDialects = ["::tessel::tilegpu::TileGPUDialect"];
}

#endif // TESSEL_TILEGPU_TRANSFORMS_PASSES_TD
