/* externs.c: meters, registers, counters, multicast groups and clone sessions. */
#include "internal.h"

u64 meter_exec(meter_t *m, double amount) {
    if (!m->on) return 0;  /* GREEN */
    double now = mono(), elapsed = now - m->last > 0 ? now - m->last : 0;
    m->last = now;
    double peak = m->peak + elapsed * m->pir, committed = m->committed + elapsed * m->cir;
    m->peak = m->pburst < peak ? m->pburst : peak;
    m->committed = m->cburst < committed ? m->cburst : committed;
    if (m->peak < amount) return 2;  /* RED */
    m->peak -= amount;
    if (m->committed < amount) return 1;  /* YELLOW */
    m->committed -= amount;
    return 0;
}

static void meter_set(meter_t *m, int on, double cir, double cburst, double pir, double pburst) {
    m->on = on; m->cir = cir; m->cburst = cburst; m->pir = pir; m->pburst = pburst;
    m->committed = cburst; m->peak = pburst; m->last = mono();  /* buckets start full */
}

void eng_meter_set(engine_t *E, int mid, u64 index, int on, double cir, double cburst, double pir, double pburst) {
    meter_set(&E->st.meters[mid][index], on, cir, cburst, pir, pburst);
}

void eng_direct_meter_set(engine_t *E, int handle, int on, double cir, double cburst, double pir, double pburst) {
    meter_set(&E->handles[handle]->meter, on, cir, cburst, pir, pburst);
}

u64 *eng_register(engine_t *E, int rid) { return E->st.reg[rid]; }
u64 *eng_counter(engine_t *E, int cid, int bytes) { return bytes ? E->st.cby[cid] : E->st.cpk[cid]; }

/* ------------------------------------------------------------------ packet replication state */

static rep_t *copy_reps(int n, const u32 *ports, const u32 *rids) {
    rep_t *r = malloc(sizeof(rep_t) * (n ? (size_t)n : 1));
    for (int i = 0; r && i < n; i++) { r[i].port = ports[i]; r[i].rid = rids[i]; }
    return r;
}

int eng_mc_set(engine_t *E, int gid, int n, const u32 *ports, const u32 *rids) {
    rep_t *reps = n >= 0 ? copy_reps(n, ports, rids) : NULL;
    if (n >= 0 && !reps) return -1;
    free(E->mc[gid]);
    E->mc[gid] = reps;
    E->mcn[gid] = n >= 0 ? (u32)n : 0;
    return 0;
}

session_t *session_find(engine_t *E, u64 id) {
    for (u32 i = 0; i < E->nsessions; i++) if (E->sessions[i].id == id) return &E->sessions[i];
    return NULL;
}

int eng_clone_set(engine_t *E, u64 sid, int n, const u32 *ports, const u32 *rids, u32 pktlen) {
    session_t *s = session_find(E, sid);
    if (n < 0) {
        if (s) { free(s->reps); *s = E->sessions[--E->nsessions]; }
        return 0;
    }
    rep_t *reps = copy_reps(n, ports, rids);
    if (!reps) return -1;
    if (!s) {
        session_t *more = realloc(E->sessions, sizeof(session_t) * (E->nsessions + 1));
        if (!more) { free(reps); return -1; }
        E->sessions = more;
        s = &E->sessions[E->nsessions++];
        s->reps = NULL;
    }
    free(s->reps);
    s->id = sid; s->n = (u32)n; s->pktlen = pktlen; s->reps = reps;
    return 0;
}
