// How the server knows its own (embedded) workers' calls: each carries kEmbeddedWorkerKey
// with a random value made per server start, which a worker process the server starts
// finds in its environment (kEmbeddedWorkerKeyVariable) and removes from it.
#pragma once

namespace anisoscope {

inline constexpr char kEmbeddedWorkerKey[] = "x-anisoscope-embedded-worker";
inline constexpr char kEmbeddedWorkerKeyVariable[] = "ANISOSCOPE_EMBEDDED_KEY";

}  // namespace anisoscope
