//===- Trace.cpp - Chrome / Perfetto trace of a run ------------------------===//

#include "runtime/backend/Trace.h"

#include "runtime/comm/Communicator.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <stdexcept>

namespace partition::runtime {

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
  spans_.push_back(std::move(span));
}

namespace {

nlohmann::json spanJson(const TraceSpan &span) {
  return {{"name", span.name},   {"cat", span.category},
          {"ts", span.startUs},  {"dur", span.durationUs},
          {"label", span.label}, {"bytes", span.bytes},
          {"step", span.step},   {"tid", span.tid}};
}

} // namespace

std::string encodeSpans(const std::vector<TraceSpan> &spans) {
  nlohmann::json list = nlohmann::json::array();
  for (const TraceSpan &span : spans)
    list.push_back(spanJson(span));
  return list.dump();
}

std::vector<TraceSpan> decodeSpans(const std::string &text) {
  std::vector<TraceSpan> spans;
  for (const nlohmann::json &item : nlohmann::json::parse(text)) {
    TraceSpan span;
    span.name = item.at("name").get<std::string>();
    span.category = item.at("cat").get<std::string>();
    span.startUs = item.at("ts").get<double>();
    span.durationUs = item.at("dur").get<double>();
    span.label = item.at("label").get<std::string>();
    span.bytes = item.at("bytes").get<uint64_t>();
    span.step = item.at("step").get<int64_t>();
    span.tid = item.at("tid").get<int>();
    spans.push_back(std::move(span));
  }
  return spans;
}

std::string traceJson(const std::vector<std::vector<TraceSpan>> &ranks,
                      const std::vector<std::string> &names) {
  nlohmann::json events = nlohmann::json::array();
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    // Track names: the process is the rank, thread 0 its instructions,
    // thread 1 its step functions, thread 2 its started collectives as the
    // communication thread ran them, thread 3 its offload tier copies from
    // start to wait.
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", rank},
                      {"args", {{"name", names[rank]}}}});
    events.push_back({{"name", "process_sort_index"},
                      {"ph", "M"},
                      {"pid", rank},
                      {"args", {{"sort_index", rank}}}});
    for (auto [tid, name] : {std::pair<int, const char *>{0, "instructions"},
                             {1, "steps"},
                             {2, "communication"},
                             {3, "tier I/O"}})
      events.push_back({{"name", "thread_name"},
                        {"ph", "M"},
                        {"pid", rank},
                        {"tid", tid},
                        {"args", {{"name", name}}}});
    for (const TraceSpan &span : ranks[rank]) {
      nlohmann::json args = nlohmann::json::object();
      if (!span.label.empty())
        args["label"] = span.label;
      if (span.bytes)
        args["bytes"] = span.bytes;
      if (span.step >= 0)
        args["step"] = span.step;
      events.push_back({{"name", span.name},
                        {"cat", span.category},
                        {"ph", "X"},
                        {"pid", rank},
                        {"tid", span.tid},
                        {"ts", span.startUs},
                        {"dur", span.durationUs},
                        {"args", args}});
    }
  }
  nlohmann::json document = {{"traceEvents", events},
                             {"displayTimeUnit", "ms"}};
  return document.dump();
}

namespace {

/// Sends `text` to rank 0 of `world`: its length, then its bytes.
constexpr int kTraceTag = 23;

} // namespace

void writeTrace(const std::string &path, const TraceRecorder &trace,
                const std::string &name, comm::Communicator &world) {
  std::string mine = encodeSpans(trace.spans());
  if (world.rank() != 0) {
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
  std::vector<std::vector<TraceSpan>> ranks{trace.spans()};
  std::vector<std::string> names{name};
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
    names.push_back(texts[0]);
    ranks.push_back(decodeSpans(texts[1]));
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << traceJson(ranks, names) << "\n";
  out.close();
  if (!out)
    throw std::runtime_error(path + ": cannot write the trace (--trace); "
                             "check that its directory exists and is "
                             "writable");
}

} // namespace partition::runtime
