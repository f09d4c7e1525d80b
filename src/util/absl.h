/*
 * absl.h - the one Abseil setting cetcd changes for the gRPC C core.
 *
 * gRPC's locks are absl::Mutex.  Debian builds Abseil without NDEBUG, which
 * leaves absl::Mutex's deadlock detection on: every lock and unlock updates
 * a global lock-order graph (GraphCycles) under a global spin lock.  In a
 * put under load that was 3-4% of the server's CPU (and as much of
 * cetcd-bench's); release builds of Abseil have it off.  cetcd takes its
 * own locks with pthreads, and no deadlock report of Abseil's would be
 * seen anyway (it logs to stderr and carries on).
 *
 * Call absl_deadlock_detection_off before grpc_init; any thread, any number
 * of times (the first call does the work).  Cannot fail.
 */
#ifndef CETCD_UTIL_ABSL_H
#define CETCD_UTIL_ABSL_H

#ifdef __cplusplus
extern "C" {
#endif

void absl_deadlock_detection_off(void);

#ifdef __cplusplus
}
#endif

#endif
