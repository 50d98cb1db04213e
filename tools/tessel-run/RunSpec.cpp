//===- RunSpec.cpp - tessel-run's argument spec files ---------------------===//
//
// A line-oriented reader: each line is one statement, `#` starts a comment. Sizes are integer
// expressions (+ - * / % with Python's floor semantics, parentheses, cdiv(a, b)) over integer
// literals and earlier `let` names, evaluated in int64 with overflow checked.
//
//===----------------------------------------------------------------------===//

#include "RunSpec.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/Path.h"

using namespace tessel::run;

const char *const tessel::run::kRunSpecHelp =
    "\nA run spec (--spec=FILE) has one statement a line; '#' starts a comment:\n"
    "  kernel NAME                the kernel to run (--kernel on the command line wins)\n"
    "  let NAME = EXPR            an integer size for the lines below\n"
    "  grid EXPR[, EXPR[, EXPR]]  the launch grid (--grid on the command line wins)\n"
    "  arg LABEL VALUE            the next kernel parameter, in order; VALUE is zeros:EXPR,\n"
    "                             rand:EXPR[:SEED], FILE.npy (relative to the spec's folder),\n"
    "                             EXPR (an integer scalar) or a float literal\n"
    "EXPR: integers, let names, + - * / % (Python's floor semantics), ( ), cdiv(a, b).\n"
    "--out=LABEL:path.npy names an argument by its label.\n";

namespace {

bool isIdentStart(char c) { return llvm::isAlpha(c) || c == '_'; }
bool isIdentChar(char c) { return llvm::isAlnum(c) || c == '_'; }

/// Reads one spec file, reporting the first error through the source manager.
class SpecReader {
public:
  SpecReader(llvm::SourceMgr &sourceMgr, unsigned bufferId)
      : sourceMgr(sourceMgr), buffer(*sourceMgr.getMemoryBuffer(bufferId)) {}

  std::optional<RunSpec> read();

private:
  bool error(const char *at, const llvm::Twine &message) {
    sourceMgr.PrintMessage(llvm::SMLoc::getFromPointer(at), llvm::SourceMgr::DK_Error, message);
    return false;
  }
  /// error() for the functions that return a value.
  std::nullopt_t none(const char *at, const llvm::Twine &message) {
    error(at, message);
    return std::nullopt;
  }

  void skipSpaces() {
    while (pos < end && (*pos == ' ' || *pos == '\t'))
      ++pos;
  }
  bool atEnd() {
    skipSpaces();
    return pos == end;
  }
  llvm::StringRef identifier() {
    skipSpaces();
    const char *start = pos;
    if (pos < end && isIdentStart(*pos))
      while (pos < end && isIdentChar(*pos))
        ++pos;
    return llvm::StringRef(start, pos - start);
  }
  bool consume(char c) {
    skipSpaces();
    if (pos < end && *pos == c)
      return ++pos, true;
    return false;
  }

  bool statement(RunSpec &spec);
  bool argValue(llvm::StringRef label, llvm::StringRef text, RunSpec &spec);
  /// Evaluates `text` (a slice of the buffer) as a whole expression.
  std::optional<int64_t> evaluate(llvm::StringRef text);
  std::optional<int64_t> expression();
  std::optional<int64_t> term();
  std::optional<int64_t> factor();
  std::optional<int64_t> apply(const char *at, char op, int64_t a, int64_t b);

