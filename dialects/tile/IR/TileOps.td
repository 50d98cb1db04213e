//===- TileOps.td - operations of the tile dialect ----------*- tablegen -*-===//
//
// Every op a FlashAttention forward needs at block level: grid queries, descriptors, bounded
// loads and stores, dot with f32 accumulation, reductions and shape ops on tiles, and the
// streamed softmax that the online-softmax rewrite consumes. Element-wise math, casts, compares
// and selects come from upstream arith/math on tensors; loops from scf.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_TILE_OPS_TD
#define TESSEL_TILE_OPS_TD

include "tile/IR/TileDialect.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

class Tile_Op<string mnemonic, list<Trait> traits = []>
    : Op<Tile_Dialect, mnemonic, traits>;

// A tile is a statically shaped tensor; floats are what the hardware multiplies. FP8 (e4m3)
// tiles are loaded, stored, converted and multiplied (tile.dot), not computed on.
def Tile_FloatElement : AnyTypeOf<[F16, BF16, F32]>;
def Tile_Element : AnyTypeOf<[F8E4M3FN, F16, BF16, F32, I32, I1]>;
def Tile_Tile : StaticShapeTensorOf<[F8E4M3FN, F16, BF16, F32, I32, I1]>;
def Tile_FloatTile : StaticShapeTensorOf<[F16, BF16, F32]>;
def Tile_F32Tile : StaticShapeTensorOf<[F32]>;
def Tile_MaskTile : StaticShapeTensorOf<[I1]>;
def Tile_Tile1D : TensorRankOf<[I32], [1]>;
def Tile_Tile2D : TensorRankOf<[F8E4M3FN, F16, BF16, F32, I32, I1], [2]>;

//===----------------------------------------------------------------------===//
// The grid
//===----------------------------------------------------------------------===//

def Tile_ProgramIdOp : Tile_Op<"program_id", [Pure]> {
  let summary = "Index of this program instance along one grid axis.";
  let description = [{
    Each program instance of a launch sees its coordinates in a grid of up to three axes.

    ```mlir
    %pid_m = tile.program_id 0 : i32
    ```
  }];
  let arguments = (ins ConfinedAttr<I32Attr, [IntNonNegative, IntMaxValue<2>]>:$axis);
  let results = (outs I32:$result);
  let assemblyFormat = "$axis attr-dict `:` type($result)";
}

