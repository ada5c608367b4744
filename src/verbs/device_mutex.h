#pragma once
// The locks of a device and its objects (verbs/device.h gives the order). A device whose every call
// comes from one thread (DeviceConfig::single_threaded: a simulated world, which runs its devices'
// passes, posts and polls on its loop's thread) leaves them unlocked; every other device locks as
// std::mutex / std::shared_mutex do. A flag set when the object is made and read per call, so one
// build of the verbs objects and the transport serves both.
#include <concepts>
#include <mutex>
#include <shared_mutex>

namespace uroce::verbs {

// Mutex is std::mutex or std::shared_mutex; the shared calls exist for the latter only.
template <class Mutex>
class DeviceLock {
 public:
  void lock() {
    if (locking_) mu_.lock();
  }
  bool try_lock() { return !locking_ || mu_.try_lock(); }
  void unlock() {
    if (locking_) mu_.unlock();
  }
  void lock_shared() requires std::same_as<Mutex, std::shared_mutex> {
    if (locking_) mu_.lock_shared();
  }
  bool try_lock_shared() requires std::same_as<Mutex, std::shared_mutex> {
    return !locking_ || mu_.try_lock_shared();
  }
  void unlock_shared() requires std::same_as<Mutex, std::shared_mutex> {
    if (locking_) mu_.unlock_shared();
  }
  // Before any use: the object belongs to a single-threaded device.
  void set_single_threaded(bool single) { locking_ = !single; }

 private:
  Mutex mu_;
  bool locking_ = true;
};

using DeviceMutex = DeviceLock<std::mutex>;
using DeviceSharedMutex = DeviceLock<std::shared_mutex>;

}  // namespace uroce::verbs
