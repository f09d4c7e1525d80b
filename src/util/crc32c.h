/*
 * crc32c.h - CRC-32C (Castagnoli), as used by the WAL, snapshots and HashKV.
 *
 * crc32c_extend(0, buf, len) is the CRC of buf; extend(crc(a), b) = crc(a|b).
 * Uses the SSE4.2 instruction when the CPU has it, a table otherwise.  Pure:
 * safe from any thread.
 */
#ifndef CETCD_UTIL_CRC32C_H
#define CETCD_UTIL_CRC32C_H

#include <stddef.h>
#include <stdint.h>

uint32_t crc32c_extend(uint32_t crc, const void *buf, size_t len);

#endif
