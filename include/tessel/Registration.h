//===- Registration.h - every dialect and pass tessel uses ------*- C++ -*-===//
//
// One place registers the dialects and passes of tessel and the upstream ones it relies on, so
// tessel-opt, tessel-run and the Python module agree on what they can parse and run.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_REGISTRATION_H
#define TESSEL_REGISTRATION_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace tessel {
/// Adds the tile dialect and the upstream dialects of tile programs to `registry`.
void registerDialects(mlir::DialectRegistry &registry);
/// Registers tessel's passes and pipelines and the upstream passes they use. Safe to call many
/// times: registration happens once.
void registerPasses();
} // namespace tessel

#endif // TESSEL_REGISTRATION_H
