//===- TraceTest.cpp - the trace's spans between ranks and as JSON --------===//

#include "runtime/backend/Trace.h"

#include <chrono>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sstream>
#include <stdexcept>

namespace partition::runtime {
namespace {

std::vector<TraceSpan> sampleSpans() {
  TraceSpan kernel;
  kernel.name = "linear";
  kernel.category = "kernel";
  kernel.startUs = 12.5;
  kernel.durationUs = 3.25;
  kernel.step = 1;
  TraceSpan collective;
  collective.name = "all_reduce";
  collective.category = "collective";
  collective.startUs = 20;
  collective.durationUs = 7.75;
  collective.label = "bucket 3 \"wte\" [dp]"; // quotes: escaped in JSON
  collective.bytes = 1 << 20;
  collective.step = 2;
  collective.tid = 2;
  TraceSpan outside; // outside steps, no label: no args
  outside.name = "train_step";
  outside.category = "function";
  outside.tid = 1;
  return {kernel, collective, outside};
}

TEST(TraceTest, SpansRoundTripBetweenRanks) {
  std::vector<TraceSpan> spans = sampleSpans();
  std::vector<TraceSpan> back = decodeSpans(encodeSpans(spans));
  ASSERT_EQ(back.size(), spans.size());
  for (size_t i = 0; i < spans.size(); ++i) {
    EXPECT_EQ(back[i].name, spans[i].name);
    EXPECT_EQ(back[i].category, spans[i].category);
    EXPECT_EQ(back[i].label, spans[i].label);
    EXPECT_EQ(back[i].startUs, spans[i].startUs);
    EXPECT_EQ(back[i].durationUs, spans[i].durationUs);
    EXPECT_EQ(back[i].bytes, spans[i].bytes);
    EXPECT_EQ(back[i].step, spans[i].step);
    EXPECT_EQ(back[i].tid, spans[i].tid);
  }
  EXPECT_TRUE(decodeSpans(encodeSpans({})).empty());
}

TEST(TraceTest, RecorderKeepsInstructionSpansByPrototypeInOrder) {
  std::vector<TraceSpan> prototypes = sampleSpans();
  using Clock = TraceRecorder::Clock;
  Clock::time_point origin = Clock::now();
  auto at = [&](int64_t microseconds) {
    return origin + std::chrono::microseconds(microseconds);
  };
  TraceRecorder trace(origin);
  trace.add(prototypes[1], at(40), at(42), 7, /*tid=*/2);
  TraceSpan own;
  own.name = "replica gradient sum";
  own.category = "collective";
  own.startUs = 45;
  own.step = 7;
  trace.add(own);
  trace.add(prototypes[0], at(50), at(51), 8);
  std::vector<TraceSpan> spans = decodeSpans(encodeSpans(trace));
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0].name, "all_reduce");
  EXPECT_EQ(spans[0].label, prototypes[1].label);
  EXPECT_EQ(spans[0].bytes, prototypes[1].bytes);
  EXPECT_EQ(spans[0].startUs, 40);
  EXPECT_EQ(spans[0].durationUs, 2);
  EXPECT_EQ(spans[0].step, 7);
  EXPECT_EQ(spans[0].tid, 2);
  EXPECT_EQ(spans[1].name, "replica gradient sum");
  EXPECT_EQ(spans[1].startUs, 45);
  EXPECT_EQ(spans[2].name, "linear");
  EXPECT_EQ(spans[2].startUs, 50);
  EXPECT_EQ(spans[2].step, 8);
  EXPECT_EQ(spans[2].tid, 0);
}

TEST(TraceTest, TruncatedSpansAreRefused) {
  std::string bytes = encodeSpans(sampleSpans());
  for (size_t cut : {size_t(1), size_t(7), bytes.size() - 1})
    EXPECT_THROW(decodeSpans(bytes.substr(0, cut)), std::runtime_error)
        << "cut at " << cut;
}

TEST(TraceTest, EventsOfTwoRanksFormOneDocument) {
  std::ostringstream out;
  out << "{\"traceEvents\":[";
  writeTraceEvents(out, 0, "rank 0 (stage 0)", sampleSpans(), true);
  writeTraceEvents(out, 1, "rank 1 (stage 1)", {}, false);
  out << "]}";
  nlohmann::json document = nlohmann::json::parse(out.str());
  const nlohmann::json &events = document.at("traceEvents");
  // Per rank: its name, sort index and four track names; then its spans.
  ASSERT_EQ(events.size(), 6u + 3u + 6u);
  EXPECT_EQ(events[0].at("args").at("name"), "rank 0 (stage 0)");
  const nlohmann::json &collective = events[7];
  EXPECT_EQ(collective.at("ph"), "X");
  EXPECT_EQ(collective.at("pid"), 0);
  EXPECT_EQ(collective.at("tid"), 2);
  EXPECT_EQ(collective.at("ts"), 20.0);
  EXPECT_EQ(collective.at("dur"), 7.75);
  EXPECT_EQ(collective.at("args").at("label"), "bucket 3 \"wte\" [dp]");
  EXPECT_EQ(collective.at("args").at("bytes"), 1 << 20);
  EXPECT_EQ(collective.at("args").at("step"), 2);
  EXPECT_TRUE(events[8].at("args").empty());
  EXPECT_EQ(events[9].at("args").at("name"), "rank 1 (stage 1)");
  EXPECT_EQ(events[9].at("pid"), 1);
}

} // namespace
} // namespace partition::runtime
