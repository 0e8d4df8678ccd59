//===- CommandLine.h - the usage-error convention of the tools --*- C++ -*-===//
//
// Every partition tool reports a bad command line the same way: one line,
//
//   TOOL: error: MESSAGE (see TOOL --help)
//
// on stderr and exit code 2; a bad input file or a failed compile or run is
// one "TOOL: error:" line (plus the MLIR diagnostics it refers to) and exit
// code 1. LLVM's option parser prints several lines and exits 1, so the
// LLVM-based tools parse through parseCommandLine. partition-run, which
// links no LLVM, implements the same convention by hand.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_TOOLS_COMMON_COMMANDLINE_H
#define PARTITION_TOOLS_COMMON_COMMANDLINE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"

#include <string>

namespace partition::tools {

/// The exit code of a usage error.
inline constexpr int kUsageExitCode = 2;
/// The exit code of a bad input file or a failed compile or run.
inline constexpr int kFailureExitCode = 1;

/// cl::ParseCommandLineOptions; a rejected command line is reported by
/// usageError with LLVM's messages joined into one line.
void parseCommandLine(int argc, char **argv, llvm::StringRef overview);

/// Prints "TOOL: error: MESSAGE" on stderr, control characters escaped so
/// that it stays one line, and returns kFailureExitCode: `return
/// fail(...)` from main. TOOL is the program's name as parseCommandLine
/// recorded it.
int fail(const llvm::Twine &message);

/// Prints "TOOL: error: MESSAGE (see TOOL --help)" and exits 2. `tool` is
/// the program's name (argv[0] without its directory).
[[noreturn]] void usageError(llvm::StringRef tool, const llvm::Twine &message);

/// LLVM's option-parser output (several "TOOL: ..." lines, "Try: ..." and
/// "See: ..." hints) as one message without the tool prefixes and hints.
std::string joinParserErrors(llvm::StringRef tool, llvm::StringRef errors);

/// `message` as one line: control characters (a newline in a tensor name or
/// a JSON key the message quotes from a file) written as \XX escapes.
std::string oneLine(llvm::StringRef message);

} // namespace partition::tools

#endif // PARTITION_TOOLS_COMMON_COMMANDLINE_H
