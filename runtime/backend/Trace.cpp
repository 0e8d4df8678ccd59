//===- Trace.cpp - Chrome / Perfetto trace of a run ------------------------===//

#include "runtime/backend/Trace.h"

#include "runtime/comm/Communicator.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <ostream>
#include <stdexcept>

namespace partition::runtime {

void TraceRecorder::add(TraceSpan span) {
  entries.push_back({nullptr, 0, 0, 0, 0});
  owned.push_back(std::move(span));
}

void TraceRecorder::add(std::string name, std::string category,
                        Clock::time_point start, int64_t step,
                        std::string label, uint64_t bytes, int tid) {
  TraceSpan span;
  span.name = std::move(name);
  span.category = std::move(category);
  span.startUs = microsecondsSince(start);
  span.durationUs = microsecondsSince(Clock::now()) - span.startUs;
  span.label = std::move(label);
  span.bytes = bytes;
  span.step = step;
  span.tid = tid;
  add(std::move(span));
}

namespace {

/// The wire format between ranks: per span its three strings (a 32-bit
/// length, then the bytes), the two times, bytes, step and track, in host
/// order (the ranks of one run share a byte order).
template <typename T> void put(std::string &out, T value) {
  out.append(reinterpret_cast<const char *>(&value), sizeof(value));
}

void putString(std::string &out, const std::string &text) {
  put<uint32_t>(out, static_cast<uint32_t>(text.size()));
  out += text;
}

/// Reads from `text` at `at`, refusing to read past its end.
class SpanReader {
public:
  explicit SpanReader(const std::string &text) : text(text) {}
  bool done() const { return at == text.size(); }
  template <typename T> T get() {
    T value;
    std::memcpy(&value, take(sizeof(T)), sizeof(T));
    return value;
  }
  std::string getString() {
    uint32_t length = get<uint32_t>();
    return std::string(take(length), length);
  }

private:
  const char *take(size_t bytes) {
    if (bytes > text.size() - at)
      throw std::runtime_error("trace: a rank's spans end early (" +
                               std::to_string(text.size()) + " bytes)");
    const char *data = text.data() + at;
    at += bytes;
    return data;
  }
  const std::string &text;
  size_t at = 0;
};

void encodeSpan(std::string &out, const TraceSpan &span) {
  putString(out, span.name);
  putString(out, span.category);
  putString(out, span.label);
  put(out, span.startUs);
  put(out, span.durationUs);
  put(out, span.bytes);
  put(out, span.step);
  put(out, static_cast<int32_t>(span.tid));
}

} // namespace

std::string encodeSpans(const std::vector<TraceSpan> &spans) {
  std::string out;
  for (const TraceSpan &span : spans)
    encodeSpan(out, span);
  return out;
}

std::string encodeSpans(const TraceRecorder &trace) {
  std::string out;
  trace.forEachSpan([&](const TraceSpan &span) { encodeSpan(out, span); });
  return out;
}

std::vector<TraceSpan> decodeSpans(const std::string &text) {
  std::vector<TraceSpan> spans;
  SpanReader reader(text);
  while (!reader.done()) {
    TraceSpan span;
    span.name = reader.getString();
    span.category = reader.getString();
    span.label = reader.getString();
    span.startUs = reader.get<double>();
    span.durationUs = reader.get<double>();
    span.bytes = reader.get<uint64_t>();
    span.step = reader.get<int64_t>();
    span.tid = reader.get<int32_t>();
    spans.push_back(std::move(span));
  }
  return spans;
}

namespace {

/// The "traceEvents" array's elements, one small JSON object at a time: a
/// document of every rank's events held whole took about 1 KB per span
/// (rank 0 of gpt2-tiny on 4 ranks: 700 MB after 100 steps, for a 32 MB
/// file).
class EventWriter {
public:
  EventWriter(std::ostream &out, bool first) : out(out), first(first) {}

  /// A rank's process and track names.
  void tracks(size_t rank, const std::string &name) {
    event({{"name", "process_name"},
           {"ph", "M"},
           {"pid", rank},
           {"args", {{"name", name}}}});
    event({{"name", "process_sort_index"},
           {"ph", "M"},
           {"pid", rank},
           {"args", {{"sort_index", rank}}}});
    // Thread 0 its instructions, thread 1 its step functions, thread 2
    // its started collectives as the communication thread ran them,
    // thread 3 its offload tier copies from start to wait.
    for (auto [tid, track] : {std::pair<int, const char *>{0, "instructions"},
                              {1, "steps"},
                              {2, "communication"},
                              {3, "tier I/O"}})
      event({{"name", "thread_name"},
             {"ph", "M"},
             {"pid", rank},
             {"tid", tid},
             {"args", {{"name", track}}}});
  }

  void span(size_t rank, const TraceSpan &span) {
    nlohmann::json args = nlohmann::json::object();
    if (!span.label.empty())
      args["label"] = span.label;
    if (span.bytes)
      args["bytes"] = span.bytes;
    if (span.step >= 0)
      args["step"] = span.step;
    event({{"name", span.name},
           {"cat", span.category},
           {"ph", "X"},
           {"pid", rank},
           {"tid", span.tid},
           {"ts", span.startUs},
           {"dur", span.durationUs},
           {"args", args}});
  }

private:
  void event(const nlohmann::json &json) {
    if (!first)
      out << ',';
    first = false;
    out << json.dump();
  }
  std::ostream &out;
  bool first;
};

} // namespace

void writeTraceEvents(std::ostream &out, size_t rank, const std::string &name,
                      const std::vector<TraceSpan> &spans, bool first) {
  EventWriter events(out, first);
  events.tracks(rank, name);
  for (const TraceSpan &span : spans)
    events.span(rank, span);
}

namespace {

/// Sends `text` to rank 0 of `world`: its length, then its bytes.
constexpr int kTraceTag = 23;

} // namespace

void writeTrace(const std::string &path, const TraceRecorder &trace,
                const std::string &name, comm::Communicator &world) {
  if (world.rank() != 0) {
    std::string mine = encodeSpans(trace);
    for (const std::string *text : {&name, static_cast<const std::string *>(&mine)}) {
      uint64_t length = text->size();
      world.sendEager(&length, sizeof(length), 0, kTraceTag,
                      {"trace to rank 0", -1});
      if (length)
        world.sendEager(text->data(), length, 0, kTraceTag,
                        {"trace to rank 0", -1});
    }
    world.completeSends({"trace to rank 0", -1});
    return;
  }
  // Rank 0 writes its own events, then each other rank's as it receives
  // them: one rank's spans in memory at a time.
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  EventWriter own(out, /*first=*/true);
  own.tracks(0, name);
  trace.forEachSpan([&](const TraceSpan &span) { own.span(0, span); });
  for (int rank = 1; rank < world.size(); ++rank) {
    std::string texts[2];
    for (std::string &text : texts) {
      uint64_t length = 0;
      world.recvBytes(&length, sizeof(length), rank, kTraceTag,
                      {"trace from every rank", -1});
      text.resize(length);
      if (length)
        world.recvBytes(text.data(), length, rank, kTraceTag,
                        {"trace from every rank", -1});
    }
    writeTraceEvents(out, rank, texts[0], decodeSpans(texts[1]),
                     /*first=*/false);
  }
  out << "]}\n";
  out.close();
  if (!out)
    throw std::runtime_error(path + ": cannot write the trace (--trace); "
                             "check that its directory exists and is "
                             "writable");
}

} // namespace partition::runtime
