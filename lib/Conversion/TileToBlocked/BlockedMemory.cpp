//===- BlockedMemory.cpp - loads and stores of row-blocked tiles -------------------===//
//
// Each thread moves its vectors of V contiguous elements: one V-wide load or store where the
// whole vector lies inside the descriptor, the inner stride is 1 and the address is aligned to
// the vector (checked at run time: descriptors carry run-time strides and offsets); element by
// element, with the bounds and the padding of the reference lowering, otherwise. Threads that
// repeat rows (R smaller than the rows the threads cover) and copies of a row or column value
// held by several threads store nothing.
//
//===------------------------------------------------------------------------------------===//

#include "BlockedKernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include "llvm/ADT/StringExtras.h"

namespace tessel::blocked {

namespace {

using tessel::conversion::LoweredDesc;

Value elementPtr(OpBuilder &b, Location loc, const LoweredDesc &d, Value address) {
  auto ptrType = LLVM::LLVMPointerType::get(b.getContext(), 1);
  return LLVM::GEPOp::create(b, loc, ptrType, d.elementType, d.base, ValueRange{address});
}

Value inRange(OpBuilder &b, Location loc, Value g, Value size) {
  Value zero = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0));
  return arith::AndIOp::create(b, loc,
                               arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, g, zero),
                               arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, g, size));
}

/// One vector of a block: where its first element is and whether the V-wide access may be used.
/// The bounds are on indices (g, the inner index of element 0, and g + e), not addresses, so
/// "some element in bounds" and "all in bounds" are two comparisons each whatever the stride;
/// the per-element bits are made only where an element-wise access needs them.
struct VectorAt {
  Value address;     // i64 element offset of element 0
  Value vectorOk;    // i1: all in bounds, inner stride 1, aligned
  Value anyOk;       // i1: some element in bounds
  Value rowOk;       // i1: the row is in bounds (true for 1-D descriptors)
  Value index, size; // i64: the inner index of element 0, the inner extent
  Value innerStride; // i64
};

Value constI64(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
}

/// Whether element `e` of `at` is in bounds.
Value elementOk(OpBuilder &b, Location loc, const VectorAt &at, int64_t e) {
  Value g = e ? Value(arith::AddIOp::create(b, loc, at.index, constI64(b, loc, e))) : at.index;
  return arith::AndIOp::create(b, loc, at.rowOk, inRange(b, loc, g, at.size));
}

/// The vector at block indices (row, col0) of `d` (1-D descriptors: col0 only) plus `offsets`.
VectorAt vectorAt(OpBuilder &b, Location loc, const LoweredDesc &d, ArrayRef<Value> offsets,
                  Value row, Value col0, int64_t V) {
  auto i64 = b.getI64Type();
  auto ext = [&](Value v) { return arith::ExtSIOp::create(b, loc, i64, v); };
  auto cmp = [&](arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y);
  };
  auto both = [&](Value x, Value y) { return arith::AndIOp::create(b, loc, x, y); };
  VectorAt at;
  at.rowOk = arith::ConstantOp::create(b, loc, b.getBoolAttr(true));
  at.address = d.offset;
  size_t inner = d.shape.size() - 1;
  if (d.shape.size() == 2) {
    Value g = arith::AddIOp::create(b, loc, offsets[0], ext(row));
    at.rowOk = inRange(b, loc, g, d.shape[0]);
    if (d.pages) {
      auto [physical, exists] = tessel::conversion::pagedRow(b, loc, *d.pages, g);
      g = physical;
      at.rowOk = both(at.rowOk, exists);
    }
    at.address = arith::AddIOp::create(b, loc, at.address,
                                       arith::MulIOp::create(b, loc, g, d.strides[0]));
  }
  at.index = arith::AddIOp::create(b, loc, offsets[inner], ext(col0));
  at.size = d.shape[inner];
  at.innerStride = d.strides[inner];
  at.address = arith::AddIOp::create(b, loc, at.address,
                                     arith::MulIOp::create(b, loc, at.index, at.innerStride));
  Value zero = constI64(b, loc, 0);
  Value last = V > 1 ? Value(arith::AddIOp::create(b, loc, at.index, constI64(b, loc, V - 1)))
                     : at.index;
  at.anyOk = both(at.rowOk, both(cmp(arith::CmpIPredicate::sge, last, zero),
                                 cmp(arith::CmpIPredicate::slt, at.index, at.size)));
  if (V == 1) {
    at.vectorOk = arith::ConstantOp::create(b, loc, b.getBoolAttr(false));
    return at;
  }
  Value allIn = both(at.rowOk, both(cmp(arith::CmpIPredicate::sge, at.index, zero),
                                    cmp(arith::CmpIPredicate::slt, last, at.size)));
  // Accesses of at most 16 bytes: a wider vector needs each 16-byte piece aligned.
  int64_t bytes = std::min<int64_t>(
      16, V * std::max<int64_t>(1, d.elementType.getIntOrFloatBitWidth() / 8));
  Value unit = cmp(arith::CmpIPredicate::eq, at.innerStride, constI64(b, loc, 1));
  Value addr = LLVM::PtrToIntOp::create(b, loc, i64, elementPtr(b, loc, d, at.address));
  Value aligned = cmp(arith::CmpIPredicate::eq,
                      arith::AndIOp::create(b, loc, addr, constI64(b, loc, bytes - 1)), zero);
  at.vectorOk = both(allIn, both(unit, aligned));
  return at;
}

