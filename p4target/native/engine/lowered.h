/* lowered.h: the one header a program printed from the lowered form includes (p4c's BMv2 JSON or our own
 * lowering, p4target/backends/c.py): the arithmetic of its expressions here, the rest through wide.h (values
 * of 128 bits or more), bits.h (values in packet bytes) and hashes.h (v1model's hash algorithms).
 *
 * BMv2 computes with integers of infinite precision and truncates a value when it writes it to a
 * field; p4c's JSON masks (or `two_comp_mod`s) every result that could grow, so values stay within
 * a few bits of the widest field. Here an expression is an i128 (fields are at most 64 bits wide),
 * wrapping arithmetic is done unsigned (no undefined behaviour), and a field slot holds the u64 bit
 * pattern of its value, masked to its width; a signed field is sign-extended when read. */
#ifndef AGGNET_LOWERED_H
#define AGGNET_LOWERED_H
#include "hashes.h"
#include "wide.h"

__extension__ typedef __int128 i128;

static inline i128 l_add(i128 a, i128 b) { return (i128)((u128)a + (u128)b); }
static inline i128 l_sub(i128 a, i128 b) { return (i128)((u128)a - (u128)b); }
static inline i128 l_mul(i128 a, i128 b) { return (i128)((u128)a * (u128)b); }
static inline i128 l_shl(i128 a, i128 b) { return b < 0 || b >= 128 ? 0 : (i128)((u128)a << (int)b); }
static inline i128 l_shr(i128 a, i128 b) { return b < 0 || b >= 127 ? (a < 0 ? -1 : 0) : a >> (int)b; }

static inline i128 l_fail(pk_t *p, const char *msg) { p->rc = RC_ERR; p->msg = msg; return 0; }

/* Action `loop` (its index among the program's actions with a jump back) jumped back more than MAX_BACKWARD_JUMPS
 * times in one run (a loop that may never end): the packet is dropped as a packet error, logged the first time only
 * (an empty msg tells packet_error that it was), as errors.JumpLimit on the Python engine. */
static inline void l_jump_limit(pk_t *p, int loop, const char *msg) {
    p->rc = RC_ERR;
    p->msg = p->E->looped[loop] ? "" : msg;
    p->E->looped[loop] = 1;
}

