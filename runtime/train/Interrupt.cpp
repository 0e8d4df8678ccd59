//===- Interrupt.cpp - SIGINT / SIGTERM end a run at a step boundary ------===//

#include "runtime/train/Interrupt.h"

#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstring>

namespace partition::runtime {
namespace {

volatile std::sig_atomic_t received = 0;

void onSignal(int signal) {
  if (received == 0) {
    received = signal;
    return;
  }
  // The second signal: write(2) and _exit(2) are async-signal-safe, stdio
  // and exit() are not.
  static const char message[] =
      "partition-run: interrupted again; exiting now without saving\n";
  ssize_t ignored = write(STDERR_FILENO, message, sizeof(message) - 1);
  (void)ignored;
  _exit(128 + signal);
}

} // namespace

void installInterruptHandlers() {
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = onSignal;
  sigemptyset(&action.sa_mask);
  // Restart interrupted system calls: file writes and MPI's polling carry
  // on, and the loop looks at the flag at the next step boundary.
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

int pendingInterrupt() { return received; }

const char *interruptName(int signal) {
  switch (signal) {
  case SIGINT:
    return "SIGINT";
  case SIGTERM:
    return "SIGTERM";
  default:
    return "a signal";
  }
}

} // namespace partition::runtime
