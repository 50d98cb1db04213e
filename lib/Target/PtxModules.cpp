//===- PtxModules.cpp - join the PTX of kernels compiled apart ------------===//
//
// compileModule compiles each kernel of a module as an LLVM module of its own
// (tessel-split-kernel-modules) and joins the PTX texts here into one PTX module: the header
// once, then every part's declarations and functions in order, a declaration that several parts
// carry (the dynamic shared-memory `.extern .shared` variable) once.
//
// The PTX the NVPTX back end prints is a header (comments, .version, .target, .address_size)
// followed by module-level statements — variable declarations, function prototypes and
// definitions — each ending with `;` or, for a body, `}` at brace and parenthesis depth 0, with
// `//` comments and blank lines between them. That is all this file parses.
//
//===----------------------------------------------------------------------===//

#include "tessel/Target/Compile.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Regex.h"

using namespace mlir;

namespace {

/// One module-level statement, or a run of comment and blank lines between statements.
struct PtxItem {
  std::string text;
  bool statement = false;
};

/// A line without its `//` comment (PTX has no string literals outside debug sections, which
/// are refused).
llvm::StringRef codeOf(llvm::StringRef line) { return line.substr(0, line.find("//")).trim(); }

/// Splits `ptx` into its header directives (the text up to and including `.address_size`) and
/// the items after it. Fails with `why` on what it does not parse.
bool parsePtx(llvm::StringRef ptx, std::string &header, llvm::SmallVector<PtxItem> &items,
              std::string &why) {
  llvm::SmallVector<llvm::StringRef> lines;
  ptx.split(lines, '\n');
  size_t i = 0;
  for (; i < lines.size(); ++i) {
    llvm::StringRef code = codeOf(lines[i]);
    if (code.empty())
      continue;
    if (!code.starts_with(".version") && !code.starts_with(".target") &&
        !code.starts_with(".address_size")) {
      why = (llvm::Twine("unexpected PTX before .address_size: '") + code + "'").str();
      return false;
    }
    header += code.str() + "\n";
    if (code.starts_with(".address_size"))
      break;
  }
  if (i == lines.size()) {
    why = "PTX without .address_size";
    return false;
  }
  int depth = 0;
  PtxItem current;
  auto flush = [&](bool statement) {
    if (current.text.empty())
      return;
    current.statement = statement;
    items.push_back(std::move(current));
    current = PtxItem();
  };
  for (++i; i < lines.size(); ++i) {
    llvm::StringRef line = lines[i];
    // The text ends with a newline: the last piece of the split is empty.
    bool last = i + 1 == lines.size();
    llvm::StringRef code = codeOf(line);
    // A comment or blank line between statements, or inside one that spans lines.
    if (code.empty()) {
      current.text += line.str() + (last ? "" : "\n");
      continue;
    }
    if (depth == 0 && !current.statement) {
      flush(false);
      current.statement = true;
      if (code.starts_with(".section") || code.starts_with(".file")) {
        why = (llvm::Twine("PTX with debug information cannot be joined: '") + code + "'").str();
        return false;
      }
    }
    current.text += line.str() + (last ? "" : "\n");
    for (char c : code) {
      if (c == '{' || c == '(')
        ++depth;
      else if (c == '}' || c == ')')
        --depth;
    }
    if (depth < 0) {
      why = "unbalanced braces in PTX";
      return false;
    }
    if (depth == 0 && (code.ends_with(";") || code.ends_with("}")))
      flush(true);
  }
  if (current.statement) {
    why = "PTX ends inside a statement";
    return false;
  }
  flush(false);
  return true;
}

/// The name a module-level statement declares or defines: a function's, after its optional
/// return parameters, or a variable's, before its array size or initializer.
std::string declaredName(llvm::StringRef statement) {
  std::string code;
  llvm::SmallVector<llvm::StringRef> lines;
  statement.split(lines, '\n');
  for (llvm::StringRef line : lines)
    code += codeOf(line).str() + " ";
  static const llvm::Regex function(
      "\\.(entry|func)[[:space:]]*(\\([^)]*\\))?[[:space:]]*([A-Za-z_$%][A-Za-z0-9_$%]*)");
  llvm::SmallVector<llvm::StringRef> m;
  if (function.match(code, &m))
    return m[3].str();
  llvm::StringRef head = llvm::StringRef(code).take_until(
      [](char c) { return c == '[' || c == '=' || c == ';' || c == '<'; });
  head = head.rtrim();
  size_t start = head.find_last_of(" \t");
  return (start == llvm::StringRef::npos ? head : head.substr(start + 1)).str();
}

} // namespace

bool tessel::joinPtxModules(llvm::ArrayRef<std::string> parts, std::string &ptx, std::string &why) {
  ptx.clear();
  if (parts.empty())
    return true;
  std::string firstHeader;
  llvm::StringSet<> statements, names;
  for (auto [index, part] : llvm::enumerate(parts)) {
    std::string header;
    llvm::SmallVector<PtxItem> items;
    if (!parsePtx(part, header, items, why))
      return false;
    if (index == 0)
      firstHeader = header;
    else if (header != firstHeader) {
      why = "the parts were compiled for different targets:\n" + firstHeader + "and\n" + header;
      return false;
    }
    // The first part verbatim; of the others what is not already there.
    if (index == 0)
      ptx = part;
    llvm::StringSet<> partNames;
    for (const PtxItem &item : items) {
      if (!item.statement) {
        if (index != 0)
          ptx += item.text;
        continue;
      }
      if (!statements.insert(item.text).second)
        continue;
      std::string name = declaredName(item.text);
      if (names.contains(name)) {
        why = "two parts declare '" + name + "' differently";
        return false;
      }
      partNames.insert(name);
      if (index != 0)
        ptx += item.text;
    }
    for (const auto &name : partNames)
      names.insert(name.getKey());
  }
  return true;
}