/// The address of element `e` of the vector `at`.
Value elementAddress(OpBuilder &b, Location loc, const VectorAt &at, int64_t e) {
  if (e == 0)
    return at.address;
  return arith::AddIOp::create(
      b, loc, at.address,
      arith::MulIOp::create(b, loc, at.innerStride,
                            arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(e))));
}

/// The register a memory word of an element of `bits` bits travels in: its integer type, the
/// inline-asm constraint and the PTX type of the access (bytes as the low half of a 16-bit
/// register: PTX has no 8-bit registers).
struct Word {
  Type type;
  StringRef constraint, ptxType;
};

Word wordOf(OpBuilder &b, unsigned bits) {
  if (bits <= 8)
    return {b.getI16Type(), "h", "u8"};
  if (bits == 16)
    return {b.getI16Type(), "h", "b16"};
  if (bits == 32)
    return {b.getI32Type(), "r", "b32"};
  return {b.getI64Type(), "l", "b64"};
}

/// `value` (of the element type `t`) as its memory word, and back.
Value toWord(OpBuilder &b, Location loc, Value value, const Word &w) {
  unsigned bits = value.getType().getIntOrFloatBitWidth();
  if (isa<FloatType>(value.getType()))
    value = arith::BitcastOp::create(b, loc, b.getIntegerType(bits), value);
  if (bits < w.type.getIntOrFloatBitWidth())
    value = arith::ExtUIOp::create(b, loc, w.type, value);
  return value;
}

Value fromWord(OpBuilder &b, Location loc, Value word, Type t) {
  unsigned bits = t.getIntOrFloatBitWidth();
  if (bits < word.getType().getIntOrFloatBitWidth())
    word = arith::TruncIOp::create(b, loc, b.getIntegerType(bits), word);
  if (isa<FloatType>(t))
    word = arith::BitcastOp::create(b, loc, t, word);
  return word;
}

/// The bits of `padding` as an element of `t`, zero-extended to 64.
uint64_t paddingBits(Type t, double padding) {
  if (auto ft = dyn_cast<FloatType>(t)) {
    bool lost;
    APFloat v(padding);
    v.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
    return v.bitcastToAPInt().getZExtValue();
  }
  unsigned bits = t.getIntOrFloatBitWidth();
  uint64_t v = static_cast<uint64_t>(static_cast<int64_t>(padding));
  return bits >= 64 ? v : v & ((uint64_t(1) << bits) - 1);
}

/// Whether `at` may be read or written as whole 32-bit words (V elements of at least a byte,
/// a multiple of 4 bytes).
bool wordsWide(Type t, int64_t V) {
  unsigned bits = t.getIntOrFloatBitWidth();
  return V > 1 && bits >= 8 && (V * bits) % 32 == 0 && llvm::isPowerOf2_64(V * bits / 32);
}

