//===- ScheduleSvg.h - a schedule's timeline as an SVG picture ---*- C++ -*-===//
//
// Draws a timeline as the pipeline papers do (GPipe, Megatron, Zero
// Bubble): one row per stage, time to the right, F / B / W boxes in three
// colours labelled with their micro-batch, idle time left blank. With
// several chunks per stage a chunk's boxes are a lighter shade the later
// the chunk. Every action box is one <rect class="F|B|W"> line.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_SCHEDULING_SCHEDULESVG_H
#define PARTITION_SCHEDULING_SCHEDULESVG_H

#include "scheduling/Schedule.h"
#include "scheduling/ScheduleCheck.h"

#include <string>

namespace partition::pipeline {

/// The SVG document (standalone, no external resources).
std::string scheduleSvg(const Schedule &schedule, const Timeline &timeline);

} // namespace partition::pipeline

#endif // PARTITION_SCHEDULING_SCHEDULESVG_H
