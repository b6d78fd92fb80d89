/* program.h: the contract between a generated program (p4target/backends/c.py) and the engine library.
 *
 * The program provides its stages (parser, controls, deparser) and the numbers the engine needs to
 * run them (frame slots, standard metadata slots, sizes of its tables and externs) as one
 * descriptor, `aggnet_prog`, which the generated file defines with DEFINE_PROGRAM() from the
 * macros of its prelude. The engine provides the state the program's code reaches through
 * `pk_t.E` (tables, registers, counters, meters) and the functions declared at the end.
 * Both sides are linked into one shared library; nothing here is exported from it. */
#ifndef AGGNET_PROGRAM_H
#define AGGNET_PROGRAM_H
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "constants.h"

#pragma GCC visibility push(hidden)

typedef uint64_t u64;
typedef uint32_t u32;
typedef uint16_t u16;
typedef uint8_t u8;
__extension__ typedef unsigned __int128 u128;

#define NONE64 UINT64_MAX              /* hidden slot not set (Python's None) */
#define NO_FIELD_LIST (UINT64_MAX - 1) /* resubmit/recirculate without a field list */
#define NO_ERROR_CODE UINT64_MAX       /* `transition reject`: parser_error unchanged */
#define CLONE_I2E 1                    /* the hidden clone_type slot's values */
#define CLONE_E2E 2
#define RC_EXIT 1
#define RC_ERR 2
#define RC_REJECT 3
#define PARSE_DROP UINT32_MAX

/* A two-rate three-color marker (RFC 2698, color-blind), as state.MeterCell runs it. */
typedef struct meter { int on; double cir, cburst, pir, pburst, committed, peak, last; } meter_t;

typedef struct entry entry_t;
struct entry {
    entry_t *hnext;     /* next in its hash bucket */
    struct level *lvl;
    int32_t handle;
    int32_t action;
    int64_t prio;
    u64 seq;
    u64 packets, bytes; /* direct counter cells */
    meter_t meter;      /* direct meter cell */
    double last_hit;    /* CLOCK_MONOTONIC of the last hit (tables with support_timeout) */
    u64 *args;          /* in the entry's block, or own_args once a modify needed more room */
    u64 *own_args;
    u32 capargs;        /* the words args has room for */
    u64 *v, *m, *hi;    /* per key: value (or range low), mask, range high */
    u8 *kind;           /* per key word: 0 wildcard, 1 value & mask, 2 range (3: a lower word of a wider range) */
    int32_t member, group; /* a table with an action profile: the member or group it names (-1: none) */
};

/* An action profile's member, and an action selector's group: the members it picks from (their handles in
 * prog_state_t.members, one copy per unit of weight, in the order state.ActionProfile gives). */
typedef struct member { int32_t action; u32 nargs; u64 args[]; } member_t;
typedef struct group { u32 n; int m[]; } group_t;

typedef struct level {  /* entries sharing one mask (exact/lpm tables): a hash table */
    int plen;
    u64 *mask;
    entry_t **b;
    u32 nb, n;
    struct level *next; /* longer prefixes first */
} level_t;

typedef struct table {
    int nkeys;
    int lpm;            /* index of the lpm key's first word, -1 if none */
    int lpm_width;      /* its bits: (lpm_width + 63) / 64 words */
    int prio_mode;      /* ternary/range/optional (or several lpm) keys: scan by priority */
    level_t *levels;
    entry_t **sorted;   /* prio_mode: by priority (largest first), then insertion order */
    u32 nsorted, capsorted;
    int def_action;
    u64 *def_args;
    u64 seq;
} table_t;

/* The state the program's code addresses by index (the engine's first member). */
typedef struct prog_state {
    table_t *tables;
    u64 **reg, **cpk, **cby;   /* registers; counters' packet and byte cells */
    meter_t **meters;
    member_t **members;        /* action profiles' members and groups by handle (store.py hands them out) */
    group_t **groups;
    u8 *looped;                /* per action with a jump back (prog_t.nloops): whether its jump limit was logged */
} prog_state_t;