/// The vector `at` as 32-bit words: predicated 16-byte (or narrower) accesses, each given by
/// `access(ptr, words)` at its byte offset from element 0.
template <typename Fn>
void forEachChunk(OpBuilder &b, Location loc, const LoweredDesc &d, const VectorAt &at, int64_t V,
                  Fn access) {
  int64_t eb = d.elementType.getIntOrFloatBitWidth() / 8;
  int64_t words = V * eb / 4;
  for (int64_t w0 = 0; w0 < words; w0 += 4) {
    Value elem = arith::AddIOp::create(
        b, loc, at.address, arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(w0 * 4 / eb)));
    access(elementPtr(b, loc, d, elem), w0, std::min<int64_t>(4, words - w0));
  }
}

/// "{$first, ..., $(first+n-1)}" or "$first" for one.
std::string regList(int64_t first, int64_t n) {
  if (n == 1)
    return "$" + std::to_string(first);
  std::string s = "{";
  for (int64_t i = 0; i < n; ++i)
    s += (i ? ", $" : "$") + std::to_string(first + i);
  return s + "}";
}

/// A PTX integer literal.
std::string hex(uint64_t v) { return "0x" + llvm::utohexstr(v) + (v >> 63 ? "U" : ""); }

std::string vecSuffix(int64_t n) { return n == 1 ? "" : ".v" + std::to_string(n); }

Value constI32(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
}

Value notOf(OpBuilder &b, Location loc, Value v) {
  return arith::XOrIOp::create(b, loc, v, arith::ConstantOp::create(b, loc, b.getBoolAttr(true)));
}

/// `elements` (V of the element type) as V · bytes / 4 32-bit words, and back.
SmallVector<Value> packWords(OpBuilder &b, Location loc, ArrayRef<Value> elements) {
  Type t = elements.front().getType();
  int64_t V = elements.size();
  Value vec = LLVM::PoisonOp::create(b, loc, VectorType::get({V}, t));
  for (auto [e, v] : llvm::enumerate(elements))
    vec = LLVM::InsertElementOp::create(b, loc, vec, v, constI32(b, loc, e));
  int64_t n = V * static_cast<int64_t>(t.getIntOrFloatBitWidth()) / 32;
  vec = LLVM::BitcastOp::create(b, loc, VectorType::get({n}, b.getI32Type()), vec);
  SmallVector<Value> words;
  for (int64_t i = 0; i < n; ++i)
    words.push_back(LLVM::ExtractElementOp::create(b, loc, vec, constI32(b, loc, i)));
  return words;
}

SmallVector<Value> unpackWords(OpBuilder &b, Location loc, ArrayRef<Value> words, Type t) {
  int64_t V = static_cast<int64_t>(words.size()) * 32 / t.getIntOrFloatBitWidth();
  Value vec = LLVM::PoisonOp::create(b, loc,
                                     VectorType::get({(int64_t)words.size()}, b.getI32Type()));
  for (auto [i, w] : llvm::enumerate(words))
    vec = LLVM::InsertElementOp::create(b, loc, vec, w, constI32(b, loc, i));
  vec = LLVM::BitcastOp::create(b, loc, VectorType::get({V}, t), vec);
  SmallVector<Value> elements;
  for (int64_t e = 0; e < V; ++e)
    elements.push_back(LLVM::ExtractElementOp::create(b, loc, vec, constI32(b, loc, e)));
  return elements;
}

/// The element of `d` at element offset `address` where `ok` holds, else the padding (nothing
/// read): a predicated load.
Value readAt(OpBuilder &b, Location loc, const LoweredDesc &d, Value address, Value ok,
             double padding) {
  Type t = d.elementType;
  Word w = wordOf(b, t.getIntOrFloatBitWidth());
  std::string text = ("mov.b" + Twine(w.type.getIntOrFloatBitWidth()) + " $0, " +
                      hex(paddingBits(t, padding)) + ";\n\t@$1 ld.global." + w.ptxType +
                      " $0, [$2];")
                         .str();
  Value word = tessel::conversion::inlinePtx(b, loc, w.type, {ok, elementPtr(b, loc, d, address)},
                                             text, ("=" + w.constraint + ",b,l").str())
                   .front();
  return fromWord(b, loc, word, t);
}

/// Element `e` of `at` where `ok` holds, else the padding.
Value readElement(OpBuilder &b, Location loc, const LoweredDesc &d, const VectorAt &at, int64_t e,
                  Value ok, double padding) {
  return readAt(b, loc, d, elementAddress(b, loc, at, e), ok, padding);
}

