//===- tessel-opt.cpp - the opt tool of tessel ----------------------------===//
//
// mlir-opt for tile programs: tessel's dialects, passes and pipelines, and the upstream ones
// they use. lit tests drive every pass through this tool.
//
//===----------------------------------------------------------------------===//

#include "tessel/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  tessel::registerDialects(registry);
  tessel::registerPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "tessel optimizer driver\n", registry));
}
