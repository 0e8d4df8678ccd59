//===- Bandwidth.h - the offload tier's disk, measured ----------*- C++ -*-===//
//
// What `partition-plan --calibrate` writes into a cluster profile as the
// disk's read and write bandwidth: a temporary offload file in a directory,
// written and read whole through the I/O engine the runtime's nvme tier
// uses (IoEngine.h: io_uring where available, O_DIRECT where the
// filesystem allows), so that the planner prices the same path the steps
// take. No exception escapes (the tools build without them).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_OFFLOAD_BANDWIDTH_H
#define PARTITION_RUNTIME_OFFLOAD_BANDWIDTH_H

#include <cstddef>
#include <functional>
#include <optional>
#include <string>

namespace partition::runtime::offload {

struct DiskBandwidth {
  /// Bytes per second, the median of the repeats.
  double read = 0, write = 0;
  /// The engine ("uring" or "threads"), the file measured (removed
  /// since), and whether it was opened with O_DIRECT.
  std::string engine, path;
  bool direct = false;
};

/// Writes (and fdatasyncs) then reads `bytes` (rounded up to whole 4096-byte
/// blocks) `repeats` times through a temporary offload file in
/// `directory`; nullopt with `error` (one line) when the directory cannot
/// hold it or a transfer fails.
std::optional<DiskBandwidth> measureDiskBandwidth(const std::string &directory,
                                                  std::size_t bytes,
                                                  int repeats,
                                                  std::string &error);

/// How much slower `work` runs while the disk moves bytes through the same
/// engine (a fraction: 0.3 = 30% longer; 0 when it runs as fast): `work`
/// timed alone (the median of `repeats`), then run as many times as take
/// about half the transfers' time while a write of `bytes` / 2 and a read
/// of `bytes` / 2 of a temporary offload file in `directory` are in flight
/// (the median of `repeats`); nullopt with `error` as
/// measureDiskBandwidth.
std::optional<double> measureComputeBesideDisk(const std::string &directory,
                                               std::size_t bytes,
                                               const std::function<void()> &work,
                                               int repeats, std::string &error);

/// The engine the runtime's nvme tier uses here: "uring" where available,
/// else "threads".
std::string preferredIoEngine();

} // namespace partition::runtime::offload

#endif // PARTITION_RUNTIME_OFFLOAD_BANDWIDTH_H