/* One packet on its way through a stage. */
typedef struct pk {
    u64 *F;             /* the frame: one slot per value */
    const u8 *data;     /* the packet as it entered the parser */
    u32 len;
    u32 poff;           /* offset of the unparsed payload */
    prog_state_t *E;
    int rc;             /* 0, RC_EXIT, RC_ERR (packet dropped), RC_REJECT (parser) */
    int act;            /* action the last table applied ran */
    u64 rej;            /* parser error code of an RC_REJECT */
    const char *msg;    /* why an RC_ERR */
} pk_t;

/* Standard metadata slots (-1: the program's frame has none). */
typedef struct sm_slots {
    int ingress_port, egress_spec, egress_port, instance_type, packet_length, enq_qdepth, deq_qdepth,
        ingress_global_timestamp, egress_global_timestamp, mcast_grp, egress_rid, parser_error, checksum_error;
} sm_slots_t;

/* The engine's hidden bookkeeping slots (Python's None is NONE64). */
typedef struct hidden_slots { int clone_session, clone_type, clone_fl, resubmit, recirculate, truncate; } hidden_slots_t;

/* What a generated program provides. */
typedef struct prog {
    u32 nslots;                 /* frame slots */
    u32 hdr_max;                /* most bytes the deparser writes */
    int ntables, nregs, ncounters, nmeters;
    int nloops;                 /* actions with a jump back (a loop) */
    u32 meta_first, meta_end;   /* the user metadata's slots */
    const u64 *init;            /* the initial frame (nslots) */
    sm_slots_t sm;
    const int *sm_all;          /* every standard metadata slot */
    int sm_count;
    hidden_slots_t h;
    const u64 *reg_size, *counter_size, *meter_size;
    const int *table_keys;      /* keys per table */
    const int *(*field_list)(u64 idx, int *n);  /* the slots a resubmit/recirculate/clone preserves */
    u32 (*parse)(pk_t *p);      /* offset of the payload, or PARSE_DROP */
    void (*verify)(pk_t *p), (*ingress)(pk_t *p), (*egress)(pk_t *p), (*compute)(pk_t *p);
    u32 (*deparse)(pk_t *p, u8 *out);  /* bytes written */
} prog_t;

extern const prog_t aggnet_prog;

/* The descriptor of a generated file, from its prelude's macros and stage functions. */
#define DEFINE_PROGRAM() \
    const prog_t aggnet_prog = { \
        NSLOTS, HDR_MAX, NTABLES, NREGS, NCOUNTERS, NMETERS, NLOOPS, META_FIRST, META_END, INIT, \
        {SM_INGRESS_PORT, SM_EGRESS_SPEC, SM_EGRESS_PORT, SM_INSTANCE_TYPE, SM_PACKET_LENGTH, SM_ENQ_QDEPTH, \
         SM_DEQ_QDEPTH, SM_INGRESS_GLOBAL_TIMESTAMP, SM_EGRESS_GLOBAL_TIMESTAMP, SM_MCAST_GRP, SM_EGRESS_RID, \
         SM_PARSER_ERROR, SM_CHECKSUM_ERROR}, \
        SM_ALL, SM_COUNT, \
        {H_CLONE_SESSION, H_CLONE_TYPE, H_CLONE_FL, H_RESUBMIT, H_RECIRCULATE, H_TRUNCATE}, \
        REG_SIZE, COUNTER_SIZE, METER_SIZE, TABLE_KEYS, field_list, \
        g_parse, g_verify, g_ingress, g_egress, g_compute, g_deparse}

/* What the engine provides to the program's code. */
entry_t *table_lookup(table_t *t, const u64 *key);
void push_digest(prog_state_t *S, int id, const u64 *vals, int n);
void push_log(prog_state_t *S, const char *fmt, u32 len, const u64 *vals, int n);
u32 rng_u32(prog_state_t *S);
u64 rng_range(prog_state_t *S, u64 lo, u64 hi);
u64 meter_exec(meter_t *m, double amount);
double mono(void);

/* The member an entry of a table with an action profile runs: the one it names, or the one its group picks
 * by the selector's hash h (as BMv2: h modulo the group's size); NULL for an empty group. */
static inline const member_t *profile_member(const prog_state_t *S, const entry_t *e, u64 h) {
    if (e->group < 0) return S->members[e->member];
    const group_t *g = S->groups[e->group];
    return g->n ? S->members[g->m[h % g->n]] : NULL;
}

#pragma GCC visibility pop
#endif
