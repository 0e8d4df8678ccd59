//===- CommandLine.cpp - the usage-error convention of the tools ----------===//

#include "tools/common/CommandLine.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace partition::tools {

std::string oneLine(llvm::StringRef message) {
  std::string line;
  for (char c : message) {
    auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      static const char *hex = "0123456789ABCDEF";
      line += '\\';
      line += hex[byte >> 4];
      line += hex[byte & 15];
    } else {
      line += c;
    }
  }
  return line;
}

std::string joinParserErrors(llvm::StringRef tool, llvm::StringRef errors) {
  llvm::SmallVector<llvm::StringRef> lines;
  errors.split(lines, '\n', -1, /*KeepEmpty=*/false);
  std::string message;
  llvm::SmallVector<std::string> seen;
  for (llvm::StringRef line : lines) {
    line = line.trim();
    // Every line starts "TOOL: "; the hints point at --help, which the
    // one line names anyway.
    if (line.consume_front(tool))
      line.consume_front(": ");
    line = line.split("  Try: ").first;
    line = line.split(": See: ").first;
    line = line.rtrim(" .!");
    if (line.empty() || llvm::is_contained(seen, line.str()))
      continue;
    seen.push_back(line.str());
    if (!message.empty())
      message += "; ";
    // "Did you mean" continues the sentence before it.
    if (!message.empty() && line.starts_with("Did you mean"))
      message += "d" + line.drop_front().str();
    else
      message += line.str();
  }
  return message.empty() ? "the command line was rejected" : message;
}

namespace {
/// The program's name for fail(), from argv[0].
std::string &toolName() {
  static std::string name = "partition";
  return name;
}
} // namespace

int fail(const llvm::Twine &message) {
  llvm::errs() << toolName() << ": error: " << oneLine(message.str()) << "\n";
  return kFailureExitCode;
}

void usageError(llvm::StringRef tool, const llvm::Twine &message) {
  llvm::errs() << tool << ": error: " << message << " (see " << tool
               << " --help)\n";
  llvm::errs().flush();
  std::exit(kUsageExitCode);
}

namespace {

/// What is written to file descriptor 2 while it lives. LLVM's option
/// classes print some errors (a value that does not parse) to llvm::errs()
/// directly, not to the stream given to the parser.
class CapturedStderr {
public:
  CapturedStderr() : file(std::tmpfile()) {
    llvm::errs().flush();
    if (file) {
      saved = dup(STDERR_FILENO);
      if (saved < 0 || dup2(fileno(file), STDERR_FILENO) < 0) {
        if (saved >= 0)
          close(saved);
        std::fclose(file);
        file = nullptr;
      }
    }
  }
  /// Restores stderr and returns what was written to it.
  std::string release() {
    llvm::errs().flush();
    std::string text;
    if (!file)
      return text;
    dup2(saved, STDERR_FILENO);
    close(saved);
    std::rewind(file);
    char buffer[4096];
    for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), file)) > 0;)
      text.append(buffer, n);
    std::fclose(file);
    file = nullptr;
    return text;
  }
  ~CapturedStderr() { release(); }

private:
  std::FILE *file;
  int saved = -1;
};

} // namespace

void parseCommandLine(int argc, char **argv, llvm::StringRef overview) {
  toolName() = llvm::sys::path::filename(argv[0]).str();
  std::string errors;
  llvm::raw_string_ostream stream(errors);
  CapturedStderr captured;
  bool parsed =
      llvm::cl::ParseCommandLineOptions(argc, argv, overview, &stream);
  std::string direct = captured.release();
  if (parsed) {
    // Not an error (a deprecation note, say): let it through.
    llvm::errs() << direct;
    return;
  }
  llvm::StringRef tool = llvm::sys::path::filename(argv[0]);
  usageError(tool, joinParserErrors(tool, direct + stream.str()));
}

} // namespace partition::tools
