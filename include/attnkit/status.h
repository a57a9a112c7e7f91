// Status: the result of every attnkit entry point. Errors carry a message that names the
// offending argument, so callers can surface it without decoding codes.
#pragma once

#include <string>
#include <utility>

namespace attnkit {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the request is malformed (shapes disagree, bad strides, bad indices, ...)
  kUnsupported,      // well-formed, but no backend/kernel serves it (e.g. a head dim not built)
  kCudaError,        // a CUDA runtime call or kernel launch failed
  kInternal,
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  static Status Invalid(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status Unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
  static Status Cuda(std::string m) { return {StatusCode::kCudaError, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

const char* to_string(StatusCode code);

}  // namespace attnkit

// Propagate a non-OK Status to the caller.
#define ATTNKIT_RETURN_IF_ERROR(expr)             \
  do {                                            \
    ::attnkit::Status _attnkit_st = (expr);       \
    if (!_attnkit_st.ok()) return _attnkit_st;    \
  } while (0)
