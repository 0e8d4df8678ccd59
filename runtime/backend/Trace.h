//===- Trace.h - what ran when, as a Chrome / Perfetto trace ----*- C++ -*-===//
//
// `partition-run --trace FILE`: every rank records a span per instruction it
// runs (a kernel by its name; a collective, send or receive by its kind,
// label and bytes; a receive's span covers its wait for the data), plus one
// span per step function, plus a communication track with the span of each
// started collective as it ran in the background; at the end rank 0
// gathers every rank's spans over the world communicator and writes one
// JSON file, a rank at a time, in the Chrome trace event format
// ({"traceEvents": [...]}, complete events "ph": "X", microseconds), one
// process per rank (pid = rank) named "rank R (stage S)". Open it in
// ui.perfetto.dev or chrome://tracing.
//
// Times are microseconds since a common origin: every rank takes its clock
// after one world barrier at start-up, so the tracks line up to the
// barrier's skew (microseconds on one node).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_TRACE_H
#define PARTITION_RUNTIME_TRACE_H

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace partition::runtime {

namespace comm {
class Communicator;
} // namespace comm

/// One complete event.
struct TraceSpan {
  std::string name;
  /// "kernel", "collective", "send", "recv", "function" or, under the
  /// micro-batch loop, "microbatch".
  std::string category;
  double startUs = 0, durationUs = 0;
  /// Collectives and transfers: their label and bytes (0: none).
  std::string label;
  uint64_t bytes = 0;
  /// The training step (1-based), -1 outside steps.
  int64_t step = -1;
  /// 0: instructions; 1: step functions (a track of their own); 2: started
  /// collectives, from when the communication thread began them to when
  /// they completed (the communication track); 3: offload tier copies,
  /// from their start to their wait's return (the tier track).
  int tid = 0;
};

class TraceRecorder {
public:
  using Clock = std::chrono::steady_clock;
  /// Times count from `origin` (taken after a world barrier).
  explicit TraceRecorder(Clock::time_point origin) : origin(origin) {}
  double microsecondsSince(Clock::time_point start) const {
    return std::chrono::duration<double, std::micro>(start - origin).count();
  }
  void add(TraceSpan span);
  /// A span from `start` to now.
  void add(std::string name, std::string category, Clock::time_point start,
           int64_t step, std::string label = {}, uint64_t bytes = 0,
           int tid = 0);
  /// A span of an instruction from `start` to `end`: `prototype`'s name,
  /// category, label and bytes, which are not copied (the backend's, alive
  /// until the trace is written), with this step and track. An
  /// instruction's span is then 40 bytes and no allocation on the traced
  /// step's path.
  void add(const TraceSpan &prototype, Clock::time_point start,
           Clock::time_point end, int64_t step, int tid = 0) {
    double startUs = microsecondsSince(start);
    entries.push_back(
        {&prototype, startUs, microsecondsSince(end) - startUs, step, tid});
  }
  /// Calls `visit` on every span, in the order added (an instruction's
  /// built anew from its prototype and entry, so that none is held).
  template <typename Visit> void forEachSpan(Visit &&visit) const {
    size_t nextOwned = 0;
    TraceSpan span;
    for (const Entry &entry : entries) {
      if (!entry.prototype) {
        visit(owned[nextOwned++]);
        continue;
      }
      span = *entry.prototype;
      span.startUs = entry.startUs;
      span.durationUs = entry.durationUs;
      span.step = entry.step;
      span.tid = entry.tid;
      visit(span);
    }
  }

private:
  /// A span: its prototype's fields with its own times, or (without a
  /// prototype) one of `owned`, in order.
  struct Entry {
    const TraceSpan *prototype;
    double startUs, durationUs;
    int64_t step;
    int tid;
  };
  Clock::time_point origin;
  std::vector<Entry> entries;
  std::vector<TraceSpan> owned;
};

/// Appends to `out` the "traceEvents" of rank `rank` (named `name`): its
/// track names, then its spans under pid `rank`; `first` when nothing
/// precedes them in the array (else a comma does).
void writeTraceEvents(std::ostream &out, size_t rank, const std::string &name,
                      const std::vector<TraceSpan> &spans, bool first);

/// Collective over `world`: rank 0 receives every rank's spans and name and
/// writes `path`; throws std::runtime_error (rank 0) when it cannot.
void writeTrace(const std::string &path, const TraceRecorder &trace,
                const std::string &name, comm::Communicator &world);

/// Spans as bytes and back (what writeTrace sends between ranks);
/// decodeSpans throws std::runtime_error on bytes that end mid-span.
std::string encodeSpans(const std::vector<TraceSpan> &spans);
std::string encodeSpans(const TraceRecorder &trace);
std::vector<TraceSpan> decodeSpans(const std::string &text);

} // namespace partition::runtime

#endif // PARTITION_RUNTIME_TRACE_H
