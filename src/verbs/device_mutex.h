#pragma once
// The locks of a device and its objects (verbs/device.h gives the order). A device whose every call
// comes from one thread (DeviceConfig::single_threaded: a simulated world, which runs its devices'
// passes, posts and polls on its loop's thread) leaves them unlocked; every other device locks as
// std::mutex / std::shared_mutex do. A flag set when the object is made and read per call, so one
// build of the verbs objects and the transport serves both.
#include <mutex>
#include <shared_mutex>

namespace uroce::verbs {

class DeviceMutex {
 public:
  void lock() {
    if (locking_) mu_.lock();
  }
  bool try_lock() { return !locking_ || mu_.try_lock(); }
  void unlock() {
    if (locking_) mu_.unlock();
  }
  // Before any use: the object belongs to a single-threaded device.
  void set_single_threaded(bool single) { locking_ = !single; }

 private:
  std::mutex mu_;
  bool locking_ = true;
};

class DeviceSharedMutex {
 public:
  void lock() {
    if (locking_) mu_.lock();
  }
  bool try_lock() { return !locking_ || mu_.try_lock(); }
  void unlock() {
    if (locking_) mu_.unlock();
  }
  void lock_shared() {
    if (locking_) mu_.lock_shared();
  }
  bool try_lock_shared() { return !locking_ || mu_.try_lock_shared(); }
  void unlock_shared() {
    if (locking_) mu_.unlock_shared();
  }
  void set_single_threaded(bool single) { locking_ = !single; }

 private:
  std::shared_mutex mu_;
  bool locking_ = true;
};

}  // namespace uroce::verbs
