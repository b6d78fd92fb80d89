/* wide.h: integers of W_WORDS x 64 bits, two's complement, for expressions on values of 128 bits
 * or more (p4target/backends/c.py prints them where an operand is that wide; narrower expressions
 * stay i128/i64). The program defines W_WORDS so that every intermediate value fits: twice its
 * widest value and a word for the sign. Slow and simple: such programs are rare. */
#ifndef AGGNET_WIDE_H
#define AGGNET_WIDE_H
#include "bits.h"

#ifndef W_WORDS
#define W_WORDS 3
#endif
#define W_BITS (64 * W_WORDS)

typedef struct { u64 w[W_WORDS]; } wint;

static inline int w_neg_p(wint a) { return (int)(a.w[W_WORDS - 1] >> 63); }

static inline wint w_from_i128(__int128 v) {
    wint r;
    u64 fill = v < 0 ? ~0ULL : 0;
    for (int i = 0; i < W_WORDS; i++) r.w[i] = i == 0 ? (u64)v : i == 1 ? (u64)((unsigned __int128)v >> 64) : fill;
    return r;
}

/* The low 128 bits, for code that computes in i128 (a truncation, as a write to a field would do). */
static inline __int128 w_lo(wint a) { return (__int128)(((unsigned __int128)a.w[1] << 64) | a.w[0]); }

/* A `width`-bit value held in n 64-bit chunks at s, least significant first (zero- or sign-extended). */
static inline wint w_field(const u64 *s, int n, int width, int is_signed) {
    wint r;
    for (int i = 0; i < W_WORDS; i++) r.w[i] = i < n ? s[i] : 0;
    int top = (width - 1) / 64, bit = (width - 1) % 64;
    if (top >= W_WORDS) return r;
    u64 above = bit == 63 ? 0 : ~0ULL << (bit + 1);
    int negative = is_signed && ((r.w[top] >> bit) & 1);
    r.w[top] = negative ? r.w[top] | above : r.w[top] & ~above;
    for (int i = top + 1; i < W_WORDS; i++) r.w[i] = negative ? ~0ULL : 0;
    return r;
}

/* Register r's cell i of `width` bits (`words` engine words from i * words), 0 past the end (n cells). */
static inline wint w_reg(pk_t *p, int r, __int128 i, u64 n, int words, int width) {
    return i >= 0 && i < (__int128)n ? w_field(&p->E->reg[r][(u64)i * (u64)words], words, width, 0) : w_from_i128(0);
}

/* The low `width` bits of v into n chunks at d. */
static inline void w_store(u64 *d, int n, int width, wint v) {
    for (int i = 0; i < n; i++) {
        int cw = width - 64 * i;
        d[i] = i < W_WORDS ? v.w[i] & (cw >= 64 ? ~0ULL : (1ULL << cw) - 1) : 0;
    }
}

static inline int w_nz(wint a) {
    u64 x = 0;
    for (int i = 0; i < W_WORDS; i++) x |= a.w[i];
    return x != 0;
}

static inline wint w_bool(int b) { return w_from_i128(b != 0); }

static inline int w_cmp(wint a, wint b) {  /* signed: -1, 0, 1 */
    if (w_neg_p(a) != w_neg_p(b)) return w_neg_p(a) ? -1 : 1;
    for (int i = W_WORDS - 1; i >= 0; i--) {
        if (a.w[i] != b.w[i]) return a.w[i] < b.w[i] ? -1 : 1;
    }
    return 0;
}

static inline wint w_add(wint a, wint b) {
    wint r;
    u64 carry = 0;
    for (int i = 0; i < W_WORDS; i++) {
        unsigned __int128 s = (unsigned __int128)a.w[i] + b.w[i] + carry;
        r.w[i] = (u64)s;
        carry = (u64)(s >> 64);
    }
    return r;
}

static inline wint w_not(wint a) {
    for (int i = 0; i < W_WORDS; i++) a.w[i] = ~a.w[i];
    return a;
}

static inline wint w_neg(wint a) { return w_add(w_not(a), w_from_i128(1)); }
static inline wint w_sub(wint a, wint b) { return w_add(a, w_neg(b)); }

static inline wint w_mul(wint a, wint b) {
    wint r = w_from_i128(0);
    for (int i = 0; i < W_WORDS; i++) {
        u64 carry = 0;
        for (int j = 0; i + j < W_WORDS; j++) {
            unsigned __int128 t = (unsigned __int128)a.w[i] * b.w[j] + r.w[i + j] + carry;
            r.w[i + j] = (u64)t;
            carry = (u64)(t >> 64);
        }
    }
    return r;
}

#define W_BITWISE(name, op) \
    static inline wint name(wint a, wint b) { for (int i = 0; i < W_WORDS; i++) a.w[i] op b.w[i]; return a; }
