//===- Interrupt.h - SIGINT / SIGTERM end a run at a step boundary -*- C++ -*-===//
//
// A training run stopped by Ctrl-C or a scheduler's SIGTERM should not lose
// its work: the first signal only records itself (the one async-signal-safe
// thing to do), and the training loop finishes the step it is in, saves and
// writes its metrics, then exits 128 + the signal number as shells expect.
// A second signal ends the process at once, for a user who means it.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_INTERRUPT_H
#define PARTITION_RUNTIME_INTERRUPT_H

namespace partition::runtime {

/// Installs the handlers for SIGINT and SIGTERM (once per process; again
/// is harmless). Without them, pendingInterrupt() is always 0.
void installInterruptHandlers();

/// The first SIGINT or SIGTERM received since installInterruptHandlers(),
/// or 0.
int pendingInterrupt();

/// "SIGINT", "SIGTERM", or "a signal".
const char *interruptName(int signal);

} // namespace partition::runtime

#endif // PARTITION_RUNTIME_INTERRUPT_H
