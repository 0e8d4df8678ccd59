//===- IoEngine.cpp - choosing an I/O engine, failure messages ------------===//

#include "runtime/offload/IoEngine.h"

#include <cstring>

namespace partition::runtime::offload {

std::string ioFailure(const IoRequest &request, std::uint64_t at,
                      int error) {
  std::string what = request.kind == IoRequest::Kind::Read ? "reading '"
                                                           : "writing '";
  std::string reason = error == 0 ? std::string("the file ends before it")
                                  : std::string(std::strerror(error));
  if (error == ENOSPC || error == EDQUOT)
    reason += " (the disk is full: free space or give the offload another "
              "path)";
  return what + request.path + "' at byte " + std::to_string(at) + " (" +
         std::to_string(request.bytes) + " bytes from " +
         std::to_string(request.offset) + "): " + reason;
}

std::vector<std::string> availableIoEngines() {
  std::vector<std::string> kinds{"threads"};
#ifdef PARTITION_HAVE_LIBURING
  if (uringUsable())
    kinds.push_back("uring");
#endif
  return kinds;
}

std::unique_ptr<IoEngine> makeIoEngine(const IoEngineOptions &options) {
  if (options.threads < 1 || options.threads > 256)
    throw std::invalid_argument("the I/O threads " +
                                std::to_string(options.threads) +
                                " are not in [1, 256]");
  if (options.queueDepth < 1 || options.queueDepth > 4096)
    throw std::invalid_argument("the I/O queue depth " +
                                std::to_string(options.queueDepth) +
                                " is not in [1, 4096]");
  if (options.chunkBytes == 0 || options.chunkBytes % kIoAlignment != 0)
    throw std::invalid_argument("the I/O chunk of " +
                                std::to_string(options.chunkBytes) +
                                " bytes is not a positive multiple of " +
                                std::to_string(kIoAlignment));
  if (options.kind == "threads")
    return makeThreadPoolEngine(options);
#ifdef PARTITION_HAVE_LIBURING
  if (options.kind == "uring" && uringUsable())
    return makeUringEngine(options);
#endif
  std::string kinds;
  for (const std::string &kind : availableIoEngines())
    kinds += (kinds.empty() ? "" : ", ") + kind;
  throw std::invalid_argument("the I/O engine '" + options.kind +
                              "' is not available here (available: " + kinds +
                              ")");
}

} // namespace partition::runtime::offload
