//===- partition-translate.cpp - rt IR to .ptp programs -------------------===//
//
//   partition-translate --rt-to-program planned.mlir -o model.ptp
//
//===----------------------------------------------------------------------===//

#include "lowering/ProgramWriter.h"

#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"

int main(int argc, char **argv) {
  partition::registerProgramTranslation();
  return mlir::failed(mlir::mlirTranslateMain(
      argc, argv, "partition translator: rt IR to .ptp programs\n"));
}
