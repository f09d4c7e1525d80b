// absl.cc - see absl.h.  The only C++ in cetcd: Abseil's switch is a C++
// function (its mangled name changes with the Abseil build), so it is
// called from here, behind a C function.
#include "util/absl.h"

#include <absl/synchronization/mutex.h>

extern "C" void absl_deadlock_detection_off(void)
{
    // An atomic store inside Abseil: idempotent and thread-safe.
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}
