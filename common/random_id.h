// Unguessable ids: 128 bits from the operating system's random source, as 32 hex digits.
// Thread-safe.
#pragma once

#include <string>

namespace anisoscope {

std::string RandomId128();

}  // namespace anisoscope
