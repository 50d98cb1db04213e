//===- InputLimits.h - bounds checked on tool input before parsing -*- C++ -*-===//
//
// MLIR's parser recurses once per level of nesting (regions, attribute dictionaries, arrays,
// parenthesised lists, type parameters): about 5,000 nested regions overflow the stack of
// tessel-opt, tesselc and tessel-run, and the passes after the parser recurse over regions too.
// The tools scan their input first and refuse nesting deeper than kMaxNestingDepth with an error
// at the offending bracket.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_SUPPORT_INPUTLIMITS_H
#define TESSEL_SUPPORT_INPUTLIMITS_H

#include "llvm/ADT/StringRef.h"

namespace llvm {
class SourceMgr;
} // namespace llvm

namespace tessel {

/// The deepest nesting of brackets ({, (, [ and <) the tools accept; real kernels nest a few
/// dozen levels at most.
inline constexpr unsigned kMaxNestingDepth = 256;

/// The offset in `text` of the first bracket nested deeper than `limit`, or StringRef::npos.
/// Comments (`//` to the end of the line) and string literals are skipped; `->` and `>=` do not
/// close a `<`.
size_t findDeepNesting(llvm::StringRef text, unsigned limit = kMaxNestingDepth);

/// Checks the main buffer of `sourceMgr`: when it nests deeper than `limit`, prints a located
/// error through the SourceMgr (to stderr) and returns false.
bool checkNestingDepth(llvm::SourceMgr &sourceMgr, unsigned limit = kMaxNestingDepth);

} // namespace tessel

#endif // TESSEL_SUPPORT_INPUTLIMITS_H