/// The 32-bit words of the vector `at`, read where `at.vectorOk` holds by predicated loads of
/// up to 16 bytes; else the padding.
SmallVector<Value> readWords(OpBuilder &b, Location loc, const LoweredDesc &d, const VectorAt &at,
                             int64_t V, double padding) {
  Type t = d.elementType;
  unsigned bw = t.getIntOrFloatBitWidth();
  uint64_t bits = paddingBits(t, padding);
  // Word j of a vector of paddings: the element repeated, or a half of a 64-bit one.
  auto padWord = [&](int64_t j) {
    if (bw == 64)
      return j % 2 ? bits >> 32 : bits & 0xffffffffu;
    uint64_t word = 0;
    for (unsigned i = 0; i < 32 / bw; ++i)
      word |= bits << (i * bw);
    return word;
  };
  SmallVector<Value> words;
  forEachChunk(b, loc, d, at, V, [&](Value ptr, int64_t w0, int64_t n) {
    std::string text, constraints;
    for (int64_t i = 0; i < n; ++i) {
      text += "mov.b32 $" + std::to_string(i) + ", " + hex(padWord(w0 + i)) + ";\n\t";
      constraints += "=r,";
    }
    text += "@$" + std::to_string(n) + " ld.global" + vecSuffix(n) + ".b32 " + regList(0, n) +
            ", [$" + std::to_string(n + 1) + "];";
    llvm::append_range(
        words, tessel::conversion::inlinePtx(b, loc, SmallVector<Type>(n, b.getI32Type()),
                                             {at.vectorOk, ptr}, text, constraints + "b,l"));
  });
  return words;
}

