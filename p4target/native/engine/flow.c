/* flow.c: the v1model flow of p4target/pipeline.py (parser, controls, replication with BMv2's instance_type
 * values and the MAX_LOOPS generation cut, deparser), and eng_process: one packet with empty queues. */
#include "internal.h"

#define SM PROG.sm
#define H PROG.h

static item_t *item_new(engine_t *E, const u64 *F, u32 eport, u32 qlen, u64 gen, const u8 *data, u32 dlen, u32 poff) {
    size_t fbytes = sizeof(u64) * PROG.nslots;
    item_t *it = malloc(sizeof(item_t) + fbytes + dlen);
    if (!it) return NULL;
    it->next = NULL; it->gen = gen; it->eport = eport; it->qlen = qlen;
    it->dlen = dlen; it->poff = poff; it->enq_qdepth = 0; it->t = 0;
    it->packet_id = E->elog_packet;
    it->data = (u8 *)it->F + fbytes;
    memcpy(it->F, F, fbytes);
    memcpy(it->data, data, dlen);
    return it;
}

/* A frame not yet through ingress (a PacketOut, or a frame held for its port's ingress delay): only data, dlen,
 * eport (the port it enters on) and t are used. */
item_t *frame_item(u32 port, const u8 *data, u32 len) {
    item_t *it = malloc(sizeof(item_t) + len);
    if (!it) return NULL;
    it->next = NULL; it->eport = port; it->dlen = len; it->t = 0;
    it->data = (u8 *)it->F;
    memcpy(it->data, data, len);
    return it;
}

void fifo_push(fifo_t *f, item_t *it) {
    it->next = NULL;
    if (f->tail) f->tail->next = it; else f->head = it;
    f->tail = it;
    f->n++;
}

item_t *fifo_pop(fifo_t *f) {
    item_t *it = f->head;
    if (it) { f->head = it->next; if (!f->head) f->tail = NULL; f->n--; }
    return it;
}

void fifo_free(fifo_t *f) { for (item_t *it; (it = fifo_pop(f));) free(it); }

/* The slots a resubmit, recirculate or clone preserves, and their values (vals: PROG.nslots). */
typedef struct carry { int n; const int *slots; u64 *vals; } carry_t;

static void carry_from(carry_t *c, const u64 *F, u64 fl) {
    c->n = 0;
    if (fl == NONE64 || fl == NO_FIELD_LIST) return;
    c->slots = PROG.field_list(fl, &c->n);
    for (int i = 0; i < c->n; i++) c->vals[i] = F[c->slots[i]];
}

/* A fresh frame with standard metadata set, preserved fields restored, parsed. */
static int parsed(engine_t *E, pk_t *p, u64 *F, u32 port, const u8 *data, u32 len, u64 itype, const carry_t *c) {
    memcpy(F, PROG.init, sizeof(u64) * PROG.nslots);
    F[SM.ingress_port] = port;
    F[SM.instance_type] = itype;
    F[SM.packet_length] = len;
    F[SM.ingress_global_timestamp] = now_us(E);
    for (int i = 0; c && i < c->n; i++) F[c->slots[i]] = c->vals[i];
    memset(p, 0, sizeof(*p));
    p->F = F; p->data = data; p->len = len; p->E = &E->st;
    u32 off = PROG.parse(p);
    if (off == PARSE_DROP) return 0;
    p->poff = off;
    return 1;
}

static void clone_i2e(engine_t *E, const u64 *F, u32 port, const u8 *data, u32 len, u64 gen, fifo_t *out) {
    session_t *s = session_find(E, F[H.clone_session]);
    if (!s || gen >= MAX_LOOPS) return;
    u64 vals[PROG.nslots], C[PROG.nslots];
    carry_t c = {.vals = vals};
    carry_from(&c, F, F[H.clone_fl]);
    pk_t p;
    if (!parsed(E, &p, C, port, data, len, I2E_CLONE, &c)) { packet_error(E, "I2E clone parser", p.msg); return; }
    C[H.truncate] = s->pktlen ? s->pktlen : NONE64;
    for (u32 i = 0; i < s->n; i++) {
        item_t *it = item_new(E, C, s->reps[i].port, len, gen + 1, data, len, p.poff);
        if (!it) return;
        it->F[SM.egress_port] = it->F[SM.egress_spec] = s->reps[i].port;
        it->F[SM.egress_rid] = s->reps[i].rid;
        fifo_push(out, it);
    }
}