def Tile_NumProgramsOp : Tile_Op<"num_programs", [Pure]> {
  let summary = "Number of program instances along one grid axis.";
  let description = [{
    ```mlir
    %n = tile.num_programs 1 : i32
    ```
  }];
  let arguments = (ins ConfinedAttr<I32Attr, [IntNonNegative, IntMaxValue<2>]>:$axis);
  let results = (outs I32:$result);
  let assemblyFormat = "$axis attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Global memory
//===----------------------------------------------------------------------===//

def Tile_MakeDescOp : Tile_Op<"make_desc", [Pure, AttrSizedOperandSegments]> {
  let summary = "Give a global pointer a shape and strides.";
  let description = [{
    Builds a descriptor of the elements `base[offset + Σ i_k · strides[k]]` for
    `0 ≤ i_k < shape[k]`. The optional element offset selects a sub-tensor, which is how a kernel
    picks a batch and head out of a BSHD or BHSD tensor (and a shared key/value head for
    grouped-query attention). Shapes, strides and the offset are counted in elements.

    ```mlir
    // rows [0, n) of one head of a BSHD tensor: stride between rows is h·d
    %d = tile.make_desc %q[%off], shape [%n, %c128], strides [%hd, %c1]
        : !tile.ptr<f16> -> !tile.desc<2, f16>
    ```

    A **paged** descriptor (rank 2) reads its rows through a page table, as a paged KV cache
    does: `pages` is a rank-1 i32 descriptor of page numbers and `page_size` a constant P. Row
    `i` is row `pages[i / P] · P + i mod P` of the strided view above, so element `(i, j)` is
    `base[offset + (pages[i / P] · P + i mod P) · strides[0] + j · strides[1]]`. A row whose
    entry `i / P` lies outside `pages`, or whose page number lies outside `[0, num_pages)`, is
    out of bounds like a row past `shape[0]`: loads pad it, stores drop it. Rows of one block
    may come from different pages in any order, so a block of any height is read at once
    whatever the page size. The page table is read as constant while the program runs (a
    program that writes its own table must read it through another descriptor).

    ```mlir
    // keys [0, n) of one sequence of a cache [num_pages, 16, h_kv, d]
    %k = tile.make_desc %cache[%head], shape [%n, %c128], strides [%row, %c1],
        pages %table[%np] page_size 16
        : !tile.ptr<f16>, !tile.desc<1, i32> -> !tile.desc<2, f16>
    ```
  }];
  let arguments = (ins Tile_PtrType:$base, Optional<I32>:$offset,
                       Variadic<I32>:$shape, Variadic<I32>:$strides,
                       Optional<Tile_DescType>:$pages, Optional<I32>:$num_pages,
                       OptionalAttr<I64Attr>:$page_size);
  let results = (outs Tile_DescType:$result);
  let assemblyFormat = [{
    $base (`[` $offset^ `]`)? `,` `shape` `[` $shape `]` `,` `strides` `[` $strides `]`
    (`,` `pages` $pages^ `[` $num_pages `]` `page_size` $page_size)?
    attr-dict `:` qualified(type($base)) (`,` qualified(type($pages))^)? `->`
    qualified(type($result))
  }];
  let extraClassDeclaration = [{
    /// Whether rows are read through a page table.
    bool isPaged() { return static_cast<bool>(getPages()); }
  }];
  let hasVerifier = 1;
}

def Tile_LoadOp : Tile_Op<"load", [MemoryEffects<[MemRead]>]> {
  let summary = "Load a tile at run-time offsets; out-of-bounds elements get the padding.";
  let description = [{
    Loads the tile whose first element sits at `offsets` in the descriptor. Elements whose index
    lies outside the descriptor's shape are not read; they take the value `padding` (0 unless
    given), so a partial last block needs no special code.

    ```mlir
    %k = tile.load %kdesc[%j, %c0] : !tile.desc<2, f16> -> tensor<64x128xf16>
    %m = tile.load %mdesc[%i] {padding = 0xFFF0000000000000 : f64}
        : !tile.desc<1, f32> -> tensor<128xf32>
    ```
  }];
  let arguments = (ins Tile_DescType:$desc, Variadic<I32>:$offsets,
                       DefaultValuedAttr<F64Attr, "0.0">:$padding);
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = [{
    $desc `[` $offsets `]` attr-dict `:` qualified(type($desc)) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Tile_LoadScalarOp : Tile_Op<"load_scalar", [MemoryEffects<[MemRead]>]> {
  let summary = "Load one element at run-time indices; an index out of range gives the padding.";
  let description = [{
    Reads the single element at `indices` of the descriptor: how a kernel gets data-dependent
    scalars such as a sequence's start in `cu_seqlens[b]` or a page number in
    `block_table[b, j / page]`. When any index lies outside the descriptor's shape (negative or
    past the end) memory is not touched and the result is `padding` (0 unless given), so a bad
    index can never read out of bounds. The result is a scalar of the descriptor's element type;
    tiles of indices are not this op's business.

    ```mlir
    %start = tile.load_scalar %cu[%b] : !tile.desc<1, i32> -> i32
    %page = tile.load_scalar %table[%b, %jp] {padding = -1.0 : f64} : !tile.desc<2, i32> -> i32
    ```
  }];
  let arguments = (ins Tile_DescType:$desc, Variadic<I32>:$indices,
                       DefaultValuedAttr<F64Attr, "0.0">:$padding);
  let results = (outs Tile_Element:$result);
  let assemblyFormat = [{
    $desc `[` $indices `]` attr-dict `:` qualified(type($desc)) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Tile_StoreOp : Tile_Op<"store", [MemoryEffects<[MemWrite]>, AttrSizedOperandSegments]> {
  let summary = "Store a tile at run-time offsets; out-of-bounds and masked-off elements are dropped.";
  let description = [{
    Writes `value` so that its first element lands at `offsets`. Elements outside the
    descriptor's shape are never written; with a mask, neither are those whose mask bit is 0.

    ```mlir
    tile.store %odesc[%i, %c0], %o : !tile.desc<2, f16>, tensor<128x128xf16>
    tile.store %odesc[%i, %c0], %o mask %m : !tile.desc<2, f16>, tensor<128x128xf16>, tensor<128x128xi1>
    ```
  }];
  let arguments = (ins Tile_DescType:$desc, Variadic<I32>:$offsets, Tile_Tile:$value,
                       Optional<Tile_MaskTile>:$mask);
  let assemblyFormat = [{
    $desc `[` $offsets `]` `,` $value (`mask` $mask^)? attr-dict `:` qualified(type($desc)) `,`
    type($value) (`,` type($mask)^)?
  }];
  let hasVerifier = 1;
}

def Tile_AtomicTile : StaticShapeTensorOf<[F32, I32]>;

def Tile_AtomicAddOp : Tile_Op<"atomic_add",
    [MemoryEffects<[MemRead, MemWrite]>, AttrSizedOperandSegments]> {
  let summary = "Add a tile into memory, element by element, atomically; out-of-bounds and masked-off elements are dropped.";
  let description = [{
    For each element of `value` that `tile.store` at the same offsets would write, adds it to
    the element in memory as one atomic read-modify-write (f32: rounded once per add; i32:
    two's-complement wrap). Programs running at once may add into the same elements: the sum
    is exact up to the order of the f32 additions, which is not fixed. No result (a reduction
    into memory, as `red.global.add` on NVIDIA GPUs).

    ```mlir
    tile.atomic_add %dq[%i, %c0], %part : !tile.desc<2, f32>, tensor<64x64xf32>
    tile.atomic_add %n[%c0], %one mask %m : !tile.desc<1, i32>, tensor<1xi32>, tensor<1xi1>
    ```
  }];
  let arguments = (ins Tile_DescType:$desc, Variadic<I32>:$offsets, Tile_AtomicTile:$value,
                       Optional<Tile_MaskTile>:$mask);
  let assemblyFormat = [{
    $desc `[` $offsets `]` `,` $value (`mask` $mask^)? attr-dict `:` qualified(type($desc)) `,`
    type($value) (`,` type($mask)^)?
  }];
  let hasVerifier = 1;
}

def Tile_GatherIndex : AnyTypeOf<[I32, StaticShapeTensorOf<[I32]>]>;

def Tile_GatherOp : Tile_Op<"gather", [MemoryEffects<[MemRead]>]> {
  let summary = "Read a tile of elements at a tile of indices; out-of-range elements get the padding.";
  let description = [{
    Element `e` of the result is `desc[i_0(e), …, i_{r−1}(e)]`, one index per descriptor axis:
    an i32 scalar (the same for every element) or an i32 tile of the result's shape. This is how
    a mask or a score modification reads a tensor it captured (`doc[b, q_idx]`,
    `bias[h, q_idx - kv_idx + n - 1]`). An element whose index lies outside the descriptor's
    shape on any axis is never read; it takes the value `padding` (0 unless given: 0, or false
    once compared), so out-of-range indices are defined behaviour, not out-of-bounds reads.
    `tile.load` reads a contiguous block at scalar offsets; `tile.gather` reads anywhere, one
    element per index.

    ```mlir
    %d = tile.gather %doc[%b, %q] : !tile.desc<2, i32>, i32, tensor<64x64xi32>
        -> tensor<64x64xi32>
    ```
  }];
  let arguments = (ins Tile_DescType:$desc, Variadic<Tile_GatherIndex>:$indices,
                       DefaultValuedAttr<F64Attr, "0.0">:$padding);
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = [{
    $desc `[` $indices `]` attr-dict `:` qualified(type($desc)) `,` type($indices) `->`
    type($result)
  }];
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

//===----------------------------------------------------------------------===//
// Compute
//===----------------------------------------------------------------------===//

def Tile_DotOp : Tile_Op<"dot", [Pure, AllTypesMatch<["acc", "result"]>,
                                 AllElementTypesMatch<["a", "b"]>]> {
  let summary = "Matrix product of two tiles added to an f32 accumulator.";
  let description = [{
    `result = a · b + acc` with `a: M×K`, `b: K×N`, `acc: M×N`. The operands are f8E4M3FN, f16,
    bf16 or f32; products and sums are in f32 (the tensor cores' accumulation), whatever the
    operand type.

    ```mlir
    %s = tile.dot %q, %kt, %zero : tensor<128x128xf16>, tensor<128x64xf16> -> tensor<128x64xf32>
    ```
  }];
  let arguments = (ins TensorRankOf<[F8E4M3FN, F16, BF16, F32], [2]>:$a,
                       TensorRankOf<[F8E4M3FN, F16, BF16, F32], [2]>:$b,
                       TensorRankOf<[F32], [2]>:$acc);
  let results = (outs TensorRankOf<[F32], [2]>:$result);
  let assemblyFormat = [{
    $a `,` $b `,` $acc attr-dict `:` type($a) `,` type($b) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Tile_ReduceOp : Tile_Op<"reduce", [Pure]> {
  let summary = "Reduce a tile along one axis with sum, max or min.";
  let description = [{
    The result drops the reduced axis: a `128×64` tile reduced along axis 1 gives `128`.
    Max of an all-`-inf` row is `-inf`; sum of an empty axis cannot occur (shapes are static).

    ```mlir
    %m = tile.reduce max %s axis 1 : tensor<128x64xf32> -> tensor<128xf32>
    ```
  }];
  let arguments = (ins Tile_ReduceKind:$kind, Tile_Tile:$input,
                       ConfinedAttr<I32Attr, [IntNonNegative]>:$axis);
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = [{
    $kind $input `axis` $axis attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Tile_MulHiUIOp : Tile_Op<"mulhiui", [Pure, Elementwise, SameOperandsAndResultType]> {
  let summary = "The high 32 bits of the unsigned 64-bit products of two i32 tiles.";
  let description = [{
    Element-wise `(zext(a) · zext(b)) >> 32` (Triton's `tl.umulhi`; PTX `mul.hi.u32`): what
    Philox's rounds need, which tiles (no i64) cannot compute from `arith` ops but in 16-bit
    halves. Lowered with the element-wise ops (tile::isElementwiseOp).

    ```mlir
    %hi = tile.mulhiui %a, %b : tensor<64xi32>
    ```
  }];
  let arguments = (ins TensorOf<[I32]>:$lhs, TensorOf<[I32]>:$rhs);
  let results = (outs TensorOf<[I32]>:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def Tile_ScanOp : Tile_Op<"scan", [Pure, SameOperandsAndResultType]> {
  let summary = "Inclusive prefix sums, maxima or minima along one axis.";
  let description = [{
    Element i along `axis` combines the elements 0…i (with `reverse`, i…n−1) with sum, max or
    min; the other axes are independent. Floats accumulate in the element type's order of
    operations, left to right (right to left with `reverse`); integers wrap.

    ```mlir
    %starts = tile.scan sum %lens axis 0 : tensor<64xi32>
    ```
  }];
  let arguments = (ins Tile_ReduceKind:$kind, Tile_Tile:$input,
                       ConfinedAttr<I32Attr, [IntNonNegative]>:$axis, UnitAttr:$reverse);
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = [{
    $kind $input `axis` $axis (`reverse` $reverse^)? attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

def Tile_SplatOp : Tile_Op<"splat", [Pure,
    TypesMatchWith<"element type of the result is the scalar's type",
                   "result", "value", "::llvm::cast<::mlir::ShapedType>($_self).getElementType()">]> {
  let summary = "A tile whose every element is one scalar.";
  let description = [{
    ```mlir
    %start = tile.splat %off : i32 -> tensor<64xi32>
    ```
  }];
  let arguments = (ins Tile_Element:$value);
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = "$value attr-dict `:` type($value) `->` type($result)";
  let hasFolder = 1;
}

def Tile_IotaOp : Tile_Op<"iota", [Pure]> {
  let summary = "The tile 0, 1, …, N−1.";
  let description = [{
    The index arithmetic of masks starts here: `q_idx = splat(start) + iota`.

    ```mlir
    %r = tile.iota : tensor<64xi32>
    ```
  }];
  let results = (outs Tile_Tile1D:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def Tile_ExpandDimsOp : Tile_Op<"expand_dims", [Pure, AllElementTypesMatch<["input", "result"]>]> {
  let summary = "Insert an axis of size 1.";
  let description = [{
    ```mlir
    %col = tile.expand_dims %m axis 1 : tensor<128xf32> -> tensor<128x1xf32>
    ```
  }];
  let arguments = (ins Tile_Tile:$input, ConfinedAttr<I32Attr, [IntNonNegative]>:$axis);
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = "$input `axis` $axis attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Tile_BroadcastOp : Tile_Op<"broadcast", [Pure, AllElementTypesMatch<["input", "result"]>]> {
  let summary = "Repeat a tile along its axes of size 1.";
  let description = [{
    Every axis of the input either has the result's size or size 1; the latter are repeated.

    ```mlir
    %mb = tile.broadcast %col : tensor<128x1xf32> -> tensor<128x64xf32>
    ```
  }];
  let arguments = (ins Tile_Tile:$input);
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Tile_TransOp : Tile_Op<"trans", [Pure, AllElementTypesMatch<["input", "result"]>]> {
  let summary = "Transpose a 2-D tile.";
  let description = [{
    ```mlir
    %kt = tile.trans %k : tensor<64x128xf16> -> tensor<128x64xf16>
    ```
  }];
  let arguments = (ins Tile_Tile2D:$input);
  let results = (outs Tile_Tile2D:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Attention-level ops
//===----------------------------------------------------------------------===//

def Tile_SoftmaxOp : Tile_Op<"softmax", [AllTypesMatch<["input", "result"]>]> {
  let summary = "Softmax along an axis, optionally streamed across the iterations of a loop.";
  let description = [{
    `result = exp(input − M) / L` along `axis`, with `M` the row max and `L = Σ exp(input − M)`;
    `lse = M + log(L)` is the row's natural log-sum-exp. Elements equal to `-inf` are masked: they
    get 0, and a row with every element masked gives 0 everywhere and `lse = -inf` (never NaN).

    With `streamed`, the op sits directly in the body of an `scf.for` whose iterations walk along
    the axis: the row is the concatenation of `input` over *all* iterations, and `result` is this
    iteration's slice of the softmax of that whole row. `lse` is the same at every iteration. This
    is the naive form of attention; `tile-online-softmax` turns it into one streamed pass. The
    input must not depend on the loop's carried values (the row must be known up front).

    ```mlir
    %r = scf.for %j = %c0 to %n step %c64 iter_args(%acc = %zero, %l0 = %ninf) -> (...) : i32 {
      ...
      %p, %lse = tile.softmax %s axis 1 streamed : tensor<128x64xf32> -> tensor<128xf32>
      ...
    }
    ```
  }];
  let arguments = (ins Tile_FloatTile:$input, ConfinedAttr<I32Attr, [IntNonNegative]>:$axis,
                       UnitAttr:$streamed);
  let results = (outs Tile_FloatTile:$result, Tile_FloatTile:$lse);
  let assemblyFormat = [{
    $input `axis` $axis (`streamed` $streamed^)? attr-dict `:` type($input) `->` type($lse)
  }];
  let hasVerifier = 1;
}

#endif // TESSEL_TILE_OPS_TD
