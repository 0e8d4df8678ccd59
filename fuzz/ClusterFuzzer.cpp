//===- ClusterFuzzer.cpp - the cluster-file reader on arbitrary bytes -----===//
//
// A libFuzzer target: planner::parseCluster, what partition-plan --cluster
// FILE.json reads (through the shared JSON reader, support/JsonReader.h).
// Any input may be rejected; a rejection must say why in one line that
// starts with the file's name. A crash (an exception escaping: the tools
// are built without them, so it aborts), a sanitizer report, an empty or
// multi-line message, or an accepted cluster outside the ranges the cost
// model relies on (positive finite numbers, counts in [1, 2^24],
// efficiencies at most 1, a known attention kernel), or one whose JSON form
// (clusterToJson) does not read back the same, is a bug.
//
// Cluster.cpp depends on nlohmann-json only, so both builds
// (fuzz/CMakeLists.txt) compile it into the target, instrumented.
//
//===----------------------------------------------------------------------===//

#include "planner/Cluster.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace partition::planner;
using partition::OrError;

namespace {

const std::string kFile = "fuzz.json";

[[noreturn]] void bug(const char *what, const std::string &detail) {
  std::fprintf(stderr, "ClusterFuzzer: %s: %s\n", what, detail.c_str());
  std::abort();
}

void checkCluster(const Cluster &c) {
  for (double value :
       {c.peakFlopsBf16, c.peakFlopsFp32, c.gemmEfficiency, c.memoryBytes,
        c.memoryBandwidth, c.memoryEfficiency, c.kernelLatency,
        c.intraNodeBandwidth, c.intraNodeLatency, c.interNodeBandwidth,
        c.interNodeLatency})
    if (!(value > 0) || !std::isfinite(value))
      bug("accepted a number that is not positive and finite",
          std::to_string(value));
  for (int count : {c.gemmTileM, c.gemmTileN, c.computeUnits,
                    c.devicesPerNode})
    if (count < 1 || count > (1 << 24))
      bug("accepted a count outside [1, 2^24]", std::to_string(count));
  if (c.gemmEfficiency > 1 || c.memoryEfficiency > 1)
    bug("accepted an efficiency above 1", "");
  if (c.attentionKernel != "fused" && c.attentionKernel != "materialized")
    bug("accepted an attention kernel", c.attentionKernel);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  OrError<Cluster> cluster = parseCluster(text, kFile);
  if (!cluster) {
    const std::string &line = cluster.error();
    if (line.rfind(kFile + ": ", 0) != 0 || line.size() <= kFile.size() + 2)
      bug("a message that does not name the file and the problem", line);
    if (line.find('\n') != std::string::npos ||
        line.find('\r') != std::string::npos)
      bug("a message of more than one line", line);
    return 0;
  }
  checkCluster(*cluster);
  // The JSON form reads back as the same cluster (the name aside, which
  // may hold any string the file gave).
  OrError<Cluster> back = parseCluster(clusterToJson(*cluster), kFile);
  if (!back)
    bug("clusterToJson wrote what parseCluster refuses", back.error());
  if (clusterToJson(*back) != clusterToJson(*cluster))
    bug("clusterToJson does not round-trip", clusterToJson(*cluster));
  return 0;
}