  llvm::SourceMgr &sourceMgr;
  const llvm::MemoryBuffer &buffer;
  llvm::StringMap<int64_t> values;
  const char *pos = nullptr;
  const char *end = nullptr;
  const char *kernelAt = nullptr;
  const char *gridAt = nullptr;
};

std::optional<RunSpec> SpecReader::read() {
  RunSpec spec;
  spec.endLoc = llvm::SMLoc::getFromPointer(buffer.getBufferStart());
  llvm::StringRef rest = buffer.getBuffer();
  while (!rest.empty()) {
    auto [line, next] = rest.split('\n');
    rest = next;
    size_t hash = line.find('#');
    line = line.take_front(hash).rtrim(" \t\r");
    pos = line.begin();
    end = line.end();
    if (atEnd())
      continue;
    if (!statement(spec))
      return std::nullopt;
  }
  return spec;
}

bool SpecReader::statement(RunSpec &spec) {
  const char *start = pos;
  llvm::StringRef keyword = identifier();
  if (keyword == "kernel") {
    if (kernelAt)
      return error(
          start,
          "a second 'kernel' line (the first is at line " +
              llvm::Twine(sourceMgr.getLineAndColumn(llvm::SMLoc::getFromPointer(kernelAt)).first) +
              ")");
    kernelAt = start;
    llvm::StringRef name = identifier();
    if (name.empty() || !atEnd())
      return error(pos, "expected 'kernel NAME'");
    spec.kernel = name.str();
    return true;
  }
  if (keyword == "let") {
    const char *nameAt = (skipSpaces(), pos);
    llvm::StringRef name = identifier();
    if (name.empty())
      return error(pos, "expected 'let NAME = EXPR'");
    if (name == "cdiv")
      return error(nameAt, "'cdiv' is a function, not a name for a size");
    if (values.count(name))
      return error(nameAt, "'" + name + "' is already defined");
    if (!consume('='))
      return error(pos, "expected '=' after 'let " + name + "'");
    std::optional<int64_t> value = evaluate(llvm::StringRef(pos, end - pos));
    if (!value)
      return false;
    values[name] = *value;
    return true;
  }
  if (keyword == "grid") {
    if (gridAt)
      return error(
          start,
          "a second 'grid' line (the first is at line " +
              llvm::Twine(sourceMgr.getLineAndColumn(llvm::SMLoc::getFromPointer(gridAt)).first) +
              ")");
    gridAt = start;
    std::array<int64_t, 3> grid{1, 1, 1};
    for (int i = 0;; ++i) {
      const char *sizeAt = (skipSpaces(), pos);
      if (i == 3)
        return error(sizeAt, "a grid has at most three sizes X[, Y[, Z]]");
      std::optional<int64_t> size = expression();
      if (!size)
        return false;
      if (*size < 1 || *size > (1 << 20))
        return error(sizeAt, "grid size " + llvm::Twine(*size) + " is not in [1, 2^20]");
      grid[i] = *size;
      if (atEnd())
        break;
      if (!consume(','))
        return error(pos, "expected ',' or the end of the line after a grid size");
    }
    spec.grid = grid;
    return true;
  }
  if (keyword == "arg") {
    llvm::StringRef label = identifier();
    if (label.empty())
      return error(pos, "expected 'arg LABEL VALUE' (LABEL: a name for the parameter)");
    skipSpaces();
    if (pos == end)
      return error(pos, "expected a value after 'arg " + label +
                            "': zeros:N, rand:N[:SEED], "
                            "FILE.npy or a scalar");
    spec.endLoc = llvm::SMLoc::getFromPointer(start);
    return argValue(label, llvm::StringRef(pos, end - pos), spec);
  }
  return error(start, "expected 'kernel', 'let', 'grid' or 'arg'" +
                          (keyword.empty() ? llvm::Twine() : ", not '" + keyword + "'"));
}

bool SpecReader::argValue(llvm::StringRef label, llvm::StringRef text, RunSpec &spec) {
  SpecArg arg{label.str(), "", llvm::SMLoc::getFromPointer(text.begin())};
  llvm::StringRef rest = text;
  if (rest.consume_front("zeros:")) {
    std::optional<int64_t> n = evaluate(rest);
    if (!n)
      return false;
    arg.value = "zeros:" + std::to_string(*n);
  } else if (rest.consume_front("rand:")) {
    auto [count, seed] = rest.split(':');
    std::optional<int64_t> n = evaluate(count);
    if (!n)
      return false;
    arg.value = "rand:" + std::to_string(*n);
    if (count.size() != rest.size()) {
      std::optional<int64_t> s = evaluate(seed);
      if (!s)
        return false;
      if (*s < 0)
        return error(seed.ltrim(" \t").begin(), "a seed cannot be negative");
      arg.value += ":" + std::to_string(*s);
    }
  } else if (rest.ends_with(".npy")) {
    llvm::SmallString<256> path(rest);
    if (llvm::sys::path::is_relative(path)) {
      llvm::SmallString<256> base(llvm::sys::path::parent_path(buffer.getBufferIdentifier()));
      llvm::sys::path::append(base, path);
      path = base;
    }
    arg.value = path.str().str();
  } else {
    // A float literal (0.125, 1e-3, -inf) as written, else an integer expression.
    double asFloat;
    int64_t asInteger;
    if (!rest.getAsDouble(asFloat) && rest.getAsInteger(10, asInteger)) {
      arg.value = rest.str();
    } else {
      std::optional<int64_t> v = evaluate(rest);
      if (!v)
        return false;
      arg.value = std::to_string(*v);
    }
  }
  spec.args.push_back(std::move(arg));
  return true;
}

std::optional<int64_t> SpecReader::evaluate(llvm::StringRef text) {
  const char *lineEnd = end;
  pos = text.begin();
  end = text.end();
  std::optional<int64_t> v = expression();
  if (v && !atEnd()) {
    error(pos, "unexpected '" + llvm::StringRef(pos, end - pos) + "' after an expression");
    v.reset();
  }
  pos = text.end();
  end = lineEnd;
  return v;
}

std::optional<int64_t> SpecReader::apply(const char *at, char op, int64_t a, int64_t b) {
  int64_t r = 0;
  bool overflow = false;
  switch (op) {
  case '+': overflow = llvm::AddOverflow(a, b, r); break;
  case '-': overflow = llvm::SubOverflow(a, b, r); break;
  case '*': overflow = llvm::MulOverflow(a, b, r); break;
  case '/':
  case '%':
    if (b == 0)
      return none(at, llvm::Twine(op == '/' ? "division" : "remainder") + " by zero");
    if (a == INT64_MIN && b == -1)
      return none(at, "the result overflows 64 bits");
    // Python's semantics: the quotient rounds down, the remainder has the divisor's sign.
    r = op == '/' ? a / b : a % b;
    if (op == '/' && (a % b != 0) && ((a < 0) != (b < 0)))
      --r;
    if (op == '%' && r != 0 && ((r < 0) != (b < 0)))
      r += b;
    break;
  }
  if (overflow)
    return none(at, "the result overflows 64 bits");
  return r;
}

std::optional<int64_t> SpecReader::expression() {
  std::optional<int64_t> v = term();
  while (v) {
    skipSpaces();
    if (pos == end || (*pos != '+' && *pos != '-'))
      break;
    const char *at = pos;
    char op = *pos++;
    std::optional<int64_t> rhs = term();
    if (!rhs)
      return std::nullopt;
    v = apply(at, op, *v, *rhs);
  }
  return v;
}

std::optional<int64_t> SpecReader::term() {
  std::optional<int64_t> v = factor();
  while (v) {
    skipSpaces();
    if (pos == end || (*pos != '*' && *pos != '/' && *pos != '%'))
      break;
    const char *at = pos;
    char op = *pos++;
    std::optional<int64_t> rhs = factor();
    if (!rhs)
      return std::nullopt;
    v = apply(at, op, *v, *rhs);
  }
  return v;
}

std::optional<int64_t> SpecReader::factor() {
  skipSpaces();
  const char *at = pos;
  if (pos == end)
    return none(at, "expected an integer, a name or '('");
  if (*pos == '-') {
    ++pos;
    std::optional<int64_t> v = factor();
    if (!v)
      return std::nullopt;
    return apply(at, '-', 0, *v);
  }
  if (*pos == '(') {
    ++pos;
    std::optional<int64_t> v = expression();
    if (v && !consume(')'))
      return none(pos, "expected ')'");
    return v;
  }
  if (llvm::isDigit(*pos)) {
    while (pos < end && isIdentChar(*pos))
      ++pos;
    int64_t v;
    if (llvm::StringRef(at, pos - at).getAsInteger(10, v))
      return none(at, "'" + llvm::StringRef(at, pos - at) + "' is not an integer");
    return v;
  }
  llvm::StringRef name = identifier();
  if (name.empty())
    return none(at,
                "expected an integer, a name or '(', not '" + llvm::StringRef(at, end - at) + "'");
  if (name == "cdiv") {
    if (!consume('('))
      return none(pos, "expected '(' after cdiv");
    std::optional<int64_t> a = expression();
    if (!a)
      return std::nullopt;
    if (!consume(','))
      return none(pos, "expected ',' in cdiv(a, b)");
    const char *bAt = (skipSpaces(), pos);
    std::optional<int64_t> b = expression();
    if (!b)
      return std::nullopt;
    if (!consume(')'))
      return none(pos, "expected ')'");
    // cdiv(a, b) = -((-a) // b): a ceiling for any signs.
    std::optional<int64_t> negA = apply(at, '-', 0, *a);
    std::optional<int64_t> q = negA ? apply(bAt, '/', *negA, *b) : std::nullopt;
    return q ? apply(at, '-', 0, *q) : std::nullopt;
  }
  auto it = values.find(name);
  if (it == values.end())
    return none(at, "unknown name '" + name + "' (define it first with 'let " + name + " = ...')");
  return it->second;
}

} // namespace

std::optional<RunSpec> tessel::run::parseRunSpec(llvm::SourceMgr &sourceMgr, unsigned bufferId) {
  return SpecReader(sourceMgr, bufferId).read();
}
