// gRPC message limits, set deliberately on both ends: a worker's upload of the largest
// supported shape (Pythia-12B: 36 layers x 40 heads x 128 dims, four vector kinds) is about
// 6 MB, past gRPC's 4 MB default; 64 MiB leaves room for ten times that.
#pragma once

namespace anisoscope {

inline constexpr int kMaxMessageBytes = 64 << 20;

}  // namespace anisoscope