/// The elements of the vectors `ats` (widths `widths`) of one tile load. Nothing waits for
/// data before every vector is in flight: the vector loads come first, predicated, without a
/// branch; the vectors that could not be read whole (out of the bounds in part, a stride, an
/// unaligned address) and have an element in bounds are read element by element in one branch
/// that the common case skips, merging into the same words, which are unpacked only after it.
/// (Vectors wholly out of bounds keep the padding: a block wider than the rows, C = 10000 in
/// 16384 columns, takes no branch.)
SmallVector<Value> readSlots(OpBuilder &b, Location loc, const LoweredDesc &d,
                             ArrayRef<VectorAt> ats, ArrayRef<int64_t> widths, double padding) {
  Type t = d.elementType;
  SmallVector<SmallVector<Value>> words(ats.size());
  SmallVector<Value> flat, perSlot(ats.size());
  Value needed = arith::ConstantOp::create(b, loc, b.getBoolAttr(false));
  for (auto [i, at] : llvm::enumerate(ats)) {
    if (!wordsWide(t, widths[i]))
      continue;
    words[i] = readWords(b, loc, d, at, widths[i], padding);
    llvm::append_range(flat, words[i]);
    perSlot[i] = arith::AndIOp::create(b, loc, notOf(b, loc, at.vectorOk), at.anyOk);
    needed = arith::OrIOp::create(b, loc, needed, perSlot[i]);
  }
  if (!flat.empty()) {
    // Inside, a branch a vector: the vectors read whole pass through without being read here
    // (a select would wait for their data).
    auto ifOp = scf::IfOp::create(b, loc, TypeRange(ValueRange(flat)), needed, true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    SmallVector<Value> merged;
    for (auto [i, at] : llvm::enumerate(ats)) {
      if (words[i].empty())
        continue;
      auto one = scf::IfOp::create(b, loc, TypeRange(ValueRange(words[i])), perSlot[i], true);
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(one.thenBlock());
      SmallVector<Value> elements;
      for (int64_t e = 0; e < widths[i]; ++e)
        elements.push_back(readElement(b, loc, d, at, e, elementOk(b, loc, at, e), padding));
      scf::YieldOp::create(b, loc, packWords(b, loc, elements));
      b.setInsertionPointToStart(one.elseBlock());
      scf::YieldOp::create(b, loc, words[i]);
      llvm::append_range(merged, one.getResults());
    }
    scf::YieldOp::create(b, loc, merged);
    b.setInsertionPointToStart(ifOp.elseBlock());
    scf::YieldOp::create(b, loc, flat);
    b.setInsertionPointAfter(ifOp);
    unsigned next = 0;
    for (SmallVector<Value> &ws : words)
      for (Value &w : ws)
        w = ifOp.getResult(next++);
  }
  SmallVector<Value> out;
  for (auto [i, at] : llvm::enumerate(ats)) {
    if (!words[i].empty()) {
      llvm::append_range(out, unpackWords(b, loc, words[i], t));
      continue;
    }
    for (int64_t e = 0; e < widths[i]; ++e)
      out.push_back(readElement(b, loc, d, at, e, elementOk(b, loc, at, e), padding));
  }
  return out;
}

/// Writes `values` at `at` where `ok` holds, one element: a predicated store.
void writeElement(OpBuilder &b, Location loc, const LoweredDesc &d, const VectorAt &at, int64_t e,
                  Value value, Value ok) {
  Word w = wordOf(b, d.elementType.getIntOrFloatBitWidth());
  tessel::conversion::inlinePtx(
      b, loc, {},
      {toWord(b, loc, value, w), ok, elementPtr(b, loc, d, elementAddress(b, loc, at, e))},
      ("@$1 st.global." + w.ptxType + " [$2], $0;").str(), (w.constraint + ",b,l").str());
}

/// Writes the vectors `ats` of one tile store, the values `values` (each vector's elements in
/// turn), where `store` holds and the element's `mask` bit (if any) is set: whole vectors by
/// predicated stores of up to 16 bytes, the others element by element in one branch that the
/// common case skips.
void writeSlots(OpBuilder &b, Location loc, const LoweredDesc &d, ArrayRef<VectorAt> ats,
                ArrayRef<int64_t> widths, ArrayRef<Value> values, ArrayRef<Value> mask,
                Value store) {
  Type t = d.elementType;
  SmallVector<Value> whole;
  Value needed = arith::ConstantOp::create(b, loc, b.getBoolAttr(false));
  int64_t first = 0;
  for (auto [i, at] : llvm::enumerate(ats)) {
    int64_t V = widths[i];
    ArrayRef<Value> vals = values.slice(first, V);
    Value all = arith::AndIOp::create(b, loc, store, at.vectorOk);
    for (Value m : mask.empty() ? ArrayRef<Value>() : mask.slice(first, V))
      all = arith::AndIOp::create(b, loc, all, m);
    whole.push_back(all);
    first += V;
    if (!wordsWide(t, V))
      continue;
    needed = arith::OrIOp::create(
        b, loc, needed,
        arith::AndIOp::create(b, loc, arith::AndIOp::create(b, loc, store, notOf(b, loc, all)),
                              at.anyOk));
    SmallVector<Value> words = packWords(b, loc, vals);
    forEachChunk(b, loc, d, at, V, [&](Value ptr, int64_t w0, int64_t n) {
      SmallVector<Value> operands(words.begin() + w0, words.begin() + w0 + n);
      operands.append({all, ptr});
      std::string constraints;
      for (int64_t k = 0; k < n; ++k)
        constraints += "r,";
      tessel::conversion::inlinePtx(b, loc, {}, operands,
                                    "@$" + std::to_string(n) + " st.global" + vecSuffix(n) +
                                        ".b32 [$" + std::to_string(n + 1) + "], " + regList(0, n) +
                                        ";",
                                    constraints + "b,l");
    });
  }
  // Element by element: the narrow vectors always, the wide ones that could not be written
  // whole inside the branch.
  auto elements = [&](bool wide) {
    int64_t first = 0;
    for (auto [i, at] : llvm::enumerate(ats)) {
      int64_t V = widths[i];
      if (wordsWide(t, V) == wide)
        for (int64_t e = 0; e < V; ++e) {
          Value ok = arith::AndIOp::create(b, loc, store, elementOk(b, loc, at, e));
          if (wide)
            ok = arith::AndIOp::create(b, loc, ok, notOf(b, loc, whole[i]));
          if (!mask.empty())
            ok = arith::AndIOp::create(b, loc, ok, mask[first + e]);
          writeElement(b, loc, d, at, e, values[first + e], ok);
        }
      first += V;
    }
  };
  elements(false);
  if (llvm::any_of(widths, [&](int64_t V) { return wordsWide(t, V); })) {
    auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, needed, false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    elements(true);
  }
}

} // namespace