void run_ingress(engine_t *E, u32 port, const u8 *data, u32 len, u64 itype, const carry_t *c, u64 gen,
                 fifo_t *out) {
    u64 F[PROG.nslots];
    pk_t p;
    if (!parsed(E, &p, F, port, data, len, itype, c)) { packet_error(E, "ingress", p.msg); return; }
    p.rc = 0; PROG.verify(&p);
    if (p.rc == RC_ERR) { packet_error(E, "ingress", p.msg); return; }
    p.rc = 0; PROG.ingress(&p);
    if (p.rc == RC_ERR) { packet_error(E, "ingress", p.msg); return; }
    if (F[H.clone_session] != NONE64 && F[H.clone_type] == CLONE_I2E) clone_i2e(E, F, port, data, len, gen, out);
    F[H.clone_session] = NONE64;
    if (F[H.resubmit] != NONE64) {
        if (gen < MAX_LOOPS) {
            u64 vals[PROG.nslots];
            carry_t r = {.vals = vals};
            carry_from(&r, F, F[H.resubmit]);
            run_ingress(E, port, data, len, RESUBMITTED, &r, gen + 1, out);
        }
        return;
    }
    u64 group = F[SM.mcast_grp];
    if (group) {
        if (group < MC_GROUPS) {
            for (u32 i = 0; i < E->mcn[group]; i++) {
                item_t *it = item_new(E, F, E->mc[group][i].port, len, gen, data, len, p.poff);
                if (!it) return;
                it->F[SM.egress_port] = it->F[SM.egress_spec] = E->mc[group][i].port;
                it->F[SM.egress_rid] = E->mc[group][i].rid;
                it->F[SM.instance_type] = REPLICATED;
                fifo_push(out, it);
            }
        }
        return;
    }
    u64 eport = F[SM.egress_spec];
    if (eport == DROP_PORT) return;
    F[SM.egress_port] = eport;
    item_t *it = item_new(E, F, (u32)eport, len, gen, data, len, p.poff);
    if (it) fifo_push(out, it);
}

static void clone_e2e(engine_t *E, u64 *F, const u8 *data, u32 dlen, u32 poff, u64 gen, sink_fn sink) {
    session_t *s = session_find(E, F[H.clone_session]);
    F[H.clone_session] = NONE64;
    if (!s || gen >= MAX_LOOPS) return;
    u64 vals[PROG.nslots], C[PROG.nslots], R[PROG.nslots];
    carry_t c = {.vals = vals};
    carry_from(&c, F, F[H.clone_fl]);
    memcpy(C, F, sizeof(C));
    memcpy(&C[PROG.meta_first], &PROG.init[PROG.meta_first], sizeof(u64) * (PROG.meta_end - PROG.meta_first));
    for (int i = 0; i < PROG.sm_count; i++) {
        int slot = PROG.sm_all[i];
        if (slot != SM.ingress_port && slot != SM.packet_length && slot != SM.ingress_global_timestamp)
            C[slot] = PROG.init[slot];
    }
    for (int i = 0; i < c.n; i++) C[c.slots[i]] = c.vals[i];
    C[SM.instance_type] = E2E_CLONE;
    C[H.truncate] = s->pktlen ? s->pktlen : NONE64;
    C[H.recirculate] = NONE64;
    for (u32 i = 0; i < s->n; i++) {  /* the lock is held: sessions cannot change meanwhile */
        memcpy(R, C, sizeof(R));
        R[SM.egress_port] = R[SM.egress_spec] = s->reps[i].port;
        R[SM.egress_rid] = s->reps[i].rid;
        run_egress(E, R, data, dlen, poff, gen + 1, 0, 0, sink);
    }
}

