/* bits.h: a value's bits in packet bytes (most significant first), for the generated program's parser and
 * deparser (p4target/backends/c.py). Every P4 value is a u64 holding its unsigned bit pattern; `sx` reads
 * an int<W> signed. */
#ifndef AGGNET_BITS_H
#define AGGNET_BITS_H
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

#endif