SmallVector<BlockedKernelBuilder::VectorSlot> BlockedKernelBuilder::vectorSlots(Kind k) {
  SmallVector<VectorSlot> slots;
  if (k == Kind::Row) {
    for (int64_t s = 0; s < L.rowSlots; ++s)
      slots.push_back({rowOf(s), ci32(0), 1, s});
    return slots;
  }
  for (int64_t s = 0; s < (k == Kind::Tile ? L.rowSlots : 1); ++s) {
    Value row = k == Kind::Tile ? rowOf(s) : ci32(0);
    for (int64_t j = 0; j < L.colChunks; ++j)
      slots.push_back(
          {row, colOf(j, 0), L.vector, k == Kind::Tile ? L.tileIndex(s, j, 0) : j * L.vector});
  }
  return slots;
}

namespace {

/// The lowered descriptor of `op` and its offsets as i64, or the error at `op`.
FailureOr<std::pair<LoweredDesc, SmallVector<Value>>>
placeOf(OpBuilder &b, Operation *op, Value desc, ValueRange offsets,
        const DenseMap<Value, LoweredDesc> &descs, const IRMapping &scalars) {
  auto it = descs.find(desc);
  if (it == descs.end())
    return op->emitOpError("uses a descriptor convert-tile-to-blocked cannot trace to a "
                           "tile.make_desc");
  SmallVector<Value> out;
  for (Value v : offsets)
    out.push_back(tessel::conversion::toI64(b, op->getLoc(), scalars.lookup(v)));
  return std::make_pair(it->second, out);
}

/// The vector `slot` of a tile of rank `rank` in `k`: a 1-D descriptor is indexed by the row
/// (Row) or the column.
VectorAt slotAt(OpBuilder &b, Location loc, const LoweredDesc &d, ArrayRef<Value> offsets,
                int64_t rank, Kind k, Value row, Value col, int64_t width) {
  if (rank == 2)
    return vectorAt(b, loc, d, offsets, row, col, width);
  return vectorAt(b, loc, d, offsets, Value(), k == Kind::Row ? row : col, width);
}

/// Adds `values` (the vectors `ats` in turn) into memory element by element with
/// red.global.add, where `store`, the element's bounds and its `mask` bit hold.
void addSlots(OpBuilder &b, Location loc, const LoweredDesc &d, ArrayRef<VectorAt> ats,
              ArrayRef<int64_t> widths, ArrayRef<Value> values, ArrayRef<Value> mask, Value store) {
  bool f32 = d.elementType.isF32();
  int64_t first = 0;
  for (auto [i, at] : llvm::enumerate(ats)) {
    for (int64_t e = 0; e < widths[i]; ++e) {
      Value ok = arith::AndIOp::create(b, loc, store, elementOk(b, loc, at, e));
      if (!mask.empty())
        ok = arith::AndIOp::create(b, loc, ok, mask[first + e]);
      tessel::conversion::inlinePtx(
          b, loc, {}, {values[first + e], ok, elementPtr(b, loc, d, elementAddress(b, loc, at, e))},
          f32 ? "@$1 red.global.add.f32 [$2], $0;" : "@$1 red.global.add.s32 [$2], $0;",
          f32 ? "f,b,l" : "r,b,l");
    }
    first += widths[i];
  }
}

} // namespace

FailureOr<SmallVector<Value>> BlockedKernelBuilder::loadRegs(tile::LoadOp op, Kind k) {
  Location loc = op.getLoc();
  auto place = placeOf(b, op, op.getDesc(), op.getOffsets(), descs, scalars);
  if (failed(place))
    return failure();
  auto &[d, offsets] = *place;
  double padding = op.getPadding().convertToDouble();
  int64_t rank = op.getResult().getType().getRank();
  SmallVector<VectorAt> ats;
  SmallVector<int64_t> widths;
  for (const VectorSlot &v : vectorSlots(k)) {
    ats.push_back(slotAt(b, loc, d, offsets, rank, k, v.row, v.col, v.width));
    widths.push_back(v.width);
  }
  return readSlots(b, loc, d, ats, widths, padding);
}