/* Division and modulo rounding toward minus infinity, as the Python reference does. */
static inline i128 l_div(pk_t *p, i128 a, i128 b) {
    if (!b) return l_fail(p, "division by zero");
    i128 q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static inline i128 l_mod(pk_t *p, i128 a, i128 b) {
    if (!b) return l_fail(p, "modulo by zero");
    i128 r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

/* two_comp_mod: `v` as a signed `w`-bit value. */
static inline i128 l_sx(i128 v, i128 w) {
    if (w <= 0) return 0;
    if (w >= 128) return v;
    u128 m = ((u128)1 << (int)w) - 1, x = (u128)v & m;
    return (i128)((x >> (int)(w - 1)) & 1 ? x | ~m : x);
}

static inline i128 l_sat(i128 v, i128 w) {
    if (w <= 0 || w >= 127) return v;
    i128 hi = ((i128)1 << (int)(w - 1)) - 1, lo = -hi - 1;
    return v > hi ? hi : v < lo ? lo : v;
}

static inline i128 l_usat(i128 v, i128 w) {
    if (v < 0) return 0;
    if (w >= 127) return v;
    i128 hi = ((i128)1 << (int)w) - 1;
    return v > hi ? hi : v;
}

/* The same for an expression whose every value fits in 63 bits (c.py proves it from the widths): int64_t. */
typedef int64_t i64;
static inline i64 l_shl64(i64 a, i64 b) { return b < 0 || b >= 64 ? 0 : (i64)((u64)a << b); }
static inline i64 l_shr64(i64 a, i64 b) { return b < 0 || b >= 63 ? (a < 0 ? -1 : 0) : a >> b; }

static inline i64 l_div64(pk_t *p, i64 a, i64 b) {
    if (!b) return (i64)l_fail(p, "division by zero");
    i64 q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static inline i64 l_mod64(pk_t *p, i64 a, i64 b) {
    if (!b) return (i64)l_fail(p, "modulo by zero");
    i64 r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

static inline i64 l_sx64(i64 v, i64 w) { return w <= 0 ? 0 : sx((u64)v, (int)w); }

static inline i64 l_sat64(i64 v, i64 w) {
    i64 hi = ((i64)1 << (w - 1)) - 1, lo = -hi - 1;
    return v > hi ? hi : v < lo ? lo : v;
}

static inline i64 l_usat64(i64 v, i64 w) {
    i64 hi = ((i64)1 << w) - 1;
    return v < 0 ? 0 : v > hi ? hi : v;
}

/* A field wider than 64 bits takes one slot per 64-bit chunk, least significant first: chunk i's width. */
static inline int l_cw(int w, int i) { int cw = w - 64 * i; return cw <= 0 ? 0 : cw > 64 ? 64 : cw; }

/* Chunk i of a `w`-bit field starting `off` bits into d, and the same written (d zeroed there). */
static inline u64 l_getchunk(const u8 *d, u32 off, int w, int i) {
    int cw = l_cw(w, i);
    return cw ? getbits(d, off + (u32)(w - 64 * i - cw), cw) : 0;
}

static inline void l_putchunk(u8 *d, u32 off, u64 v, int w, int i) {
    int cw = l_cw(w, i);
    if (cw) putbits(d, off + (u32)(w - 64 * i - cw), v, cw);
}

/* A field of 65 to 127 bits (two chunks) as its value. */
static inline i128 l_wide(u64 lo, u64 hi, int w, int is_signed) {
    u128 v = ((u128)hi << 64) | lo;
    if (is_signed && ((v >> (w - 1)) & 1)) v |= ~(u128)0 << w;
    return (i128)v;
}

/* A signed `w`-bit field's slot as its value. */
static inline i128 l_signed(u64 v, int w) { return (i128)sx(v, w); }

/* A header stack index, checked (an error drops the packet, as the Python reference's IndexError). */
static inline u64 l_at(pk_t *p, i128 i, u64 n) {
    if (i < 0 || i >= (i128)n) { p->rc = RC_ERR; p->msg = "header stack index out of range"; return 0; }
    return (u64)i;
}

/* A header stack element: past the end (P4: an undefined value), the stack's scratch header at index n. */
static inline u64 l_idx(i128 i, u64 n) {
    return i >= 0 && i < (i128)n ? (u64)i : n;
}

/* A register cell in an expression: 0 past the end. */
static inline i128 l_reg(const u64 *cells, i128 i, u64 n) {
    return i >= 0 && i < (i128)n ? (i128)cells[(u64)i] : 0;
}

/* lookahead: `w` (<= 64) bits starting `off` bits past byte `o`; a short packet rejects with `code`. */
static inline u64 l_look(pk_t *p, u32 o, u32 off, int w, u64 code) {
    u64 start = (u64)o * 8 + off, nbytes = (start + (u64)w + 7) / 8;
    if (nbytes > p->len) { p->rc = RC_REJECT; p->rej = code; return 0; }
    return getbits(p->data, (u32)start, w);
}

/* The same for 65 to 127 bits. */
static inline i128 l_look_wide(pk_t *p, u32 o, u32 off, int w, u64 code) {
    u64 hi = l_look(p, o, off, w - 64, code), lo = l_look(p, o, off + (u32)(w - 64), 64, code);
    return (i128)(((u128)hi << 64) | lo);
}

/* The same at any width, as a wint (one l_look per 64-bit chunk, least significant first). */
static inline wint w_look(pk_t *p, u32 o, u32 off, int w, u64 code) {
    wint r = w_from_i128(0);
    for (int i = 0; i < W_WORDS && 64 * i < w; i++) {
        int cw = l_cw(w, i);
        r.w[i] = l_look(p, o, off + (u32)(w - 64 * i - cw), cw, code);
    }
    return r;
}

/* A parser transition key wider than 128 bits: u64 words k[], least significant first. Put v's low
 * `w` (<= 64) bits at bit `pos`, and read `w` bits from there. */
static inline void l_key_put(u64 *k, u32 pos, u64 v, int w) {
    u32 i = pos / 64, sh = pos % 64;
    v &= w >= 64 ? ~0ULL : (1ULL << w) - 1;
    k[i] |= v << sh;
    if (sh && sh + (u32)w > 64) k[i + 1] |= v >> (64 - sh);
}

static inline u64 l_key_get(const u64 *k, u32 pos, int w) {
    u32 i = pos / 64, sh = pos % 64;
    u64 v = k[i] >> sh;
    if (sh && sh + (u32)w > 64) v |= k[i + 1] << (64 - sh);
    return w >= 64 ? v : v & ((1ULL << w) - 1);
}

/* push_front (t > 0) / pop_front (t < 0) on a stack of `n` headers of `size` slots at `bases`. */
static inline void l_shift_stack(u64 *F, const u32 *bases, u32 n, u32 size, i128 t, u64 *next) {
    if (t >= 0) {
        for (i128 i = (i128)n - 1; i >= 0; i--) {
            if (i >= t) memmove(&F[bases[(u32)i]], &F[bases[(u32)(i - t)]], size * sizeof(u64));
            else F[bases[(u32)i]] = 0;
        }
        *next = (i128)*next + t < (i128)n ? (u64)((i128)*next + t) : n;
    } else {
        i128 k = -t;
        for (u32 i = 0; i < n; i++) {
            if ((i128)i + k < (i128)n) memmove(&F[bases[i]], &F[bases[(u32)(i + k)]], size * sizeof(u64));
            else F[bases[i]] = 0;
        }
        *next = (i128)*next > k ? (u64)((i128)*next - k) : 0;
    }
}

/* The parser's check after an operation that can reject (a lookahead) or fail (an error drops). */
#define L_PARSE_CHECK() do { \
        if (p->rc == RC_REJECT) { p->rc = 0; rcode = p->rej; goto reject; } \
        if (p->rc) return PARSE_DROP; \
    } while (0)

#endif