W_BITWISE(w_and, &=)
W_BITWISE(w_or, |=)
W_BITWISE(w_xor, ^=)

/* A shift count: b clamped to [-1, W_BITS] (-1: negative). */
static inline int w_count(wint b) {
    if (w_neg_p(b)) return -1;
    for (int i = 1; i < W_WORDS; i++) {
        if (b.w[i]) return W_BITS;
    }
    return b.w[0] >= W_BITS ? W_BITS : (int)b.w[0];
}

static inline wint w_shl_n(wint a, int n) {
    wint r = w_from_i128(0);
    for (int i = W_WORDS - 1; i >= 0; i--) {
        int src = i - n / 64, sh = n % 64;
        u64 v = src >= 0 ? a.w[src] << sh : 0;
        if (sh && src - 1 >= 0) v |= a.w[src - 1] >> (64 - sh);
        r.w[i] = v;
    }
    return r;
}

static inline wint w_shr_n(wint a, int n) {  /* arithmetic */
    u64 fill = w_neg_p(a) ? ~0ULL : 0;
    wint r;
    for (int i = 0; i < W_WORDS; i++) {
        int src = i + n / 64, sh = n % 64;
        u64 lo = src < W_WORDS ? a.w[src] : fill, hi = src + 1 < W_WORDS ? a.w[src + 1] : fill;
        r.w[i] = sh ? (lo >> sh) | (hi << (64 - sh)) : lo;
    }
    return r;
}

static inline wint w_shl(wint a, wint b) {
    int n = w_count(b);
    return n < 0 || n >= W_BITS ? w_from_i128(0) : w_shl_n(a, n);
}

static inline wint w_shr(wint a, wint b) {
    int n = w_count(b);
    return n < 0 || n >= W_BITS ? w_from_i128(w_neg_p(a) ? -1 : 0) : w_shr_n(a, n);
}

/* |a| / |b| and its remainder, by shift and subtract (b != 0). */
static inline void w_udivmod(wint a, wint b, wint *q, wint *r) {
    *q = w_from_i128(0);
    *r = w_from_i128(0);
    for (int i = W_BITS - 1; i >= 0; i--) {
        *r = w_shl_n(*r, 1);
        r->w[0] |= (a.w[i / 64] >> (i % 64)) & 1;
        if (w_cmp(*r, b) >= 0) {
            *r = w_sub(*r, b);
            q->w[i / 64] |= 1ULL << (i % 64);
        }
    }
}

/* Division and modulo rounding toward minus infinity, as l_div and l_mod (lowered.h). */
static inline wint w_divmod(pk_t *p, wint a, wint b, int want_mod) {
    if (!w_nz(b)) { p->rc = RC_ERR; p->msg = want_mod ? "modulo by zero" : "division by zero"; return b; }
    int na = w_neg_p(a), nb = w_neg_p(b);
    wint q, r;
    w_udivmod(na ? w_neg(a) : a, nb ? w_neg(b) : b, &q, &r);
    if (na) r = w_neg(r);  /* truncating: r has a's sign */
    if (na != nb) q = w_neg(q);
    if (w_nz(r) && na != nb) {
        q = w_sub(q, w_from_i128(1));
        r = w_add(r, b);
    }
    return want_mod ? r : q;
}

static inline wint w_div(pk_t *p, wint a, wint b) { return w_divmod(p, a, b, 0); }
static inline wint w_mod(pk_t *p, wint a, wint b) { return w_divmod(p, a, b, 1); }

/* two_comp_mod: a as a signed w-bit value. */
static inline wint w_sx(wint a, wint w) {
    int n = w_count(w);
    if (n <= 0) return w_from_i128(0);
    if (n >= W_BITS) return a;
    return w_field(a.w, W_WORDS, n, 1);
}

/* The largest signed (`bits` - 1 value bits) or unsigned (`bits` value bits) number. */
static inline wint w_max(int bits) { return w_sub(w_shl_n(w_from_i128(1), bits), w_from_i128(1)); }

static inline wint w_sat(wint a, wint w) {
    int n = w_count(w);
    if (n <= 0 || n >= W_BITS - 1) return a;
    wint hi = w_max(n - 1), lo = w_sub(w_neg(hi), w_from_i128(1));
    return w_cmp(a, hi) > 0 ? hi : w_cmp(a, lo) < 0 ? lo : a;
}

static inline wint w_usat(wint a, wint w) {
    if (w_neg_p(a)) return w_from_i128(0);
    int n = w_count(w);
    if (n < 0 || n >= W_BITS - 1) return a;
    wint hi = w_max(n);
    return w_cmp(a, hi) > 0 ? hi : a;
}

#endif
