//===- CommunicationThread.h - started collectives, off the main thread -*- C++ -*-===//
//
// The CPU backend's communication thread: one per rank, started with the
// first started collective. The main thread hands it a collective (start)
// and goes on computing; the thread runs the collectives one at a time, in
// the order they were started (a FIFO: every rank of a group starts the
// same collectives in the same order, and MPI matches them by that order
// on the group's started-collective communicator), driving MPI's
// non-blocking calls to completion (MpiCommunicator polls MPI_Test, with
// its timeout and PeerWatch's verdicts, from this thread). wait() blocks
// the main thread until one is done and rethrows what it threw.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_BACKEND_CPU_COMMUNICATIONTHREAD_H
#define PARTITION_RUNTIME_BACKEND_CPU_COMMUNICATIONTHREAD_H

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace partition::runtime::cpubackend {

class CommunicationThread {
public:
  using Clock = std::chrono::steady_clock;
  /// When a collective ran on the thread (for the trace's communication
  /// track).
  struct Span {
    Clock::time_point start, end;
  };

  CommunicationThread();
  /// Finishes the queued collectives, then joins the thread.
  ~CommunicationThread();
  CommunicationThread(const CommunicationThread &) = delete;
  CommunicationThread &operator=(const CommunicationThread &) = delete;

  /// Queues `collective`; returns its ticket (increasing from 0).
  uint64_t start(std::function<void()> collective);
  /// Blocks until the collective of `ticket` has run; rethrows its
  /// exception. Each ticket is waited for once.
  Span wait(uint64_t ticket);

private:
  void loop();

  std::mutex mutex;
  std::condition_variable queued, done;
  std::deque<std::function<void()>> queue;
  /// Tickets below `finished` have run; `failure` is the first exception
  /// (later collectives are skipped: the step is lost anyway).
  uint64_t next = 0, finished = 0;
  std::exception_ptr failure;
  /// The span of each ticket not yet waited for (waits need not come in
  /// start order: AdamW reads the first layers' bucket, started last, first).
  std::map<uint64_t, Span> spans;
  bool stopping = false;
  std::thread thread;
};

} // namespace partition::runtime::cpubackend

#endif // PARTITION_RUNTIME_BACKEND_CPU_COMMUNICATIONTHREAD_H
