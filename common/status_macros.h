// RETURN_IF_ERROR / ASSIGN_OR_RETURN for absl::Status and absl::StatusOr.
// Abseil 20220623 ships neither, so the project defines them once, here.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define ANISOSCOPE_CONCAT_INNER(a, b) a##b
#define ANISOSCOPE_CONCAT(a, b) ANISOSCOPE_CONCAT_INNER(a, b)

// Returns the status from the enclosing function when `expr` is not OK.
#define RETURN_IF_ERROR(expr)            \
  do {                                   \
    const absl::Status _status = (expr); \
    if (!_status.ok()) return _status;   \
  } while (false)

// `ASSIGN_OR_RETURN(auto x, MakeX());` declares `x` or returns the error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(ANISOSCOPE_CONCAT(_status_or_, __LINE__), lhs, expr)

#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()
