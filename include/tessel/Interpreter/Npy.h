//===- Npy.h - reading and writing NumPy .npy files -------------*- C++ -*-===//
//
// tessel-run exchanges buffers with Python through .npy files. Only what numpy.save writes for a
// plain array is accepted: format version 1.0, little-endian (or byte-order-free) element types,
// C order. Anything else is rejected with a message that says what was found.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_INTERPRETER_NPY_H
#define TESSEL_INTERPRETER_NPY_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::interp {

/// The contents of a .npy file: dtype descriptor (e.g. "<f2"), shape and raw element bytes.
struct NpyArray {
  std::string descr;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
  /// Number of elements: the product of the shape (1 for a 0-d array).
  int64_t numElements() const;
};

/// Parses the bytes of a .npy file. `name` is used in error messages.
llvm::Expected<NpyArray> parseNpy(llvm::StringRef contents, llvm::StringRef name);
/// Reads and parses a .npy file.
llvm::Expected<NpyArray> readNpy(llvm::StringRef path);
/// The bytes of a version 1.0 .npy file holding a C-order array.
std::string serializeNpy(llvm::StringRef descr, llvm::ArrayRef<int64_t> shape,
                         llvm::ArrayRef<uint8_t> data);
/// Writes a version 1.0 .npy file.
llvm::Error writeNpy(llvm::StringRef path, llvm::StringRef descr, llvm::ArrayRef<int64_t> shape,
                     llvm::ArrayRef<uint8_t> data);

} // namespace tessel::interp

#endif // TESSEL_INTERPRETER_NPY_H
