/* runtime.h: the inline helpers the generated program's code (cgen.py) uses.
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

static inline u64 p4_div(pk_t *p, u64 a, u64 b) {
    if (!b) { p->rc = RC_ERR; p->msg = "ZeroDivisionError: integer division or modulo by zero"; return 0; }
    return a / b;
}

static inline u64 p4_mod(pk_t *p, u64 a, u64 b) {
    if (!b) { p->rc = RC_ERR; p->msg = "ZeroDivisionError: integer division or modulo by zero"; return 0; }
    return a % b;
}

static inline u64 p4_shl(u64 a, u64 b, int w) { return b >= (u64)w ? 0 : (a << b) & mask_of(w); }
static inline u64 p4_shr(u64 a, u64 b) { return b >= 64 ? 0 : a >> b; }
static inline u64 p4_sar(u64 a, u64 b, int w) { return (u64)(sx(a, w) >> (b > 63 ? 63 : b)) & mask_of(w); }

static inline u64 p4_sat_add_u(u64 a, u64 b, int w) {
    u64 s = a + b;
    if (w == 64) return s < a ? ~0ULL : s;
    return s > mask_of(w) ? mask_of(w) : s;
}

static inline u64 p4_sat_sub_u(u64 a, u64 b, int w) { (void)w; return a > b ? a - b : 0; }

static inline u64 p4_sat_s(__int128 r, int w) {
    __int128 hi = ((__int128)1 << (w - 1)) - 1, lo = -hi - 1;
    return (u64)(r > hi ? hi : r < lo ? lo : r) & mask_of(w);
}

static inline u64 p4_sat_add_s(u64 a, u64 b, int w) { return p4_sat_s((__int128)sx(a, w) + sx(b, w), w); }
static inline u64 p4_sat_sub_s(u64 a, u64 b, int w) { return p4_sat_s((__int128)sx(a, w) - sx(b, w), w); }

/* packet.lookahead: nb bytes at o, shifted right; short packets reject with `code`. */
static inline u64 p4_look(pk_t *p, u32 o, u32 nb, int shift, u64 code) {
    if ((u64)o + nb > p->len) { p->rc = RC_REJECT; p->rej = code; return 0; }
    u64 acc = 0;
    for (u32 i = 0; i < nb; i++) acc = (acc << 8) | p->data[o + i];
    return acc >> shift;
}

/* v1model hash algorithms over a ++ b, as BMv2 computes them (see interp/hashes.py). */
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