void run_egress(engine_t *E, u64 *F, const u8 *data, u32 dlen, u32 poff, u64 gen, u64 enq, u64 deq, sink_fn sink) {
    pk_t p;
    memset(&p, 0, sizeof(p));
    p.F = F; p.data = data; p.len = dlen; p.poff = poff; p.E = &E->st;
    F[SM.enq_qdepth] = enq;
    F[SM.deq_qdepth] = deq;
    F[SM.egress_global_timestamp] = now_us(E);
    PROG.egress(&p);
    if (p.rc == RC_ERR) { packet_error(E, "egress", p.msg); return; }
    if (F[H.clone_session] != NONE64 && F[H.clone_type] == CLONE_E2E) clone_e2e(E, F, data, dlen, poff, gen, sink);
    if (F[SM.egress_spec] == DROP_PORT) return;
    p.rc = 0;
    PROG.compute(&p);
    if (p.rc == RC_ERR) { packet_error(E, "egress", p.msg); return; }
    u32 plen = dlen - poff;
    u8 *out = malloc(PROG.hdr_max + plen + 1);
    if (!out) { packet_error(E, "egress", "out of memory"); return; }
    u32 n = PROG.deparse(&p, out);
    memcpy(out + n, data + poff, plen);
    n += plen;
    u64 t = F[H.truncate];
    if (t != NONE64 && t != 0 && t < n) n = (u32)t;
    if (F[H.recirculate] != NONE64) {
        if (gen < MAX_LOOPS) {
            u64 vals[PROG.nslots];
            carry_t c = {.vals = vals};
            carry_from(&c, F, F[H.recirculate]);
            fifo_t items = {0};
            run_ingress(E, (u32)F[SM.ingress_port], out, n, RECIRCULATED, &c, gen + 1, &items);
            for (item_t *it; (it = fifo_pop(&items));) {
                run_egress(E, it->F, it->data, it->dlen, it->poff, it->gen, 0, 0, sink);
                free(it);
            }
        }
        free(out);
        return;
    }
    sink(E, (u32)F[SM.egress_port], out, n);
    free(out);
}

/* ------------------------------------------------------------------ process(): one packet, empty queues */

static void collect(engine_t *E, u32 port, const u8 *data, u32 len) {
    if (E->nouts == E->capouts) {
        u32 cap = E->capouts ? E->capouts * 2 : 16;
        out_t *more = realloc(E->outs, sizeof(out_t) * cap);
        if (!more) { packet_error(E, "egress", "out of memory"); return; }
        E->outs = more;
        E->capouts = cap;
    }
    u8 *copy = malloc(len ? len : 1);
    if (!copy) { packet_error(E, "egress", "out of memory"); return; }
    memcpy(copy, data, len);
    E->outs[E->nouts++] = (out_t){port, len, copy};
}

void eng_clear_outputs(engine_t *E) {
    for (u32 i = 0; i < E->nouts; i++) free(E->outs[i].data);
    E->nouts = 0;
}

/* The whole pipeline for one packet; the caller holds the lock. Returns the number of outputs. */
int eng_process(engine_t *E, u32 port, const u8 *data, u32 len) {
    eng_clear_outputs(E);
    fifo_t items = {0};
    run_ingress(E, port, data, len, NORMAL, NULL, 0, &items);
    for (item_t *it; (it = fifo_pop(&items));) {
        run_egress(E, it->F, it->data, it->dlen, it->poff, it->gen, 0, 0, collect);
        free(it);
    }
    return (int)E->nouts;
}

const u8 *eng_output(engine_t *E, int i, u32 *port, u32 *len) {
    *port = E->outs[i].port; *len = E->outs[i].len;
    return E->outs[i].data;
}
