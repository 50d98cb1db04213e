//===- Npy.cpp - reading and writing NumPy .npy files ---------------------===//
//
// The .npy format: the magic "\x93NUMPY", a version (1.0 here), a little-endian 16-bit header
// length, then a Python dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...), }
// padded with spaces to a multiple of 64 bytes and ended by a newline, then the raw data.
//
//===----------------------------------------------------------------------===//

#include "tessel/Interpreter/Npy.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>

using namespace tessel::interp;
using llvm::StringRef;

namespace {
constexpr StringRef kMagic("\x93NUMPY", 6);

llvm::Error fail(StringRef name, const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), name + ": " + what);
}

// The text after `'key':` in the header dict, with leading blanks dropped; nullopt if absent.
std::optional<StringRef> valueOf(StringRef header, StringRef key) {
  std::string quoted = ("'" + key + "'").str();
  size_t at = header.find(quoted);
  if (at == StringRef::npos)
    return std::nullopt;
  StringRef rest = header.drop_front(at + quoted.size()).ltrim();
  if (!rest.consume_front(":"))
    return std::nullopt;
  return rest.ltrim();
}

// Element size in bytes of the dtypes tessel uses, 0 for the others.
unsigned elementSize(StringRef descr) {
  if (descr == "<f2" || descr == "<u2" || descr == "<i2")
    return 2;
  if (descr == "<f4" || descr == "<i4" || descr == "<u4")
    return 4;
  if (descr == "<f8" || descr == "<i8")
    return 8;
  if (descr == "|u1" || descr == "|i1" || descr == "|b1")
    return 1;
  return 0;
}
} // namespace

int64_t NpyArray::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

llvm::Expected<NpyArray> tessel::interp::parseNpy(StringRef contents, StringRef name) {
  if (!contents.starts_with(kMagic))
    return fail(name, "not a .npy file (no \\x93NUMPY magic)");
  if (contents.size() < 10)
    return fail(name, "truncated .npy header");
  unsigned major = static_cast<uint8_t>(contents[6]), minor = static_cast<uint8_t>(contents[7]);
  if (major != 1 || minor != 0)
    return fail(name, "unsupported .npy format version " + llvm::Twine(major) + "." +
                          llvm::Twine(minor) + " (only 1.0 is read)");
  size_t headerLen = static_cast<uint8_t>(contents[8]) | (static_cast<uint8_t>(contents[9]) << 8);
  if (contents.size() < 10 + headerLen)
    return fail(name, "truncated .npy header");
  StringRef header = contents.substr(10, headerLen);
  NpyArray array;

  std::optional<StringRef> descr = valueOf(header, "descr");
  if (!descr || descr->empty() || (descr->front() != '\'' && descr->front() != '"'))
    return fail(name, "the .npy header has no 'descr' string");
  size_t close = descr->find(descr->front(), 1);
  if (close == StringRef::npos)
    return fail(name, "the .npy header has an unterminated 'descr'");
  array.descr = descr->substr(1, close - 1).str();
  if (array.descr.size() > 1 && array.descr[0] == '>')
    return fail(name, "big-endian dtype '" + array.descr + "' is not supported");
  unsigned size = elementSize(array.descr);
  if (size == 0)
    return fail(name, "unsupported dtype '" + array.descr + "'");

  std::optional<StringRef> fortran = valueOf(header, "fortran_order");
  if (!fortran)
    return fail(name, "the .npy header has no 'fortran_order'");
  if (fortran->starts_with("True"))
    return fail(name, "Fortran-order arrays are not supported (save a C-order array)");
  if (!fortran->starts_with("False"))
    return fail(name, "the .npy header has a malformed 'fortran_order'");

  std::optional<StringRef> shape = valueOf(header, "shape");
  if (!shape || !shape->consume_front("("))
    return fail(name, "the .npy header has no 'shape' tuple");
  size_t end = shape->find(')');
  if (end == StringRef::npos)
    return fail(name, "the .npy header has an unterminated 'shape'");
  llvm::SmallVector<StringRef> dims;
  shape->substr(0, end).split(dims, ',', -1, /*KeepEmpty=*/false);
  int64_t count = 1;
  for (StringRef d : dims) {
    d = d.trim();
    if (d.empty())
      continue;
    uint64_t v;
    if (d.getAsInteger(10, v) || v > (uint64_t(1) << 40))
      return fail(name, "the .npy header has a bad dimension '" + d + "'");
    array.shape.push_back(static_cast<int64_t>(v));
    count *= static_cast<int64_t>(v);
    if (count > (int64_t(1) << 40))
      return fail(name, "the array is too large");
  }

  StringRef data = contents.drop_front(10 + headerLen);
  uint64_t bytes = static_cast<uint64_t>(count) * size;
  if (data.size() != bytes)
    return fail(name, "expected " + llvm::Twine(bytes) + " bytes of data for shape and dtype '" +
                          array.descr + "', found " + llvm::Twine(data.size()));
  array.data.assign(data.bytes_begin(), data.bytes_end());
  return array;
}

llvm::Expected<NpyArray> tessel::interp::readNpy(StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return fail(path, "cannot read file: " + buffer.getError().message());
  return parseNpy((*buffer)->getBuffer(), path);
}

std::string tessel::interp::serializeNpy(StringRef descr, llvm::ArrayRef<int64_t> shape,
                                         llvm::ArrayRef<uint8_t> data) {
  std::string dict = "{'descr': '" + descr.str() + "', 'fortran_order': False, 'shape': (";
  for (int64_t d : shape)
    dict += std::to_string(d) + ", ";
  if (shape.size() > 1)
    dict.erase(dict.size() - 2); // (3, 4) but (3,)
  else if (shape.size() == 1)
    dict.pop_back();
  dict += "), }";
  // Magic, version, length and header together are a multiple of 64 bytes; the header ends in \n.
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::string out(kMagic);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>((dict.size() >> 8) & 0xff);
  out += dict;
  out.append(reinterpret_cast<const char *>(data.data()), data.size());
  return out;
}

llvm::Error tessel::interp::writeNpy(StringRef path, StringRef descr, llvm::ArrayRef<int64_t> shape,
                                     llvm::ArrayRef<uint8_t> data) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return fail(path, "cannot write file: " + ec.message());
  os << serializeNpy(descr, shape, data);
  os.close();
  if (os.has_error())
    return fail(path, "cannot write file: " + os.error().message());
  return llvm::Error::success();
}