FailureOr<SmallVector<Value>> BlockedKernelBuilder::gatherRegs(tile::GatherOp op, Kind k) {
  Location loc = op.getLoc();
  auto it = descs.find(op.getDesc());
  if (it == descs.end())
    return op.emitOpError("uses a descriptor convert-tile-to-blocked cannot trace to a "
                          "tile.make_desc");
  const LoweredDesc &d = it->second;
  if (d.pages)
    return op.emitOpError("gathers from a paged descriptor: convert-tile-to-blocked does not "
                          "lower it");
  // Scalar indices once: their bound checks and their part of the address.
  Value fixedOk = arith::ConstantOp::create(b, loc, b.getBoolAttr(true));
  Value fixedAddress = d.offset;
  SmallVector<std::pair<Value, size_t>> perElement; // (index tile, axis)
  for (auto [axis, index] : llvm::enumerate(op.getIndices())) {
    if (isa<RankedTensorType>(index.getType())) {
      if (static_cast<int64_t>(regsOf(index, k).size()) != L.count(k))
        return op.emitOpError("reads an index tile convert-tile-to-blocked has not computed in "
                              "the layout of its result");
      perElement.push_back({index, axis});
      continue;
    }
    Value g = tessel::conversion::toI64(b, loc, scalars.lookup(index));
    fixedOk = arith::AndIOp::create(b, loc, fixedOk, inRange(b, loc, g, d.shape[axis]));
    fixedAddress = arith::AddIOp::create(b, loc, fixedAddress,
                                         arith::MulIOp::create(b, loc, g, d.strides[axis]));
  }
  double padding = op.getPadding().convertToDouble();
  SmallVector<Value> out;
  for (int64_t i = 0, n = L.count(k); i < n; ++i) {
    Value ok = fixedOk, address = fixedAddress;
    for (auto [index, axis] : perElement) {
      Value g = tessel::conversion::toI64(b, loc, regsOf(index, k)[i]);
      ok = arith::AndIOp::create(b, loc, ok, inRange(b, loc, g, d.shape[axis]));
      address = arith::AddIOp::create(b, loc, address,
                                      arith::MulIOp::create(b, loc, g, d.strides[axis]));
    }
    out.push_back(readAt(b, loc, d, address, ok, padding));
  }
  return out;
}

template <typename WriteOp>
LogicalResult BlockedKernelBuilder::emitStore(WriteOp op) {
  Location loc = op.getLoc();
  auto place = placeOf(b, op, op.getDesc(), op.getOffsets(), descs, scalars);
  if (failed(place))
    return failure();
  auto &[d, offsets] = *place;
  int64_t rank = cast<RankedTensorType>(op.getValue().getType()).getRank();
  auto found = kinds.find(op.getValue());
  if (found == kinds.end())
    return op.emitOpError("stores a tile without a blocked layout");
  Kind k = found->second;
  SmallVector<Value> &values = regsOf(op.getValue(), k);
  SmallVector<Value> noMask;
  SmallVector<Value> &mask = op.getMask() ? regsOf(op.getMask(), k) : noMask;
  // A value held by several threads is written by one: the first thread of a row (Row), the
  // first row of threads (Col), a thread whose rows are its own (Tile).
  Value zero = ci32(0);
  Value store = ownsRows();
  if (k == Kind::Row)
    store = arith::AndIOp::create(
        b, loc, store, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tc, zero));
  else if (k == Kind::Col)
    store = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tr, zero);
  SmallVector<VectorAt> ats;
  SmallVector<int64_t> widths;
  SmallVector<Value> vals, bits;
  for (const VectorSlot &v : vectorSlots(k)) {
    ats.push_back(slotAt(b, loc, d, offsets, rank, k, v.row, v.col, v.width));
    widths.push_back(v.width);
    llvm::append_range(vals, ArrayRef<Value>(values).slice(v.first, v.width));
    if (!mask.empty())
      llvm::append_range(bits, ArrayRef<Value>(mask).slice(v.first, v.width));
  }
  if constexpr (std::is_same_v<WriteOp, tile::AtomicAddOp>)
    addSlots(b, loc, d, ats, widths, vals, bits, store);
  else
    writeSlots(b, loc, d, ats, widths, vals, bits, store);
  return success();
}

template LogicalResult BlockedKernelBuilder::emitStore(tile::StoreOp);
template LogicalResult BlockedKernelBuilder::emitStore(tile::AtomicAddOp);

} // namespace tessel::blocked
