//===- TileGPUDialect.td - the GPU level: layouts, shared memory --*- tablegen -*-===//
//
// tilegpu is the level between tile programs and NVVM where every decision that makes a kernel
// fast is written in IR: the distribution of each tile over the threads (a layout attribute on
// its tensor type), the shared-memory buffers with their stages and swizzle, and the async
// copies, local loads, layout conversions and MMA instructions that move data between them.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_TILEGPU_DIALECT_TD
#define TESSEL_TILEGPU_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def TileGPU_Dialect : Dialect {
  let name = "tilegpu";
  let cppNamespace = "::tessel::tilegpu";
  let summary = "The GPU level of tile programs: layouts, shared memory, async copies, MMA.";
  let description = [{
    A tile program at this level is still a `func.func` of tile values, but each tensor type
    carries a layout encoding that says which thread holds which element (`#tilegpu.mma`,
    `#tilegpu.slice`, `#tilegpu.dot_operand`, `#tilegpu.blocked`), blocks that pass through
    shared memory are `!tilegpu.smem` buffers, and the data movement between global memory,
    shared memory and registers is explicit (`tilegpu.async_copy`, `tilegpu.local_load`,
    `tilegpu.convert_layout`), as are the tensor-core instructions (`tilegpu.mma`,
    `tilegpu.wgmma` with `tilegpu.wgmma_wait`). docs/dev/codegen.md shows the levels.
  }];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  let extraClassDeclaration = [{
    void registerAttributes();
    void registerTypes();
  }];
}

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def TileGPU_MmaKind : I32EnumAttr<"MmaKind", "the tensor-core instruction family", [
    I32EnumAttrCase<"MmaSync", 0, "mma_sync">,
    I32EnumAttrCase<"Wgmma", 1, "wgmma">]> {
  let cppNamespace = "::tessel::tilegpu";
  let genSpecializedAttr = 0;
}

//===----------------------------------------------------------------------===//
// Layouts (encodings of tensor types)
//===----------------------------------------------------------------------===//

class TileGPU_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<TileGPU_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def TileGPU_MmaEncoding : TileGPU_Attr<"MmaEncoding", "mma"> {
  let summary = "The accumulator layout of mma.sync.m16n8k16 or wgmma.m64nNk16.";
  let description = [{
    A 2-D tile of `warps · warp_rows` rows spread over `warps` warps, each owning `warp_rows`
    consecutive rows as `warp_rows / 16` m16 tiles. In an m16 tile, lane `l` holds rows `l / 4`
    and `l / 4 + 8` and columns `2·(l % 4)` and `2·(l % 4) + 1` of every 8-column slab: four
    registers per slab (PTX ISA 9.7.14.5.14, "Matrix Fragments for mma.m16n8k16"). wgmma's
    m64nNk16 accumulator is the same per warp, the four warps of a warpgroup taking 16 rows each
    (PTX ISA 9.7.15.5.1.1), so `wgmma` needs `warp_rows = 16` and whole warpgroups.

    ```mlir
    tensor<64x128xf32, #tilegpu.mma<mma_sync, warps = 4, warp_rows = 16>>
    tensor<128x64xf32, #tilegpu.mma<wgmma, warps = 8, warp_rows = 16>>
    ```
  }];
  let parameters = (ins EnumParameter<TileGPU_MmaKind>:$kind, "int64_t":$warps,
                        "int64_t":$warpRows);
  let assemblyFormat = "`<` $kind `,` `warps` `=` $warps `,` `warp_rows` `=` $warpRows `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Rows of the CTA's tile: warps · warp_rows.
    int64_t getBlockRows() const { return getWarps() * getWarpRows(); }
    /// m16 tiles per warp.
    int64_t getMTiles() const { return getWarpRows() / 16; }
  }];
}

def TileGPU_SliceEncoding : TileGPU_Attr<"SliceEncoding", "slice"> {
  let summary = "A row or column vector of an mma or blocked tile: the parent with one dim removed.";
  let description = [{
    `dim = 1` removes the columns: a value per row of the parent (`[M]` or `[M, 1]`), held by
    the threads that hold that row — two registers per m16 tile (rows `l / 4` and `l / 4 + 8`);
    one per row slot of a `#tilegpu.blocked` parent.
    `dim = 0` removes the rows: a value per column (`[N]` or `[1, N]`), held by every thread
    that holds that column — two registers per 8-column slab. Reductions along a row produce
    `dim = 1` slices; broadcasts read them.

    ```mlir
    tensor<64xf32, #tilegpu.slice<dim = 1, parent = #tilegpu.mma<mma_sync, warps = 4, warp_rows = 16>>>
    ```
  }];
  let parameters = (ins "unsigned":$dim, "::mlir::Attribute":$parent);
  let assemblyFormat = "`<` `dim` `=` $dim `,` `parent` `=` $parent `>`";
  let genVerifyDecl = 1;
}

