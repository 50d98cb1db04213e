//===- Passes.td - rewrite passes of the tile dialect -------*- tablegen -*-===//
//
// The passes that turn attention written the naive way into the fast streamed form, before any
// layout is chosen. Each is checked by lit (before/after) and by translation validation on the
// CPU interpreter.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_TILE_TRANSFORMS_PASSES_TD
#define TESSEL_TILE_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def TileOnlineSoftmax : Pass<"tile-online-softmax", "::mlir::func::FuncOp"> {
  let summary = "Rewrite a softmax streamed across a loop into the one-pass online softmax.";
  let description = [{
    Naive attention normalises each score row over every key block before the dot with V. This
    pass turns each `tile.softmax ... streamed` into the FlashAttention recurrence, in base 2:
    the loop carries a running row max `m` and sum `l`; per block `t = s·log2(e)`,
    `m' = max(m, rowmax t)`, `p = exp2(t − m')`, `l' = l·exp2(m − m') + rowsum p`, and the
    accumulator is rescaled by `exp2(m − m')` before `p·V` is added. After the loop the
    accumulator is divided by `l` (rows with `l = 0`, i.e. fully masked, give 0) and the
    log-sum-exp is `(m + log2 l)·ln 2`.

    It is legal only when the softmax feeds, through casts, the A operand of one `tile.dot` whose
    accumulator is a loop-carried value used by nothing else — a sum over the streamed axis. The
    pass says why when it refuses.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::math::MathDialect"];
}

def TileFoldSoftmaxScale : Pass<"tile-fold-softmax-scale", "::mlir::func::FuncOp"> {
  let summary = "Fold the softmax scale and log2(e) into one multiply before exp2.";
  let description = [{
    After the online-softmax rewrite the scores are multiplied twice: by the user's scale and by
    log2(e). This pass moves positive constant factors through `-inf` masking selects and merges
    chains of multiplications by splatted scalars into one, so each score pays one multiply.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def TileSplitMaskedLoops : Pass<"tile-split-masked-loops", "::mlir::func::FuncOp"> {
  let summary = "Skip key blocks a mask hides entirely and drop mask arithmetic where it shows all.";
  let description = [{
    For a loop whose body masks scores with `select(mask, s, -inf)`, where `mask` is built from
    index arithmetic (iota, splat, add, sub, multiply by constants, compares, `and`), interval
    arithmetic over each block's index ranges classifies every iteration as all-false, all-true
    or mixed, as a function of the induction variable. The loop is split into up to three loops:
    blocks proven all-false are never visited, blocks proven all-true run with the mask replaced by
    `true` (so no mask arithmetic is left after canonicalisation), and only the boundary blocks
    pay for the mask. Bounds are computed at run time where they depend on run-time values.

    Run it after `tile-online-softmax`: skipping a fully masked block leaves the running max, sum
    and accumulator unchanged only in the streamed form.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect"];
}

def TileSeparateBias : Pass<"tile-separate-bias", "::mlir::func::FuncOp"> {
  let summary = "Compute score biases affine in the indices once per row and once per column.";
  let description = [{
    A bias built from index arithmetic, such as ALiBi's `slope · (kv_idx − q_idx)`, costs every
    score an integer subtract, a conversion to float, a multiply and an add. When the integer
    tile is affine in the two indices (the mask analysis's `IndexTile`), `sitofp(base + a·i +
    c·j)` becomes a row vector `sitofp(base + a·i)` plus a column vector `sitofp(c·j)` (exact
    below 2^24). Element-wise float arithmetic on spread vectors is then done on the vectors,
    multiplications by splats distribute over the sum, the column part joins the score and the
    row part goes around the online softmax: `max(u + r) = max(u) + r` (exact),
    `select(c, u + r, −inf) = select(c, u, −inf) + r` and `(u + r) − m = u − (m − r)`. What is
    left per score is one multiply-add with a column value and the exponent's subtraction.

    The loop's variables go to the row part, so the column part is loop-invariant. Run it after
    `tile-split-masked-loops` (which reads the same index arithmetic in masks) and before
    `tile-fold-softmax-scale` merges the scale with log2(e) again.

    The column part stays live across the loop (LLVM hoists it: a register per column a thread
    holds). Score tiles of fewer than `min-rows` rows are left alone: the 64-row kernels of one
    warpgroup sit at the register budget of three CTAs an SM, which those registers break
    (d128 64×64: 237 registers, two CTAs, 4 % slower on the H200); the 128-row kernels'
    consumer warpgroups have the room.
  }];
  let options = [
    Option<"minRows", "min-rows", "int64_t", /*default=*/"128",
           "Separate biases of score tiles with at least this many rows">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def TileFloorQuotientRanges : Pass<"tile-floor-quotient-ranges", "::mlir::func::FuncOp"> {
  let summary = "Compares of floor quotients of index tiles as ranges of the dividend.";
  let description = [{
    `x // c pred y` (Python's floor division by a constant c > 0, as the DSL builds it), where
    y is an index tile or a floor quotient that is the same over the tile (the uniform
    quotient of tile-fold-index-division, made a splat here), becomes a comparison of x
    itself: `x // c == y` is `c·y <= x < c·y + c`, `!=` its complement, `x // c < y` is
    `x < c·y`, `<=` `x < c·y + c`, `>` `x >= c·y + c`, `>=` `x >= c·y`. Chunked local
    attention's `q_idx // C == kv_idx // C` is then two affine atoms on kv_idx, which
    tile-split-masked-loops classifies per key block: a row visits its chunk's key blocks
    only. Exact for integers; the index arithmetic is assumed not to wrap.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def TileFoldIndexDivision : Pass<"tile-fold-index-division", "::mlir::func::FuncOp"> {
  let summary = "Floor divisions of index tiles that are the same over the tile become scalars.";
  let description = [{
    Python's `x // c` (c a positive constant), as the DSL builds it — `select(remsi(x, c) < 0,
    divsi(x, c) − 1, divsi(x, c))` — of an index tile (the mask analysis's `IndexTile`: a
    linear expression of scalars plus steps along the axes) becomes a splat where it is the
    same over the tile: with g = gcd(c, the scalars' coefficients), x = g·L + r and every
    offset r in one interval [m·g, m·g + g), it is `(L + m) // (c / g)` (`L + m` where
    g = c). A mask reading a table of blocks, `blocks[q_idx // G, kv_idx // G]`, with G a
    multiple of the kernel's blocks then gathers
    one entry a block instead of one a score (the gather's canonicalization reads scalar
    indices with one `tile.load_scalar`). Exact for any value of the scalars; the index
    arithmetic is assumed not to wrap (as the kernels' i32 offsets are).
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def TileTestElementwiseGrad : Pass<"tile-test-elementwise-grad", "::mlir::func::FuncOp"> {
  let summary = "For tests: return the element-wise derivative of a function's first result.";
  let description = [{
    The backward of attention differentiates the user's score_mod, element-wise code on the
    score tile, with `tessel::tile::buildElementwiseGrad` (forward mode; called by the Python
    front end for `tl.elementwise_grad` while it traces the backward kernels). This pass exposes
    that step to lit: in every function marked `tile.test_elementwise_grad`, it appends the
    derivative of the first returned tile with respect to the first argument to the returned
    values (and removes the mark). Ops it cannot differentiate are errors at their location.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::math::MathDialect"];
}

#endif // TESSEL_TILE_TRANSFORMS_PASSES_TD
