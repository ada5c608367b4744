#pragma once
// Result<T>: a value or an error code. uroce reports errors the way verbs does (an errno for a verb
// call, a completion status for a work request), so the error side is a small enum or an int, and
// the C++ API and the libibverbs ABI share one meaning for each failure.
#include <utility>
#include <variant>

#include "common/check.h"

namespace uroce {

template <typename T, typename E = int>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  static Result failure(E error) { return Result(std::in_place_index<1>, error); }

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() {
    UROCE_CHECK(ok());
    return std::get<0>(v_);
  }
  const T& value() const {
    UROCE_CHECK(ok());
    return std::get<0>(v_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }
  E error() const {
    UROCE_CHECK(!ok());
    return std::get<1>(v_);
  }

 private:
  template <size_t I, typename A>
  Result(std::in_place_index_t<I> i, A&& a) : v_(i, std::forward<A>(a)) {}
  std::variant<T, E> v_;
};

// Helper to write `return Err(EINVAL);` from a function returning Result<T>.
template <typename E>
struct Err {
  // A constructor rather than aggregate initialisation from parentheses, which clang before 16
  // (the fuzz build uses clang-14) does not support.
  constexpr Err(E e) : error(e) {}  // NOLINT: implicit by design
  E error;
  template <typename T>
  operator Result<T, E>() const {  // NOLINT: implicit by design
    return Result<T, E>::failure(error);
  }
};
template <typename E>
Err(E) -> Err<E>;

}  // namespace uroce
