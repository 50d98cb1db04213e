//===- TileDialect.td - the tile dialect and its types ------*- tablegen -*-===//
//
// The tile dialect holds block-level programs: each program instance (one per grid point) works
// on whole tiles, values of ranked tensor type, loaded from and stored to global memory through
// descriptors. It is tessel's equivalent of Triton's TTIR, plus the attention-level ops (a softmax
// streamed across loop iterations) that the online-softmax rewrite needs.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_TILE_DIALECT_TD
#define TESSEL_TILE_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Tile_Dialect : Dialect {
  let name = "tile";
  let cppNamespace = "::tessel::tile";
  let summary = "Block-level tile programs for attention kernels.";
  let description = [{
    A tile program is a `func.func` run once per point of a launch grid. Its values are scalars
    (`i32`, floats) and tiles (ranked tensors with static shape). Global memory is reached only
    through descriptors made from `!tile.ptr` arguments; loads pad and stores drop the elements
    that fall outside the descriptor's shape, so lengths need not be multiples of the block.
    Element-wise math on tiles uses upstream `arith` and `math` ops on tensors.
  }];
  let useDefaultTypePrinterParser = 1;
  let hasConstantMaterializer = 1;
  let extraClassDeclaration = [{
    void registerTypes();
  }];
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

class Tile_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<Tile_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def Tile_PtrType : Tile_Type<"Ptr", "ptr"> {
  let summary = "A pointer to elements in global memory.";
  let description = [{
    The base address of a kernel argument buffer, e.g. `!tile.ptr<f16>`. It has no shape: a
    `tile.make_desc` gives it one.
  }];
  let parameters = (ins "::mlir::Type":$elementType);
  let assemblyFormat = "`<` $elementType `>`";
}

def Tile_DescType : Tile_Type<"Desc", "desc"> {
  let summary = "A global tensor descriptor: base pointer, shape and strides.";
  let description = [{
    `!tile.desc<2, f16>` describes a rank-2 view of global memory. Its shape bounds every access:
    loads outside it give the padding value, stores outside it are dropped.
  }];
  let parameters = (ins "unsigned":$rank, "::mlir::Type":$elementType);
  let assemblyFormat = "`<` $rank `,` $elementType `>`";
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Tile_ReduceKind : I32EnumAttr<"ReduceKind", "the combining function of a reduction", [
    I32EnumAttrCase<"Sum", 0, "sum">,
    I32EnumAttrCase<"Max", 1, "max">,
    I32EnumAttrCase<"Min", 2, "min">]> {
  let cppNamespace = "::tessel::tile";
}

#endif // TESSEL_TILE_DIALECT_TD
