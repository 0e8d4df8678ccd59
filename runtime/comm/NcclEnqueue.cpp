//===- NcclEnqueue.cpp - NcclCommunicator's enqueue-only forms ------------===//
//
// The forms the CUDA backend drives itself: each enqueues its NCCL call on
// the communicator's stream and returns; the backend orders the stream
// against its compute stream with events (runtime/backend/cuda).
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/NcclInternal.h"

namespace partition::runtime::comm {

//===----------------------------------------------------------------------===//
// Enqueue-only forms
//===----------------------------------------------------------------------===//

void NcclCommunicator::enqueueAllReduce(const float *send, float *recv,
                                        size_t count, ReduceOp op,
                                        const Context &ctx) {
  const char *name = "all_reduce";
  DeviceScope scope(*this, name, ctx);
  allReduceOn(name, send, recv, count, ncclFloat32, op, ctx, deadline());
}

void NcclCommunicator::enqueueAllGather(const float *send, float *recv,
                                        size_t countPerRank,
                                        const Context &ctx) {
  const char *name = "all_gather";
  DeviceScope scope(*this, name, ctx);
  allGatherOn(name, send, recv, countPerRank, ncclFloat32, ctx, deadline());
}

void NcclCommunicator::enqueueReduceScatter(const float *send, float *recv,
                                            size_t countPerRank, ReduceOp op,
                                            const Context &ctx) {
  const char *name = "reduce_scatter";
  DeviceScope scope(*this, name, ctx);
  reduceScatterOn(name, send, recv, countPerRank, ncclFloat32, op, ctx,
                  deadline());
}

void NcclCommunicator::enqueueAllReduce(const void *send, void *recv,
                                        size_t count, DataType type,
                                        ReduceOp op, const Context &ctx) {
  const char *name = "all_reduce";
  DeviceScope scope(*this, name, ctx);
  allReduceOn(name, send, recv, count, ncclType(type), op, ctx, deadline());
}

void NcclCommunicator::enqueueAllGather(const void *send, void *recv,
                                        size_t countPerRank, DataType type,
                                        const Context &ctx) {
  const char *name = "all_gather";
  DeviceScope scope(*this, name, ctx);
  allGatherOn(name, send, recv, countPerRank, ncclType(type), ctx, deadline());
}

void NcclCommunicator::enqueueReduceScatter(const void *send, void *recv,
                                            size_t countPerRank, DataType type,
                                            ReduceOp op, const Context &ctx) {
  const char *name = "reduce_scatter";
  DeviceScope scope(*this, name, ctx);
  reduceScatterOn(name, send, recv, countPerRank, ncclType(type), op, ctx,
                  deadline());
}

void NcclCommunicator::enqueueAllReduceBucket(const Span *spans,
                                              size_t numSpans, DataType type,
                                              ReduceOp op, const Context &ctx) {
  const char *name = "all_reduce";
  DeviceScope scope(*this, name, ctx);
  Clock::time_point until = deadline();
  if (numSpans == 1) {
    allReduceOn(name, spans[0].data, spans[0].data, spans[0].count,
                ncclType(type), op, ctx, until);
    return;
  }
  // Inside a group NCCL only records the operations; ncclGroupEnd launches
  // them together (and may leave the communicator in progress).
  checkNccl(ncclGroupStart(), comm_, name, ctx, until);
  for (size_t i = 0; i < numSpans; ++i)
    checkNccl(ncclAllReduce(spans[i].data, spans[i].data, spans[i].count,
                            ncclType(type), ncclOp(op), comm_, stream_),
              comm_, name, ctx, until);
  checkNccl(ncclGroupEnd(), comm_, name, ctx, until);
}

void NcclCommunicator::enqueueAllToAll(const float *send, float *recv,
                                       size_t countPerRank,
                                       const Context &ctx) {
  const char *name = "all_to_all";
  DeviceScope scope(*this, name, ctx);
  allToAllOn(name, send, recv, countPerRank, ctx, deadline());
}

void NcclCommunicator::enqueueAllToAllBytes(
    const void *send, const std::vector<size_t> &sendBytes, void *recv,
    const std::vector<size_t> &recvBytes, const Context &ctx) {
  const char *name = "all_to_all";
  DeviceScope scope(*this, name, ctx);
  allToAllBytesOn(name, send, sendBytes, recv, recvBytes, ctx, deadline());
}

void NcclCommunicator::enqueueBroadcast(float *data, size_t count, int root,
                                        const Context &ctx) {
  const char *name = "broadcast";
  DeviceScope scope(*this, name, ctx);
  broadcastOn(name, data, count, root, ctx, deadline());
}

void NcclCommunicator::enqueueSend(const float *data, size_t count, int peer,
                                   int tag, const Context &ctx) {
  const char *name = "send";
  DeviceScope scope(*this, name, ctx);
  sendOn(name, data, count, peer, tag, ctx, deadline());
}

void NcclCommunicator::enqueueRecv(float *data, size_t count, int peer, int tag,
                                   const Context &ctx) {
  const char *name = "recv";
  DeviceScope scope(*this, name, ctx);
  recvOn(name, data, count, peer, tag, ctx, deadline());
}

void NcclCommunicator::enqueueSendRecv(const float *send, size_t sendCount,
                                       int sendPeer, float *recv,
                                       size_t recvCount, int recvPeer,
                                       const Context &ctx) {
  const char *name = "send_recv";
  DeviceScope scope(*this, name, ctx);
  sendRecvOn(name, send, sendCount, sendPeer, recv, recvCount, recvPeer, ctx,
             deadline());
}

void NcclCommunicator::enqueueSendBytes(const void *data, size_t bytes,
                                        int peer, const Context &ctx) {
  const char *name = "send";
  DeviceScope scope(*this, name, ctx);
  checkPeer(peer, "peer", name, ctx);
  checkNccl(ncclSend(data, bytes, ncclUint8, peer, comm_, stream_), comm_, name,
            ctx, deadline());
}

void NcclCommunicator::enqueueRecvBytes(void *data, size_t bytes, int peer,
                                        const Context &ctx) {
  const char *name = "recv";
  DeviceScope scope(*this, name, ctx);
  checkPeer(peer, "peer", name, ctx);
  checkNccl(ncclRecv(data, bytes, ncclUint8, peer, comm_, stream_), comm_, name,
            ctx, deadline());
}

void NcclCommunicator::synchronize(const Context &ctx) {
  const char *name = "synchronize";
  DeviceScope scope(*this, name, ctx);
  waitStream(stream_, name, ctx, deadline());
}

void NcclCommunicator::synchronizeWith(cudaStream_t stream,
                                       const Context &ctx) {
  const char *name = "synchronize";
  DeviceScope scope(*this, name, ctx);
  waitStream(stream, name, ctx, deadline());
}

} // namespace partition::runtime::comm
