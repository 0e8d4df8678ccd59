//===- CommunicationThread.cpp - started collectives, off the main thread ===//

#include "runtime/backend/cpu/CommunicationThread.h"

#include <stdexcept>

namespace partition::runtime::cpubackend {

CommunicationThread::CommunicationThread() : thread([this] { loop(); }) {}

CommunicationThread::~CommunicationThread() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  queued.notify_one();
  thread.join();
}

uint64_t CommunicationThread::start(std::function<void()> collective) {
  uint64_t ticket;
  {
    std::lock_guard<std::mutex> lock(mutex);
    queue.push_back(std::move(collective));
    ticket = next++;
    spans[ticket] = Span{};
  }
  queued.notify_one();
  return ticket;
}

CommunicationThread::Span CommunicationThread::wait(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mutex);
  auto found = spans.find(ticket);
  if (found == spans.end())
    throw std::logic_error("communication thread: ticket " +
                           std::to_string(ticket) +
                           " was never started or already waited for");
  done.wait(lock, [&] { return finished > ticket || failure; });
  if (failure)
    std::rethrow_exception(failure);
  Span span = found->second;
  spans.erase(found);
  return span;
}

void CommunicationThread::loop() {
  std::unique_lock<std::mutex> lock(mutex);
  for (;;) {
    queued.wait(lock, [&] { return stopping || !queue.empty(); });
    if (queue.empty())
      return; // stopping, with nothing left to run
    std::function<void()> collective = std::move(queue.front());
    queue.pop_front();
    uint64_t ticket = finished;
    lock.unlock();
    Span span;
    span.start = Clock::now();
    std::exception_ptr error;
    try {
      collective();
    } catch (...) {
      error = std::current_exception();
    }
    span.end = Clock::now();
    lock.lock();
    spans[ticket] = span;
    if (error && !failure)
      failure = error;
    ++finished;
    done.notify_all();
  }
}

} // namespace partition::runtime::cpubackend
