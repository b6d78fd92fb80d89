/* hashes.h: v1model's hash algorithms as BMv2 computes them, for the generated program's hash and
 * checksum code (the twin of p4target/backends/hashes.py). */
#ifndef AGGNET_HASHES_H
#define AGGNET_HASHES_H
#include "program.h"

/* Each over a ++ b (the inputs, then the payload where a calculation takes it). */
static inline u64 hash_crc16(const u8 *a, u32 na, const u8 *b, u32 nb) {
    u32 crc = 0;
    for (int part = 0; part < 2; part++) {
        const u8 *d = part ? b : a; u32 n = part ? nb : na;
        for (u32 i = 0; i < n; i++) {
            crc ^= d[i];
            for (int k = 0; k < 8; k++) crc = (crc & 1) ? (crc >> 1) ^ 0xA001 : crc >> 1;
        }
    }
    return crc;
}

static inline u64 hash_crc32(const u8 *a, u32 na, const u8 *b, u32 nb) {
    u32 crc = 0xFFFFFFFFu;
    for (int part = 0; part < 2; part++) {
        const u8 *d = part ? b : a; u32 n = part ? nb : na;
        for (u32 i = 0; i < n; i++) {
            crc ^= d[i];
            for (int k = 0; k < 8; k++) crc = (crc & 1) ? (crc >> 1) ^ 0xEDB88320u : crc >> 1;
        }
    }
    return crc ^ 0xFFFFFFFFu;
}

static inline u64 hash_csum16(const u8 *a, u32 na, const u8 *b, u32 nb) {
    u64 sum = 0, pos = 0;
    for (int part = 0; part < 2; part++) {
        const u8 *d = part ? b : a; u32 n = part ? nb : na;
        for (u32 i = 0; i < n; i++, pos++) sum += (pos & 1) ? d[i] : (u64)d[i] << 8;
    }
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    return ~sum & 0xFFFF;
}

static inline u64 hash_xor16(const u8 *a, u32 na, const u8 *b, u32 nb) {
    u64 x = 0, pos = 0;
    for (int part = 0; part < 2; part++) {
        const u8 *d = part ? b : a; u32 n = part ? nb : na;
        for (u32 i = 0; i < n; i++, pos++) x ^= (pos & 1) ? d[i] : (u64)d[i] << 8;
    }
    return x;
}

static inline u64 hash_identity(const u8 *a, u32 na, const u8 *b, u32 nb) {
    u64 x = 0, pos = 0;
    for (int part = 0; part < 2 && pos < 8; part++) {
        const u8 *d = part ? b : a; u32 n = part ? nb : na;
        for (u32 i = 0; i < n && pos < 8; i++, pos++) x = (x << 8) | d[i];
    }
    return x;
}

#endif
