/* reset_register.c: the native engine's part of the test-only reset_register extern (tests/reset_register_extern.py),
 * printed once into a program that uses it, against the engine's extern interface (engine/program.h: an instance's
 * cells are p->E->reg[id], as a register's). Cells of at most 64 bits. */

/* Cell `i` of `n`, which is zero from now on (0 for an index out of range). */
static inline u64 rr_take(u64 *cells, i128 i, u64 n) {
    if (i < 0 || i >= (i128)n) return 0;
    u64 value = cells[(u64)i];
    cells[(u64)i] = 0;
    return value;
}

/* Cell `i` of `n` becomes `value` cut to `width` bits (nothing for an index out of range). */
static inline void rr_write(u64 *cells, i128 i, u64 n, u64 value, int width) {
    if (i >= 0 && i < (i128)n) cells[(u64)i] = width >= 64 ? value : value & ((1ULL << width) - 1);
}
