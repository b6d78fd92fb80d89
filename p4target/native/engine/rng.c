/* rng.c: clocks and randomness (random(), hash(random), Python's Mersenne Twister for loss). */
#include "internal.h"

double mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

u64 now_us(engine_t *E) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t ns = (int64_t)(ts.tv_sec - E->t0.tv_sec) * 1000000000LL + (ts.tv_nsec - E->t0.tv_nsec);
    return ((u64)ns / 1000) & ((1ULL << 48) - 1);
}

u32 rng_u32(prog_state_t *S) {  /* xorshift64*: random() and hash(random) (no Python counterpart to match) */
    engine_t *E = engine_of(S);
    E->rng ^= E->rng >> 12; E->rng ^= E->rng << 25; E->rng ^= E->rng >> 27;
    return (u32)((E->rng * 0x2545F4914F6CDD1DULL) >> 32);
}

u64 rng_range(prog_state_t *S, u64 lo, u64 hi) {
    if (hi <= lo) return lo;
    u64 span = hi - lo + 1, r = ((u64)rng_u32(S) << 32) | rng_u32(S);
    return span ? lo + r % span : r;
}

/* Python's random.Random: MT19937 seeded by init_by_array, random() with 53 bits. */
void mt_seed(mt_t *m, const u32 *key, int n) {
    u32 *s = m->s;
    s[0] = 19650218u;
    for (int i = 1; i < 624; i++) s[i] = 1812433253u * (s[i - 1] ^ (s[i - 1] >> 30)) + i;
    int i = 1, j = 0;
    for (int k = 624 > n ? 624 : n; k; k--) {
        s[i] = (s[i] ^ ((s[i - 1] ^ (s[i - 1] >> 30)) * 1664525u)) + key[j] + j;
        i++; j++;
        if (i >= 624) { s[0] = s[623]; i = 1; }
        if (j >= n) j = 0;
    }
    for (int k = 623; k; k--) {
        s[i] = (s[i] ^ ((s[i - 1] ^ (s[i - 1] >> 30)) * 1566083941u)) - i;
        i++;
        if (i >= 624) { s[0] = s[623]; i = 1; }
    }
    s[0] = 0x80000000u;
    m->i = 624;
}

static u32 mt_next(mt_t *m) {
    u32 *s = m->s;
    if (m->i >= 624) {
        for (int k = 0; k < 624; k++) {
            u32 y = (s[k] & 0x80000000u) | (s[(k + 1) % 624] & 0x7fffffffu);
            s[k] = s[(k + 397) % 624] ^ (y >> 1) ^ ((y & 1) ? 0x9908b0dfu : 0);
        }
        m->i = 0;
    }
    u32 y = s[m->i++];
    y ^= y >> 11; y ^= (y << 7) & 0x9d2c5680u; y ^= (y << 15) & 0xefc60000u; y ^= y >> 18;
    return y;
}

double mt_random(mt_t *m) {
    u32 a = mt_next(m) >> 5, b = mt_next(m) >> 6;
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

