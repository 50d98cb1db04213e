//===- TileDialectTest.cpp - the tile dialect through its C++ API ---------===//
//
// The builders that the Python front end calls: ops built with OpTy::create verify when they
// are well formed, and the verifier names the problem when they are not.
//
//===----------------------------------------------------------------------===//

#include "tile/IR/TileDialect.h"
#include "tessel/Registration.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace tessel;

namespace {
class TileDialectTest : public ::testing::Test {
protected:
  TileDialectTest() {
    DialectRegistry registry;
    registerDialects(registry);
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
  }

  // Builds `func @f(args)` and returns a builder positioned in its body.
  OpBuilder makeFunc(TypeRange args) {
    OpBuilder b(&ctx);
    module = ModuleOp::create(b.getUnknownLoc());
    b.setInsertionPointToEnd(module->getBody());
    auto fn = func::FuncOp::create(b, b.getUnknownLoc(), "f", b.getFunctionType(args, {}));
    b.setInsertionPointToEnd(fn.addEntryBlock());
    return b;
  }

  // Verifies the module and returns the first diagnostic message ("" when it verifies).
  std::string verifyAndGetError() {
    std::string message;
    ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
      if (message.empty())
        message = d.str();
      return success();
    });
    if (succeeded(verify(*module)))
      return "";
    return message.empty() ? "<failed without a message>" : message;
  }

  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
};

TEST_F(TileDialectTest, WellFormedDotVerifies) {
  auto f16 = Float16Type::get(&ctx);
  auto f32 = Float32Type::get(&ctx);
  OpBuilder b = makeFunc({});
  Location loc = b.getUnknownLoc();
  auto a = arith::ConstantOp::create(b, loc,
                                     DenseElementsAttr::get(RankedTensorType::get({16, 32}, f16),
                                                            b.getF16FloatAttr(1.0).getValue()));
  auto bt = arith::ConstantOp::create(b, loc,
                                      DenseElementsAttr::get(RankedTensorType::get({32, 8}, f16),
                                                             b.getF16FloatAttr(2.0).getValue()));
  auto acc = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(RankedTensorType::get({16, 8}, f32), 0.0f));
  auto dot = tile::DotOp::create(b, loc, acc.getType(), a, bt, acc);
  func::ReturnOp::create(b, loc);
  EXPECT_EQ(verifyAndGetError(), "");
  EXPECT_EQ(cast<RankedTensorType>(dot.getType()).getShape(), ArrayRef<int64_t>({16, 8}));
}

TEST_F(TileDialectTest, DotWithMismatchedContractionIsRejected) {
  auto f16 = Float16Type::get(&ctx);
  auto f32 = Float32Type::get(&ctx);
  OpBuilder b = makeFunc({});
  Location loc = b.getUnknownLoc();
  auto a = arith::ConstantOp::create(b, loc,
                                     DenseElementsAttr::get(RankedTensorType::get({16, 32}, f16),
                                                            b.getF16FloatAttr(1.0).getValue()));
  auto bt = arith::ConstantOp::create(b, loc,
                                      DenseElementsAttr::get(RankedTensorType::get({16, 8}, f16),
                                                             b.getF16FloatAttr(2.0).getValue()));
  auto acc = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(RankedTensorType::get({16, 8}, f32), 0.0f));
  tile::DotOp::create(b, loc, acc.getType(), a, bt, acc);
  func::ReturnOp::create(b, loc);
  EXPECT_NE(verifyAndGetError().find("contraction sizes differ"), std::string::npos);
}

TEST_F(TileDialectTest, DescriptorNeedsOneSizeAndStridePerAxis) {
  auto f16 = Float16Type::get(&ctx);
  OpBuilder b = makeFunc({tile::PtrType::get(&ctx, f16), IntegerType::get(&ctx, 32)});
  Location loc = b.getUnknownLoc();
  Block *body = b.getInsertionBlock();
  Value n = body->getArgument(1);
  auto desc = tile::DescType::get(&ctx, 2, f16);
  tile::MakeDescOp::create(b, loc, desc, body->getArgument(0), Value(), ValueRange{n, n},
                           ValueRange{n}, Value(), Value(), IntegerAttr());
  func::ReturnOp::create(b, loc);
  EXPECT_NE(verifyAndGetError().find("needs 2 sizes and 2 strides"), std::string::npos);
}

TEST_F(TileDialectTest, DescriptorTypeRejectsBadElementType) {
  std::string message;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
    message = d.str();
    return success();
  });
  auto bad = tile::DescType::getChecked([&] { return emitError(UnknownLoc::get(&ctx)); }, &ctx, 2u,
                                        Type(IntegerType::get(&ctx, 8)));
  EXPECT_FALSE(bad);
  EXPECT_NE(message.find("element type must be f8E4M3FN, f16, bf16, f32 or i32"),
            std::string::npos);
}
} // namespace
