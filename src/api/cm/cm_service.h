#pragma once
// What a consumer of a port's connection manager sees (the librdmacm drop-in): the consumer calls
// of cm::ConnectionManager, made thread-safe and stamped with the time, and events delivered to
// one handler. Every call is virtual so that a library handed a CmService by libibverbs
// (uroce_private_cm, docs/cm.md) runs libibverbs' copy of the code on libibverbs' object.
#include <cstdint>
#include <functional>
#include <span>

#include "api/cm/connection_manager.h"
#include "common/result.h"
#include "common/types.h"

namespace uroce::cm {

class CmService {
 public:
  // Called on the port's event thread, outside every progress pass and with no CM lock held, in
  // the order the CM emitted the events; the consumer's calls may run meanwhile on its threads.
  using EventHandler = std::function<void(CmEvent&&)>;

  virtual ~CmService() = default;
  virtual Gid local_gid() const = 0;
  virtual uint64_t ca_guid() const = 0;
  // Replaces the handler (empty: events are dropped and counted).
  virtual void set_event_handler(EventHandler handler) = 0;

  // ConnectionManager's calls. A MAD a call causes (REQ, REP, RTU, REJ, DREQ, SIDR_REQ,
  // SIDR_REP) is on the wire when it returns: a process may exit right after. The calls wait for
  // a progress pass in flight, never for the event handler, so they may be made under a lock the
  // handler takes.
  virtual Result<ListenerId> listen(uint64_t service_id) = 0;
  virtual int stop_listening(ListenerId id) = 0;
  virtual Result<ConnId> connect(const ConnectParams& p) = 0;
  virtual int accept(ConnId id, const AcceptParams& p) = 0;
  virtual int establish(ConnId id, std::span<const uint8_t> private_data) = 0;
  virtual int reject(ConnId id, std::span<const uint8_t> private_data) = 0;
  virtual int disconnect(ConnId id, std::span<const uint8_t> private_data) = 0;
  virtual int notify_established(ConnId id) = 0;
  virtual int destroy(ConnId id) = 0;
  virtual Result<ConnId> sidr_resolve(const Gid& peer, uint64_t service_id,
                                      std::span<const uint8_t> private_data) = 0;
  virtual int sidr_reply(ConnId id, uint32_t qpn, uint32_t qkey,
                         std::span<const uint8_t> private_data) = 0;
  virtual int sidr_reject(ConnId id, std::span<const uint8_t> private_data) = 0;
  virtual CmCounters counters() const = 0;
  // reject() with another REJ reason than consumer defined (rdma_reject_ece: 35).
  virtual int reject_with_reason(ConnId id, uint16_t reason,
                                 std::span<const uint8_t> private_data) = 0;
};

}  // namespace uroce::cm
