//===- InputLimits.cpp - bounds checked on tool input before parsing ------===//
//
// A linear scan, without recursion, of a tool's input for bracket nesting deeper than MLIR's
// recursive parser can take (include/tessel/Support/InputLimits.h).
//
//===----------------------------------------------------------------------===//

#include "tessel/Support/InputLimits.h"

#include "llvm/Support/SMLoc.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

size_t tessel::findDeepNesting(llvm::StringRef text, unsigned limit) {
  unsigned depth = 0;
  for (size_t i = 0, n = text.size(); i < n; ++i) {
    char c = text[i];
    if (c == '/' && i + 1 < n && text[i + 1] == '/') {
      i = text.find('\n', i);
      if (i == llvm::StringRef::npos)
        break;
      continue;
    }
    if (c == '"') {
      for (++i; i < n && text[i] != '"'; ++i)
        if (text[i] == '\\')
          ++i;
      continue;
    }
    if (c == '{' || c == '(' || c == '[' || c == '<') {
      if (++depth > limit)
        return i;
    } else if (c == '}' || c == ')' || c == ']' ||
               (c == '>' && !(i > 0 && text[i - 1] == '-') && !(i + 1 < n && text[i + 1] == '='))) {
      if (depth > 0)
        --depth;
    }
  }
  return llvm::StringRef::npos;
}

bool tessel::checkNestingDepth(llvm::SourceMgr &sourceMgr, unsigned limit) {
  const llvm::MemoryBuffer *buffer = sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());
  llvm::StringRef text = buffer->getBuffer();
  size_t at = findDeepNesting(text, limit);
  if (at == llvm::StringRef::npos)
    return true;
  sourceMgr.PrintMessage(llvm::errs(), llvm::SMLoc::getFromPointer(text.data() + at),
                         llvm::SourceMgr::DK_Error,
                         "nesting deeper than " + std::to_string(limit) +
                             " levels; tessel refuses such input (MLIR's parser would overflow "
                             "the stack)");
  return false;
}
