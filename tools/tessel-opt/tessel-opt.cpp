//===- tessel-opt.cpp - the opt tool of tessel ----------------------------===//
//
// mlir-opt for tile programs: tessel's dialects, passes and pipelines, and the upstream ones
// they use. lit tests drive every pass through this tool. MlirOptMain's file handling is spelled
// out here so that the input is checked for nesting MLIR's recursive parser cannot take before
// the parser sees it (tessel/Support/InputLimits.h).
//
//===----------------------------------------------------------------------===//

#include "tessel/Registration.h"
#include "tessel/Support/InputLimits.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  mlir::DialectRegistry registry;
  tessel::registerDialects(registry);
  tessel::registerPasses();
  auto [inputFile, outputFile] = mlir::registerAndParseCLIOptions(
      argc, argv, "tessel optimizer driver\n", registry);
  mlir::MlirOptMainConfig config = mlir::MlirOptMainConfig::createFromCLOptions();
  // Listing dialects or passes reads no input: MlirOptMain does it.
  if (config.shouldShowDialects() || config.shouldListPasses())
    return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, inputFile, outputFile, registry));

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input = mlir::openInputFile(inputFile, &error);
  if (!input) {
    llvm::errs() << error << "\n";
    return 1;
  }
  {
    llvm::SourceMgr check;
    check.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBuffer(input->getMemBufferRef()),
                             llvm::SMLoc());
    if (!tessel::checkNestingDepth(check))
      return 1;
  }
  std::unique_ptr<llvm::ToolOutputFile> output = mlir::openOutputFile(outputFile, &error);
  if (!output) {
    llvm::errs() << error << "\n";
    return 1;
  }
  if (mlir::failed(mlir::MlirOptMain(output->os(), std::move(input), registry, config)))
    return 1;
  output->keep();
  return 0;
}
