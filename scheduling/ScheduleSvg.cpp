//===- ScheduleSvg.cpp - a schedule's timeline as an SVG picture ----------===//

#include "scheduling/ScheduleSvg.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace partition::pipeline {

namespace {

constexpr double kLeft = 70, kTop = 34, kRowHeight = 26, kRowGap = 4;
constexpr double kTargetWidth = 1000;

struct Rgb {
  int r, g, b;
};

// The Zero Bubble paper's palette: forward blue, input gradient teal,
// weight gradient green.
Rgb baseColour(ActionKind kind) {
  switch (kind) {
  case ActionKind::Forward:
    return {70, 130, 220};
  case ActionKind::BackwardInput:
    return {40, 180, 180};
  case ActionKind::BackwardWeight:
    return {120, 190, 80};
  }
  return {128, 128, 128};
}

std::string colour(ActionKind kind, int chunk, int chunks) {
  Rgb c = baseColour(kind);
  // Later chunks are mixed with white, up to half-way.
  double t = chunks > 1 ? 0.5 * chunk / (chunks - 1) : 0.0;
  auto mix = [&](int x) { return (int)(x + (255 - x) * t + 0.5); };
  char out[8];
  std::snprintf(out, sizeof out, "#%02x%02x%02x", mix(c.r), mix(c.g),
                mix(c.b));
  return out;
}

std::string number(double x) {
  char out[32];
  std::snprintf(out, sizeof out, "%.2f", x);
  std::string s = out;
  while (s.back() == '0')
    s.pop_back();
  if (s.back() == '.')
    s.pop_back();
  return s;
}

} // namespace

std::string scheduleSvg(const Schedule &schedule, const Timeline &timeline) {
  const int p = schedule.stages(), v = schedule.chunks();
  const double span = std::max(timeline.makespan, 1e-9);
  // Unit costs of a long schedule stay at least 4 px wide, a short one at
  // most 40 px per unit.
  const double scale = std::clamp(kTargetWidth / span, 4.0, 40.0);
  const double width = kLeft + span * scale + 20;
  const double rowsBottom = kTop + p * (kRowHeight + kRowGap);
  const double height = rowsBottom + 40;

  std::ostringstream os;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << number(width)
     << "\" height=\"" << number(height) << "\" viewBox=\"0 0 "
     << number(width) << " " << number(height)
     << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  os << "<rect class=\"background\" width=\"100%\" height=\"100%\" "
        "fill=\"white\"/>\n";
  os << "<text x=\"" << kLeft << "\" y=\"20\" font-size=\"14\">"
     << scheduleName(schedule.config.kind) << ": " << p << " stages, "
     << schedule.microbatches() << " micro-batches";
  if (v > 1)
    os << ", " << v << " chunks per stage";
  os << " | bubble " << number(100 * timeline.bubbleFraction())
     << "% | step time " << number(timeline.makespan) << "</text>\n";

  for (int s = 0; s < p; ++s) {
    double y = kTop + s * (kRowHeight + kRowGap);
    os << "<text x=\"8\" y=\"" << number(y + kRowHeight / 2 + 4)
       << "\">stage " << s << "</text>\n";
    // The row's frame: idle time shows as blank inside it.
    os << "<rect class=\"row\" x=\"" << kLeft << "\" y=\"" << number(y)
       << "\" width=\"" << number(span * scale) << "\" height=\""
       << kRowHeight << "\" fill=\"none\" stroke=\"#cccccc\"/>\n";
    for (const Span &box : timeline.spans[s]) {
      double x = kLeft + box.start * scale;
      double w = (box.end - box.start) * scale;
      if (w <= 0)
        continue;
      const Action &a = box.action;
      os << "<rect class=\"" << actionLetter(a.kind) << "\" x=\"" << number(x)
         << "\" y=\"" << number(y) << "\" width=\"" << number(w)
         << "\" height=\"" << kRowHeight << "\" fill=\""
         << colour(a.kind, a.chunk, v)
         << "\" stroke=\"white\" stroke-width=\"1\"><title>"
         << formatAction(a, v) << " on stage " << s << ": "
         << number(box.start) << " to " << number(box.end)
         << "</title></rect>\n";
      // Labels only where they fit.
      if (w >= 10)
        os << "<text x=\"" << number(x + w / 2) << "\" y=\""
           << number(y + kRowHeight / 2 + 4)
           << "\" text-anchor=\"middle\" fill=\"white\">" << a.microbatch
           << "</text>\n";
    }
  }

  double y = rowsBottom + 12;
  double x = kLeft;
  for (auto [kind, label] :
       {std::pair{ActionKind::Forward, "F: forward"},
        std::pair{ActionKind::BackwardInput, "B: input gradient"},
        std::pair{ActionKind::BackwardWeight, "W: weight gradient"}}) {
    os << "<rect class=\"legend\" x=\"" << number(x) << "\" y=\"" << number(y)
       << "\" width=\"14\" height=\"14\" fill=\"" << colour(kind, 0, v)
       << "\"/>\n";
    os << "<text x=\"" << number(x + 20) << "\" y=\"" << number(y + 12)
       << "\">" << label << "</text>\n";
    x += 160;
  }
  if (v > 1)
    os << "<text x=\"" << number(x) << "\" y=\"" << number(y + 12)
       << "\">lighter: later chunk; label: micro-batch</text>\n";
  else
    os << "<text x=\"" << number(x) << "\" y=\"" << number(y + 12)
       << "\">label: micro-batch</text>\n";
  os << "</svg>\n";
  return os.str();
}

} // namespace partition::pipeline