def TileGPU_DotOperandEncoding : TileGPU_Attr<"DotOperandEncoding", "dot_operand"> {
  let summary = "An A or B operand of the parent mma layout, in registers.";
  let description = [{
    `operand = 0`: the A fragments of mma.sync.m16n8k16 (and of wgmma with A from registers):
    per m16 tile and k step of 16, four b32 registers of two 16-bit elements each, in the order
    ldmatrix.x4 delivers them. `operand = 1`: the B fragments of mma.sync (two b32 registers per
    8 columns and k step); wgmma reads B from shared memory instead (`tilegpu.wgmma`).

    ```mlir
    tensor<64x64xf16, #tilegpu.dot_operand<operand = 0, parent = #tilegpu.mma<wgmma, warps = 4, warp_rows = 16>>>
    ```
  }];
  let parameters = (ins "unsigned":$operand, "MmaEncodingAttr":$parent);
  let assemblyFormat = "`<` `operand` `=` $operand `,` `parent` `=` qualified($parent) `>`";
  let genVerifyDecl = 1;
}

def TileGPU_BlockedEncoding : TileGPU_Attr<"BlockedEncoding", "blocked"> {
  let summary = "Rows split over threads in vectors of contiguous elements (no tensor cores).";
  let description = [{
    The register layout of tile programs without dots (`tilegpu-assign-blocked`,
    `convert-tile-to-blocked`). A row is cut in vectors of `vector` contiguous elements dealt
    to `threads_per_row` threads in turn; the CTA's `threads` threads cover
    `threads / threads_per_row` rows at once and step down the tile by that many. Thread
    `t = tr · threads_per_row + tc` holds, for row slot `s`, vector `j` and element `e`, the
    element `(s · rows_per_pass + tr, (j · threads_per_row + tc) · vector + e)`; a tile with
    fewer rows than `rows_per_pass` is repeated over the extra threads. A warp's vectors are
    consecutive in a row, so its loads and stores coalesce, and a row's threads are
    consecutive, so a reduction along it is a fold, shuffles and, past a warp, one exchange
    through shared memory. Row and column vectors of a blocked tile are
    `#tilegpu.slice<dim = 1 | 0, parent = #tilegpu.blocked<…>>`. The reference lowering's
    round-robin (element i of the row-major tile on thread i mod T) is the case `vector = 1`,
    `threads_per_row = min(T, C)`.

    ```mlir
    tensor<4x8192xf32, #tilegpu.blocked<threads = 512, vector = 8, threads_per_row = 512>>
    ```
  }];
  let parameters = (ins "int64_t":$threads, "int64_t":$vector, "int64_t":$threadsPerRow);
  let assemblyFormat = "`<` `threads` `=` $threads `,` `vector` `=` $vector `,` "
                       "`threads_per_row` `=` $threadsPerRow `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Rows the threads cover at once.
    int64_t getRowsPerPass() const { return getThreads() / getThreadsPerRow(); }
  }];
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

class TileGPU_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<TileGPU_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def TileGPU_SharedBufferType : TileGPU_Type<"SharedBuffer", "smem"> {
  let summary = "A block in shared memory: shape, element type, ring stages and swizzle.";
  let description = [{
    `stages` copies of a `shape` block, one after the other (a ring for software pipelining:
    iteration `j` reads stage `j % stages` while later iterations' copies land in the others).
    `swizzle` is the XOR swizzle of 16-byte chunks, in bytes: 0 (none), or 32, 64, 128 — the
    chunk index within a `swizzle`-byte row span is XORed with `swizzle / 16` bits of the
    address from bit 7 up (wgmma's and TMA's swizzle modes), so that the eight row addresses
    of an ldmatrix (or a wgmma core matrix) fall in distinct banks: with 128-byte rows the
    row's index modulo 8; with rows as wide as the swizzle (64 or 32 bytes: an FP8 block of
    64 or 32 keys kept transposed) bits 1-2 or bit 2 of the row. With `swizzle = 128` and rows
    wider than 128 bytes the block is stored as 128-byte-wide slabs, one after the other
    (wgmma's K-major/N-major layout).

    ```mlir
    !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128>
    ```
  }];
  let parameters = (ins ArrayRefParameter<"int64_t">:$shape, "::mlir::Type":$elementType,
                        "int64_t":$stages, "int64_t":$swizzle);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Bytes of one stage.
    int64_t getStageBytes() const;
    /// Bytes of every stage.
    int64_t getBytes() const { return getStageBytes() * getStages(); }
  }];
}

def TileGPU_AsyncTokenType : TileGPU_Type<"AsyncToken", "token"> {
  let summary = "Names asynchronous work in flight (copies, a commit group).";
  let description = [{
    Returned by `tilegpu.async_copy` and `tilegpu.async_commit`, consumed by
    `tilegpu.async_wait`: the wait names the groups it waits for, so the order between a copy
    and the reads of its buffer is in the IR's use-def chains, not in the op order alone.
  }];
}

#endif // TESSEL_TILEGPU_DIALECT_TD
