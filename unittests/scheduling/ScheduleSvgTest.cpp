//===- ScheduleSvgTest.cpp - the picture of a timeline --------------------===//

#include "scheduling/ScheduleSvg.h"

#include <gtest/gtest.h>

using namespace partition::pipeline;

namespace {

int count(const std::string &text, const std::string &what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos;
       at = text.find(what, at + 1))
    ++n;
  return n;
}

std::string picture(ScheduleKind kind, int p, int m, int v, ActionCost cost) {
  auto schedule = generateSchedule({kind, p, m, v, 0});
  EXPECT_TRUE(bool(schedule));
  SimulationOptions options;
  options.cost = std::move(cost);
  auto timeline = simulate(*schedule, options);
  EXPECT_TRUE(bool(timeline));
  return scheduleSvg(*schedule, *timeline);
}

TEST(ScheduleSvg, OneBoxPerActionInThreeColours) {
  std::string svg = picture(ScheduleKind::ZeroBubbleH1, 4, 8, 1,
                            uniformCosts(1, 1, 1));
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_EQ(count(svg, "<rect class=\"F\""), 32);
  EXPECT_EQ(count(svg, "<rect class=\"B\""), 32);
  EXPECT_EQ(count(svg, "<rect class=\"W\""), 32);
  EXPECT_EQ(count(svg, "<rect class=\"row\""), 4);
  EXPECT_EQ(count(svg, "fill=\"#4682dc\""), 33); // F boxes and the legend's
  EXPECT_EQ(count(svg, "fill=\"#28b4b4\""), 33);
  EXPECT_EQ(count(svg, "fill=\"#78be50\""), 33);
  EXPECT_NE(svg.find(">stage 3</text>"), std::string::npos);
  // (p - 1) / (3 m + p - 1) = 3 / 27.
  EXPECT_NE(svg.find("zero-bubble: 4 stages, 8 micro-batches | bubble 11.11% "
                     "| step time 27</text>"),
            std::string::npos);
  // The first box: F0 on stage 0 at time 0, 1000 / 27 px per unit.
  EXPECT_NE(svg.find("<rect class=\"F\" x=\"70\" y=\"34\" width=\"37.04\""),
            std::string::npos);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
}

TEST(ScheduleSvg, LaterChunksLighterAndEmptyBoxesLeftOut) {
  // W costs nothing: no W boxes. Chunk 1 of 2 is half-way to white.
  std::string svg = picture(ScheduleKind::Interleaved1F1B, 2, 4, 2,
                            uniformCosts(1, 1, 0));
  EXPECT_EQ(count(svg, "<rect class=\"W\""), 0);
  EXPECT_EQ(count(svg, "<rect class=\"F\""), 16);
  EXPECT_EQ(count(svg, "fill=\"#a3c1ee\""), 8); // F of chunk 1
  EXPECT_NE(svg.find("2 chunks per stage"), std::string::npos);
}

} // namespace
