/* runtime.h: the inline helpers the generated program's code (p4target/backends/c.py) uses.
 *
 * Every P4 value is a u64 holding its unsigned bit pattern; `sx` reads an int<W> signed.
 * What the program and the engine library exchange (types, the functions each side
 * provides) is program.h. */
#ifndef AGGNET_RUNTIME_H
#define AGGNET_RUNTIME_H
#include "program.h"

static inline int64_t sx(u64 v, int w) {
    return w >= 64 ? (int64_t)v : ((int64_t)(v << (64 - w))) >> (64 - w);
}

static inline u64 mask_of(int w) { return w >= 64 ? ~0ULL : (1ULL << w) - 1; }

/* `w` bits starting `bitoff` bits into d, most significant first. */
static inline u64 getbits(const u8 *d, u32 bitoff, int w) {
    u32 first = bitoff >> 3, sh = bitoff & 7, nbits = sh + w, nbytes = (nbits + 7) >> 3;
    u128 acc = 0;
    for (u32 i = 0; i < nbytes; i++) acc = (acc << 8) | d[first + i];
    acc >>= nbytes * 8 - nbits;
    return (u64)acc & mask_of(w);
}

/* OR the low `w` bits of v into d (zeroed) at `bitoff`, most significant first. */
static inline void putbits(u8 *d, u32 bitoff, u64 v, int w) {
    u32 first = bitoff >> 3, sh = bitoff & 7, nbits = sh + w, nbytes = (nbits + 7) >> 3;
    u128 acc = (u128)(v & mask_of(w)) << (nbytes * 8 - nbits);
    for (u32 i = nbytes; i-- > 0;) { d[first + i] |= (u8)acc; acc >>= 8; }
}

/* v1model hash algorithms over a ++ b, as BMv2 computes them (see backends/hashes.py). */
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
