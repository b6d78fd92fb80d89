/* engine.c: the native switch around one generated program (included by it, see cgen.py).
 *
 * The v1model flow of p4target/pipeline.py (parser, controls, replication with BMv2's
 * instance_type values and the 16-generation cut, deparser), the state the control plane
 * addresses (tables, registers, counters, multicast groups, clone sessions), the traffic
 * manager of p4target/tm.py (loss with Python's Mersenne Twister, delay, tail-drop queue,
 * token buckets in packets/s and bits/s, the ingress delay of received frames), and the
 * packet loop of p4target/switch.py (AF_PACKET receive rings, AF_XDP send rings; recvmmsg and
 * sendmmsg where the kernel has neither) and pcap capture.
 *
 * Everything exported is `eng_*`, called from Python through ctypes (native/engine.py).
 * One mutex (`mu`) guards the state and the traffic manager: the packet loop holds it per
 * batch, the control plane (eng_lock/eng_unlock) around a whole write batch. PacketIns,
 * digests and log messages go to an event queue with its own lock, announced on a pipe. */
/* ------------------------------------------------------------------ time, randomness */

static double mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static u64 now_us(engine_t *E) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t ns = (int64_t)(ts.tv_sec - E->t0.tv_sec) * 1000000000LL + (ts.tv_nsec - E->t0.tv_nsec);
    return ((u64)ns / 1000) & ((1ULL << 48) - 1);
}

static u32 rng_u32(engine_t *E) {  /* xorshift64*: random() and hash(random) (no Python counterpart to match) */
    E->rng ^= E->rng >> 12; E->rng ^= E->rng << 25; E->rng ^= E->rng >> 27;
    return (u32)((E->rng * 0x2545F4914F6CDD1DULL) >> 32);
}

static u64 rng_range(engine_t *E, u64 lo, u64 hi) {
    if (hi <= lo) return lo;
    u64 span = hi - lo + 1, r = ((u64)rng_u32(E) << 32) | rng_u32(E);
    return span ? lo + r % span : r;
}

/* Python's random.Random: MT19937 seeded by init_by_array, random() with 53 bits. */
static void mt_seed(mt_t *m, const u32 *key, int n) {
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

static double mt_random(mt_t *m) {
    u32 a = mt_next(m) >> 5, b = mt_next(m) >> 6;
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

/* ------------------------------------------------------------------ events for Python */

static void push_event(engine_t *E, int kind, int arg, const void *data, u32 len) {
    ev_t *ev = malloc(sizeof(ev_t) + len);
    if (!ev) return;
    ev->next = NULL; ev->kind = kind; ev->arg = arg; ev->len = len;
    memcpy(ev->data, data, len);
    pthread_mutex_lock(&E->evmu);
    if (E->nev >= MAX_EVENTS) { pthread_mutex_unlock(&E->evmu); free(ev); return; }
    int was_empty = E->evh == NULL;
    if (E->evt) E->evt->next = ev; else E->evh = ev;
    E->evt = ev;
    E->nev++;
    pthread_mutex_unlock(&E->evmu);
    if (was_empty) { ssize_t r = write(E->evpipe[1], "e", 1); (void)r; }
}

static void push_digest(engine_t *E, int id, const u64 *vals, int n) {
    push_event(E, EV_DIGEST, id, vals, (u32)n * 8);
}

static void push_log(engine_t *E, const char *fmt, const u64 *vals, int n) {
    char buf[4096];
    size_t o = 0;
    int k = 0;
    for (const char *c = fmt; *c && o < sizeof(buf) - 24; c++) {
        if (c[0] == '{' && c[1] == '}' && k < n) {
            o += snprintf(buf + o, sizeof(buf) - o, "%llu", (unsigned long long)vals[k++]);
            c++;
        } else {
            buf[o++] = *c;
        }
    }
    push_event(E, EV_LOG, 0, buf, (u32)o);
}

static void packet_error(engine_t *E, const char *stage, const char *msg) {
    char buf[512];
    int n = snprintf(buf, sizeof(buf), "packet dropped in %s: %s", stage, msg ? msg : "error");
    E->pipeline_errors++;
    push_event(E, EV_LOG, 0, buf, (u32)(n < (int)sizeof(buf) ? n : (int)sizeof(buf) - 1));
}

/* ------------------------------------------------------------------ tables */

static u64 hash_key(const u64 *k, const u64 *mask, int n) {
    u64 h = 0x9E3779B97F4A7C15ULL;
    for (int i = 0; i < n; i++) {
        u64 x = (k[i] & mask[i]) + h;
        x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
        x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
        h = x ^ (x >> 31);
    }
    return h;
}

static entry_t *table_lookup(table_t *t, const u64 *key) {
    int n = t->nkeys;
    if (t->prio_mode) {
        for (u32 s = 0; s < t->nsorted; s++) {
            entry_t *e = t->sorted[s];
            int ok = 1;
            for (int i = 0; i < n && ok; i++) {
                if (e->kind[i] == 1) ok = (key[i] & e->m[i]) == e->v[i];
                else if (e->kind[i] == 2) ok = e->v[i] <= key[i] && key[i] <= e->hi[i];
            }
            if (ok) return e;
        }
        return NULL;
    }
    for (level_t *l = t->levels; l; l = l->next) {
        u64 h = hash_key(key, l->mask, n);
        for (entry_t *e = l->b[h & (l->nb - 1)]; e; e = e->hnext) {
            int ok = 1;
            for (int i = 0; i < n && ok; i++) ok = (key[i] & l->mask[i]) == e->v[i];
            if (ok) return e;
        }
    }
    return NULL;
}

static void level_insert(level_t *l, entry_t *e, int n) {
    if (l->n + 1 > l->nb) {
        u32 nb = l->nb * 2;
        entry_t **b = calloc(nb, sizeof(entry_t *));
        for (u32 i = 0; i < l->nb; i++) {
            for (entry_t *x = l->b[i], *next; x; x = next) {
                next = x->hnext;
                u64 h = hash_key(x->v, l->mask, n) & (nb - 1);
                x->hnext = b[h]; b[h] = x;
            }
        }
        free(l->b); l->b = b; l->nb = nb;
    }
    u64 h = hash_key(e->v, l->mask, n) & (l->nb - 1);
    e->hnext = l->b[h]; l->b[h] = e;
    e->lvl = l;
    l->n++;
}

static level_t *level_for(table_t *t, int plen, const u64 *mask) {
    level_t **pp = &t->levels;
    while (*pp && (*pp)->plen > plen) pp = &(*pp)->next;
    if (*pp && (*pp)->plen == plen) return *pp;
    level_t *l = calloc(1, sizeof(level_t));
    l->plen = plen;
    l->mask = malloc(sizeof(u64) * (t->nkeys ? t->nkeys : 1));
    memcpy(l->mask, mask, sizeof(u64) * t->nkeys);
    l->nb = 16;
    l->b = calloc(l->nb, sizeof(entry_t *));
    l->next = *pp;
    *pp = l;
    return l;
}

void eng_table_setup(engine_t *E, int tid, int lpm, int lpm_width, int prio_mode) {
    table_t *t = &E->tables[tid];
    t->lpm = lpm; t->lpm_width = lpm_width; t->prio_mode = prio_mode;
}

int eng_table_add(engine_t *E, int tid, const u64 *v, const u64 *m, const u64 *hi, const u8 *kind,
                  int64_t prio, int action, const u64 *args, int nargs) {
    table_t *t = &E->tables[tid];
    int n = t->nkeys;
    entry_t *e = calloc(1, sizeof(entry_t) + sizeof(u64) * (nargs + 3 * n) + n + 8);
    if (!e) return -1;
    e->args = (u64 *)(e + 1);
    e->v = e->args + nargs; e->m = e->v + n; e->hi = e->m + n;
    e->kind = (u8 *)(e->hi + n);
    memcpy(e->args, args, sizeof(u64) * nargs);
    memcpy(e->v, v, sizeof(u64) * n); memcpy(e->m, m, sizeof(u64) * n);
    memcpy(e->hi, hi, sizeof(u64) * n); memcpy(e->kind, kind, n);
    e->action = action; e->prio = prio; e->seq = t->seq++;
    if (t->prio_mode) {
        if (t->nsorted == t->capsorted) {
            t->capsorted = t->capsorted ? t->capsorted * 2 : 16;
            t->sorted = realloc(t->sorted, sizeof(entry_t *) * t->capsorted);
        }
        u32 at = t->nsorted;
        while (at > 0 && t->sorted[at - 1]->prio < prio) at--;
        memmove(&t->sorted[at + 1], &t->sorted[at], sizeof(entry_t *) * (t->nsorted - at));
        t->sorted[at] = e;
        t->nsorted++;
    } else {
        u64 mask[n ? n : 1];
        for (int i = 0; i < n; i++) mask[i] = kind[i] == 1 ? m[i] : 0;
        int plen = t->lpm >= 0 && kind[t->lpm] == 1 ? __builtin_popcountll(m[t->lpm]) : 0;
        level_insert(level_for(t, plen, mask), e, n);
    }
    if (E->nfree) {
        e->handle = E->freeh[--E->nfree];
    } else {
        if (E->nhandles == E->caphandles) {
            E->caphandles = E->caphandles ? E->caphandles * 2 : 256;
            E->handles = realloc(E->handles, sizeof(entry_t *) * E->caphandles);
            E->freeh = realloc(E->freeh, sizeof(int32_t) * E->caphandles);
        }
        e->handle = (int32_t)E->nhandles++;
    }
    E->handles[e->handle] = e;
    return e->handle;
}

void eng_table_modify(engine_t *E, int handle, int action, const u64 *args, int nargs) {
    entry_t *e = E->handles[handle];
    e->action = action;
    memcpy(e->args, args, sizeof(u64) * nargs);
}

void eng_table_delete(engine_t *E, int tid, int handle) {
    table_t *t = &E->tables[tid];
    entry_t *e = E->handles[handle];
    if (t->prio_mode) {
        for (u32 s = 0; s < t->nsorted; s++) {
            if (t->sorted[s] == e) {
                memmove(&t->sorted[s], &t->sorted[s + 1], sizeof(entry_t *) * (t->nsorted - s - 1));
                t->nsorted--;
                break;
            }
        }
    } else {
        level_t *l = e->lvl;
        u64 h = hash_key(e->v, l->mask, t->nkeys) & (l->nb - 1);
        for (entry_t **pp = &l->b[h]; *pp; pp = &(*pp)->hnext) {
            if (*pp == e) { *pp = e->hnext; break; }
        }
        if (--l->n == 0) {
            for (level_t **pl = &t->levels; *pl; pl = &(*pl)->next) {
                if (*pl == l) { *pl = l->next; break; }
            }
            free(l->b); free(l->mask); free(l);
        }
    }
    E->handles[handle] = NULL;
    E->freeh[E->nfree++] = handle;
    free(e);
}

void eng_table_default(engine_t *E, int tid, int action, const u64 *args, int nargs) {
    table_t *t = &E->tables[tid];
    t->def_action = action;
    free(t->def_args);
    t->def_args = calloc(nargs ? nargs : 1, sizeof(u64));
    memcpy(t->def_args, args, sizeof(u64) * nargs);
}

u64 *eng_entry_counters(engine_t *E, int handle) { return &E->handles[handle]->packets; }
double *eng_entry_last_hit(engine_t *E, int handle) { return &E->handles[handle]->last_hit; }

/* ------------------------------------------------------------------ meters (state.MeterCell) */

static u64 meter_exec(meter_t *m, double amount) {
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
    meter_set(&E->meters[mid][index], on, cir, cburst, pir, pburst);
}

void eng_direct_meter_set(engine_t *E, int handle, int on, double cir, double cburst, double pir, double pburst) {
    meter_set(&E->handles[handle]->meter, on, cir, cburst, pir, pburst);
}
u64 *eng_register(engine_t *E, int rid) { return E->reg[rid]; }
u64 *eng_counter(engine_t *E, int cid, int bytes) { return bytes ? E->cby[cid] : E->cpk[cid]; }

/* ------------------------------------------------------------------ packet replication state */

static rep_t *copy_reps(int n, const u32 *ports, const u32 *rids) {
    rep_t *r = malloc(sizeof(rep_t) * (n ? n : 1));
    for (int i = 0; i < n; i++) { r[i].port = ports[i]; r[i].rid = rids[i]; }
    return r;
}

void eng_mc_set(engine_t *E, int gid, int n, const u32 *ports, const u32 *rids) {
    free(E->mc[gid]);
    E->mc[gid] = n >= 0 ? copy_reps(n, ports, rids) : NULL;
    E->mcn[gid] = n >= 0 ? (u32)n : 0;
}

static session_t *session_find(engine_t *E, u64 id) {
    for (u32 i = 0; i < E->nsessions; i++) if (E->sessions[i].id == id) return &E->sessions[i];
    return NULL;
}

void eng_clone_set(engine_t *E, u64 sid, int n, const u32 *ports, const u32 *rids, u32 pktlen) {
    session_t *s = session_find(E, sid);
    if (n < 0) {
        if (s) { free(s->reps); *s = E->sessions[--E->nsessions]; }
        return;
    }
    if (!s) {
        E->sessions = realloc(E->sessions, sizeof(session_t) * (E->nsessions + 1));
        s = &E->sessions[E->nsessions++];
        s->reps = NULL;
    }
    free(s->reps);
    s->id = sid; s->n = (u32)n; s->pktlen = pktlen; s->reps = copy_reps(n, ports, rids);
}

/* ------------------------------------------------------------------ the v1model flow */

typedef void (*sink_fn)(engine_t *E, u32 port, const u8 *data, u32 len);

static item_t *item_new(const u64 *F, u32 eport, u32 qlen, u64 gen, const u8 *data, u32 dlen, u32 poff) {
    item_t *it = malloc(sizeof(item_t) + dlen);
    if (!it) return NULL;
    it->next = NULL; it->gen = gen; it->eport = eport; it->qlen = qlen;
    it->dlen = dlen; it->poff = poff; it->enq_qdepth = 0; it->t = 0;
    memcpy(it->F, F, sizeof(it->F));
    memcpy(it->data, data, dlen);
    return it;
}

static void fifo_push(fifo_t *f, item_t *it) {
    it->next = NULL;
    if (f->tail) f->tail->next = it; else f->head = it;
    f->tail = it;
    f->n++;
}

static item_t *fifo_pop(fifo_t *f) {
    item_t *it = f->head;
    if (it) { f->head = it->next; if (!f->head) f->tail = NULL; f->n--; }
    return it;
}

typedef struct carry { int n; const int *slots; u64 vals[NSLOTS]; } carry_t;

static void carry_from(carry_t *c, const u64 *F, u64 fl) {
    c->n = 0; c->slots = FL_EMPTY;
    if (fl == NONE64 || fl == NO_FIELD_LIST) return;
    c->slots = field_list(fl, &c->n);
    for (int i = 0; i < c->n; i++) c->vals[i] = F[c->slots[i]];
}

/* A fresh frame with standard metadata set, preserved fields restored, parsed. */
static int parsed(engine_t *E, pk_t *p, u64 *F, u32 port, const u8 *data, u32 len, u64 itype, const carry_t *c) {
    memcpy(F, INIT, sizeof(INIT));
    F[SM_INGRESS_PORT] = port;
    F[SM_INSTANCE_TYPE] = itype;
    F[SM_PACKET_LENGTH] = len;
    F[SM_INGRESS_GLOBAL_TIMESTAMP] = now_us(E);
    for (int i = 0; c && i < c->n; i++) F[c->slots[i]] = c->vals[i];
    memset(p, 0, sizeof(*p));
    p->F = F; p->data = data; p->len = len; p->E = E;
    u32 off = g_parse(p);
    if (off == PARSE_DROP) return 0;
    p->poff = off;
    return 1;
}

static void run_ingress(engine_t *E, u32 port, const u8 *data, u32 len, u64 itype, const carry_t *c, u64 gen,
                        fifo_t *out);

static void clone_i2e(engine_t *E, const u64 *F, u32 port, const u8 *data, u32 len, u64 gen, fifo_t *out) {
    session_t *s = session_find(E, F[H_CLONE_SESSION]);
    if (!s || gen >= MAX_LOOPS) return;
    carry_t c;
    carry_from(&c, F, F[H_CLONE_FL]);
    u64 C[NSLOTS];
    pk_t p;
    if (!parsed(E, &p, C, port, data, len, I2E_CLONE, &c)) { packet_error(E, "I2E clone parser", p.msg); return; }
    C[H_TRUNCATE] = s->pktlen ? s->pktlen : NONE64;
    for (u32 i = 0; i < s->n; i++) {
        item_t *it = item_new(C, s->reps[i].port, len, gen + 1, data, len, p.poff);
        if (!it) return;
        it->F[SM_EGRESS_PORT] = it->F[SM_EGRESS_SPEC] = s->reps[i].port;
        it->F[SM_EGRESS_RID] = s->reps[i].rid;
        fifo_push(out, it);
    }
}

static void run_ingress(engine_t *E, u32 port, const u8 *data, u32 len, u64 itype, const carry_t *c, u64 gen,
                        fifo_t *out) {
    u64 F[NSLOTS];
    pk_t p;
    if (!parsed(E, &p, F, port, data, len, itype, c)) { packet_error(E, "ingress", p.msg); return; }
    p.rc = 0; g_verify(&p);
    if (p.rc == RC_ERR) { packet_error(E, "ingress", p.msg); return; }
    p.rc = 0; g_ingress(&p);
    if (p.rc == RC_ERR) { packet_error(E, "ingress", p.msg); return; }
    if (F[H_CLONE_SESSION] != NONE64 && F[H_CLONE_TYPE] == CLONE_I2E) clone_i2e(E, F, port, data, len, gen, out);
    F[H_CLONE_SESSION] = NONE64;
    if (F[H_RESUBMIT] != NONE64) {
        if (gen < MAX_LOOPS) {
            carry_t r;
            carry_from(&r, F, F[H_RESUBMIT]);
            run_ingress(E, port, data, len, RESUBMITTED, &r, gen + 1, out);
        }
        return;
    }
    u64 group = F[SM_MCAST_GRP];
    if (group) {
        if (group < 65536) {
            for (u32 i = 0; i < E->mcn[group]; i++) {
                item_t *it = item_new(F, E->mc[group][i].port, len, gen, data, len, p.poff);
                if (!it) return;
                it->F[SM_EGRESS_PORT] = it->F[SM_EGRESS_SPEC] = E->mc[group][i].port;
                it->F[SM_EGRESS_RID] = E->mc[group][i].rid;
                it->F[SM_INSTANCE_TYPE] = REPLICATED;
                fifo_push(out, it);
            }
        }
        return;
    }
    u64 eport = F[SM_EGRESS_SPEC];
    if (eport == DROP_PORT) return;
    F[SM_EGRESS_PORT] = eport;
    item_t *it = item_new(F, (u32)eport, len, gen, data, len, p.poff);
    if (it) fifo_push(out, it);
}

static void run_egress(engine_t *E, u64 *F, const u8 *data, u32 dlen, u32 poff, u64 gen, u64 enq, u64 deq,
                       sink_fn sink);

static void clone_e2e(engine_t *E, u64 *F, const u8 *data, u32 dlen, u32 poff, u64 gen, sink_fn sink) {
    session_t *s = session_find(E, F[H_CLONE_SESSION]);
    F[H_CLONE_SESSION] = NONE64;
    if (!s || gen >= MAX_LOOPS) return;
    carry_t c;
    carry_from(&c, F, F[H_CLONE_FL]);
    u64 C[NSLOTS], R[NSLOTS];
    memcpy(C, F, sizeof(C));
    memcpy(&C[META_FIRST], &INIT[META_FIRST], sizeof(u64) * (META_END - META_FIRST));
    for (int i = 0; i < SM_COUNT; i++) {
        int slot = SM_ALL[i];
        if (slot != SM_INGRESS_PORT && slot != SM_PACKET_LENGTH && slot != SM_INGRESS_GLOBAL_TIMESTAMP) C[slot] = INIT[slot];
    }
    for (int i = 0; i < c.n; i++) C[c.slots[i]] = c.vals[i];
    C[SM_INSTANCE_TYPE] = E2E_CLONE;
    C[H_TRUNCATE] = s->pktlen ? s->pktlen : NONE64;
    C[H_RECIRCULATE] = NONE64;
    for (u32 i = 0; i < s->n; i++) {  /* the lock is held: sessions cannot change meanwhile */
        memcpy(R, C, sizeof(R));
        R[SM_EGRESS_PORT] = R[SM_EGRESS_SPEC] = s->reps[i].port;
        R[SM_EGRESS_RID] = s->reps[i].rid;
        run_egress(E, R, data, dlen, poff, gen + 1, 0, 0, sink);
    }
}

static void run_egress(engine_t *E, u64 *F, const u8 *data, u32 dlen, u32 poff, u64 gen, u64 enq, u64 deq,
                       sink_fn sink) {
    pk_t p;
    memset(&p, 0, sizeof(p));
    p.F = F; p.data = data; p.len = dlen; p.poff = poff; p.E = E;
    F[SM_ENQ_QDEPTH] = enq;
    F[SM_DEQ_QDEPTH] = deq;
    F[SM_EGRESS_GLOBAL_TIMESTAMP] = now_us(E);
    g_egress(&p);
    if (p.rc == RC_ERR) { packet_error(E, "egress", p.msg); return; }
    if (F[H_CLONE_SESSION] != NONE64 && F[H_CLONE_TYPE] == CLONE_E2E) clone_e2e(E, F, data, dlen, poff, gen, sink);
    if (F[SM_EGRESS_SPEC] == DROP_PORT) return;
    p.rc = 0;
    g_compute(&p);
    if (p.rc == RC_ERR) { packet_error(E, "egress", p.msg); return; }
    u32 plen = dlen - poff;
    u8 *out = malloc(HDR_MAX + plen + 1);
    if (!out) return;
    u32 n = g_deparse(&p, out);
    memcpy(out + n, data + poff, plen);
    n += plen;
    u64 t = F[H_TRUNCATE];
    if (t != NONE64 && t != 0 && t < n) n = (u32)t;
    if (F[H_RECIRCULATE] != NONE64) {
        if (gen < MAX_LOOPS) {
            carry_t c;
            carry_from(&c, F, F[H_RECIRCULATE]);
            fifo_t items = {0};
            run_ingress(E, (u32)F[SM_INGRESS_PORT], out, n, RECIRCULATED, &c, gen + 1, &items);
            for (item_t *it; (it = fifo_pop(&items));) {
                run_egress(E, it->F, it->data, it->dlen, it->poff, it->gen, 0, 0, sink);
                free(it);
            }
        }
        free(out);
        return;
    }
    sink(E, (u32)F[SM_EGRESS_PORT], out, n);
    free(out);
}

/* ------------------------------------------------------------------ process(): one packet, empty queues */

static void collect(engine_t *E, u32 port, const u8 *data, u32 len) {
    if (E->nouts == E->capouts) {
        E->capouts = E->capouts ? E->capouts * 2 : 16;
        E->outs = realloc(E->outs, sizeof(out_t) * E->capouts);
    }
    out_t *o = &E->outs[E->nouts++];
    o->port = port; o->len = len;
    o->data = malloc(len ? len : 1);
    memcpy(o->data, data, len);
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

/* ------------------------------------------------------------------ traffic manager (p4target/tm.py) */

static tmq_t *tm_queue(engine_t *E, int port) {
    if (port < 0 || port >= MAX_PORTS) return NULL;
    if (!E->tm[port]) {
        tmq_t *q = calloc(1, sizeof(tmq_t));
        q->depth = DEFAULT_DEPTH; q->burst_s = DEFAULT_BURST_S;
        u32 zero = 0;
        mt_seed(&q->rng, &zero, 1);
        E->tm[port] = q;
        E->tmorder[E->ntm++] = port;
    }
    return E->tm[port];
}

static void bucket_set(bucket_t *b, double rate, double now) {
    b->on = rate > 0; b->rate = rate; b->tokens = INFINITY; b->stamp = now;
}

static double bucket_cap(tmq_t *q, bucket_t *b, double cost) {
    double c = b->rate * q->burst_s;
    return cost > c ? cost : c;
}

static double ready_at(tmq_t *q, double now, u32 size) {
    double ready = now;
    bucket_t *bs[2] = {&q->pps, &q->bps};
    double costs[2] = {1.0, size * 8.0};
    for (int i = 0; i < 2; i++) {
        bucket_t *b = bs[i];
        if (!b->on) continue;
        double t = b->tokens + (now - b->stamp) * b->rate, cap = bucket_cap(q, b, costs[i]);
        b->tokens = t < cap ? t : cap;
        b->stamp = now;
        double missing = costs[i] - b->tokens, r = missing <= 0 ? now : now + missing / b->rate;
        if (r > ready) ready = r;
    }
    return ready;
}

static void tm_join(tmq_t *q, item_t *it) {
    if (q->q.n >= q->depth) { q->tail_drops++; free(it); return; }
    it->enq_qdepth = q->q.n;
    fifo_push(&q->q, it);
    q->enqueued++;
}

/* A delay line (tm.py's DelayLine): an item goes in when there is a delay or something is held already (so a
 * delay changed meanwhile never reorders the line), and comes out in order once its time has come. */
static int delay_holds(const fifo_t *line, double delay_s) { return delay_s > 0 || line->head; }

static void delay_push(fifo_t *line, item_t *it, double delay_s) {
    it->t = mono() + delay_s;
    fifo_push(line, it);
}

static item_t *delay_due(fifo_t *line, double now) {
    return line->head && line->head->t <= now ? fifo_pop(line) : NULL;
}

static void tm_enqueue(engine_t *E, item_t *it) {
    tmq_t *q = tm_queue(E, (int)it->eport);
    if (!q) { free(it); return; }
    if (q->loss > 0 && mt_random(&q->rng) < q->loss) { q->loss_drops++; free(it); return; }
    if (delay_holds(&q->delayed, q->delay_s)) delay_push(&q->delayed, it, q->delay_s);
    else tm_join(q, it);
}

static void tx_frame(engine_t *E, u32 port, const u8 *data, u32 len);
static void ingress_enqueue(engine_t *E, u32 port, const u8 *data, u32 len);

/* The held frames whose ingress delay is over go through ingress, then every packet allowed to leave now goes
 * through egress (the caller holds the lock). */
static void tm_serve(engine_t *E) {
    double now = mono();
    for (int k = 0; k < E->ntm; k++) {
        for (item_t *it; (it = delay_due(&E->tm[E->tmorder[k]]->arriving, now));) {
            ingress_enqueue(E, it->eport, it->data, it->dlen);
            free(it);
        }
    }
    for (int k = 0; k < E->ntm; k++) {
        tmq_t *q = E->tm[E->tmorder[k]];
        for (item_t *it; (it = delay_due(&q->delayed, now));) tm_join(q, it);
        while (q->q.head) {
            item_t *it = q->q.head;
            if (ready_at(q, now, it->qlen) > now) break;
            fifo_pop(&q->q);
            if (q->pps.on) q->pps.tokens -= 1;
            if (q->bps.on) q->bps.tokens -= it->qlen * 8.0;
            q->dequeued++;
            run_egress(E, it->F, it->data, it->dlen, it->poff, it->gen, it->enq_qdepth, q->q.n, tx_frame);
            free(it);
        }
    }
}

static double tm_next_event(engine_t *E) {
    double now = mono(), when = -1;
    for (int k = 0; k < E->ntm; k++) {
        tmq_t *q = E->tm[E->tmorder[k]];
        if (q->delayed.head && (when < 0 || q->delayed.head->t < when)) when = q->delayed.head->t;
        if (q->arriving.head && (when < 0 || q->arriving.head->t < when)) when = q->arriving.head->t;
        if (q->q.head) {
            double r = ready_at(q, now, q->q.head->qlen);
            if (when < 0 || r < when) when = r;
        }
    }
    return when;
}

void eng_q_rate(engine_t *E, int port, int bits, double rate) {
    tmq_t *q = tm_queue(E, port);
    if (q) bucket_set(bits ? &q->bps : &q->pps, rate, mono());
}

void eng_q_depth(engine_t *E, int port, u32 depth) { tmq_t *q = tm_queue(E, port); if (q) q->depth = depth; }
void eng_q_delay(engine_t *E, int port, double s) { tmq_t *q = tm_queue(E, port); if (q) q->delay_s = s; }
void eng_q_ingress_delay(engine_t *E, int port, double s) { tmq_t *q = tm_queue(E, port); if (q) q->idelay_s = s; }

void eng_q_loss(engine_t *E, int port, double p, const u32 *key, int nkey) {
    tmq_t *q = tm_queue(E, port);
    if (!q) return;
    q->loss = p;
    if (nkey > 0) mt_seed(&q->rng, key, nkey);
}

/* enqueued, dequeued, tail_drops, loss_drops, qdepth */
void eng_q_stats(engine_t *E, int port, u64 *out) {
    tmq_t *q = tm_queue(E, port);
    if (!q) return;
    out[0] = q->enqueued; out[1] = q->dequeued; out[2] = q->tail_drops; out[3] = q->loss_drops; out[4] = q->q.n;
}

/* ------------------------------------------------------------------ ports and the packet loop */

static void pcap_write(FILE *f, u64 *size, u64 cap, const u8 *data, u32 len) {
    if (!f || (cap && *size + 16 + len > cap)) return;
    *size += 16 + len;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    u32 rec[4] = {(u32)ts.tv_sec, (u32)((ts.tv_nsec + 500) / 1000), len, len};
    if (rec[1] >= 1000000) { rec[0]++; rec[1] -= 1000000; }
    fwrite(rec, sizeof(rec), 1, f);
    fwrite(data, 1, len, f);
}

static FILE *pcap_open(const char *path, u64 *size) {
    if (!path || !*path) return NULL;
    FILE *f = fopen(path, "ab");
    if (f && fseek(f, 0, SEEK_END) == 0 && ftell(f) == 0) {
        u32 hdr[6] = {0xA1B2C3D4u, 2 | (4u << 16), 0, 0, 65535, 1};
        fwrite(hdr, sizeof(hdr), 1, f);
    }
    if (f) *size = (u64)ftell(f);
    return f;
}

/* A port socket stops receiving (a filter that keeps no frame; binding to protocol 0 keeps the old one), or
 * starts again. */
static int take_nothing(int fd, int on) {
    int unused = 0;
    if (!on) return setsockopt(fd, SOL_SOCKET, SO_DETACH_FILTER, &unused, sizeof(unused));
    struct sock_filter keep_none = BPF_STMT(BPF_RET | BPF_K, 0);
    struct sock_fprog prog = {1, &keep_none};
    return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog));
}

/* The port's receive ring: a socket of the engine's own whose ring has slots big enough for the port's MTU plus
 * an Ethernet and a VLAN header. It takes over receiving from the port's socket (which keeps sending) in two
 * back-to-back calls, so only a frame arriving in the microseconds between them is lost; what waited on the
 * port's socket before stays there for the caller to take. A bigger frame (offloads left on) fills its slot only
 * in part and is marked TP_STATUS_COPY: with a copy threshold set, the kernel also queues it whole on the ring's
 * socket, where rx_ring_read takes it. 0, or -1 (nothing changed) when the kernel has no rings. */
static int rx_ring_open(port_t *pt) {
    int version = TPACKET_V2, one = 1;
    struct sockaddr_ll me;
    socklen_t mlen = sizeof(me);
    struct ifreq ifr = {0};
    if (getsockname(pt->fd, (struct sockaddr *)&me, &mlen) || !if_indextoname((unsigned)me.sll_ifindex, ifr.ifr_name))
        return -1;
    int mtu = ioctl(pt->fd, SIOCGIFMTU, &ifr) == 0 ? ifr.ifr_mtu : 1500;
    u32 frame = 2048;
    while (frame < (u32)TPACKET_ALIGN(TPACKET2_HDRLEN + 16) + (u32)mtu + 18) frame *= 2;
    u32 block = frame > 65536 ? frame : 65536;
    struct tpacket_req req = {block, RX_RING_BYTES / block, frame, (RX_RING_BYTES / block) * (block / frame)};
    int fd = socket(AF_PACKET, SOCK_RAW, 0);  /* protocol 0: receives nothing until bound */
    if (fd < 0) return -1;
    setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));  /* not the port socket's sends */
    u8 *map = MAP_FAILED;
    size_t bytes = (size_t)req.tp_block_size * req.tp_block_nr;
    if (setsockopt(fd, SOL_PACKET, PACKET_VERSION, &version, sizeof(version)) == 0
        && setsockopt(fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof(req)) == 0)
        map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) { close(fd); return -1; }
    setsockopt(fd, SOL_PACKET, PACKET_COPY_THRESH, &one, sizeof(one));
    struct sockaddr_ll at = {0};
    at.sll_family = AF_PACKET;
    at.sll_protocol = htons(ETH_P_ALL);
    at.sll_ifindex = me.sll_ifindex;
    if (take_nothing(pt->fd, 1) || bind(fd, (struct sockaddr *)&at, sizeof(at))) {
        take_nothing(pt->fd, 0);
        munmap(map, bytes);
        close(fd);
        return -1;
    }
    pt->rx = (ring_t){map, bytes, req.tp_frame_nr, frame, 0, fd};
    return 0;
}

/* Receiving back to the port's socket (the Python loop's or another engine's to read), the ring closed: frames
 * still in it are dropped, as a switch drops what it holds when its program changes. */
static void rx_ring_close(port_t *pt) {
    if (!pt->rx.map) return;
    take_nothing(pt->fd, 0);
    munmap(pt->rx.map, pt->rx.bytes);
    close(pt->rx.fd);
    pt->rx.map = NULL;
}

static void xsk_close(port_t *pt);
static int xsk_open(port_t *pt);

/* Every port's rings closed: the engine gives its ports back (see rx_ring_close). */
void eng_ports_release(engine_t *E) {
    for (int i = 0; i < MAX_PORTS; i++) {
        if (!E->ports[i]) continue;
        rx_ring_close(E->ports[i]);
        xsk_close(E->ports[i]);
    }
}

int eng_port_add(engine_t *E, int number, int fd, const char *pcap_in, const char *pcap_out) {
    if (number < 0 || number >= MAX_PORTS) return -1;
    if (E->ports[number]) return 0;  /* already given (a loop restarted) */
    port_t *pt = calloc(1, sizeof(port_t));
    pt->fd = fd;
    pt->pin = pcap_open(pcap_in, &pt->pin_size);
    pt->pout = pcap_open(pcap_out, &pt->pout_size);
    pt->txbuf = malloc((size_t)TX_BATCH * TX_FRAME);
    E->ports[number] = pt;
    return 0;
}

/* rx_packets, rx_bytes, tx_packets, tx_bytes, tx_errors, rx_errors */
void eng_port_stats(engine_t *E, int number, u64 *out) {
    port_t *pt = number >= 0 && number < MAX_PORTS ? E->ports[number] : NULL;
    if (!pt) return;
    out[0] = pt->rx_packets; out[1] = pt->rx_bytes; out[2] = pt->tx_packets;
    out[3] = pt->tx_bytes; out[4] = pt->tx_errors; out[5] = pt->rx_errors;
}

/* ------------------------------------------------------------------ sending: the send ring, or sendmmsg */

static void xsk_close(port_t *pt) {
    xsk_t *x = &pt->xsk;
    if (!x->umem) return;
    munmap(x->txmap, x->txbytes);
    munmap(x->cqmap, x->cqbytes);
    close(x->fd);
    munmap(x->umem, (size_t)XSK_FRAMES * XSK_FRAME);
    x->umem = NULL;
}

/* The port's send ring (see xsk_t), on the device the port's socket is bound to, opened with no frame pending: 0,
 * or -1 (nothing changed) when the kernel has no AF_XDP, or AGGNET_NATIVE_SENDMMSG is set (tests send both ways),
 * or the device is held a moment longer by the ring of an engine just stopped: the loop's idle wake tries again. */
static int xsk_open(port_t *pt) {
    struct sockaddr_ll me;
    socklen_t mlen = sizeof(me);
    if (getenv("AGGNET_NATIVE_SENDMMSG") || getsockname(pt->fd, (struct sockaddr *)&me, &mlen)) return -1;
    int fd = socket(AF_XDP, SOCK_RAW, 0);
    if (fd < 0) return -1;
    size_t ubytes = (size_t)XSK_FRAMES * XSK_FRAME, txbytes = 0, cqbytes = 0;
    u8 *umem = mmap(NULL, ubytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    u8 *tx = MAP_FAILED, *cq = MAP_FAILED;
    struct xdp_umem_reg reg = {.addr = (u64)(uintptr_t)umem, .len = ubytes, .chunk_size = XSK_FRAME};
    struct xdp_mmap_offsets off;
    socklen_t olen = sizeof(off);
    int slots = XSK_RING;
    if (umem != MAP_FAILED && !setsockopt(fd, SOL_XDP, XDP_UMEM_REG, &reg, sizeof(reg))
        && !setsockopt(fd, SOL_XDP, XDP_UMEM_FILL_RING, &slots, sizeof(slots))  /* bind wants one; never used */
        && !setsockopt(fd, SOL_XDP, XDP_UMEM_COMPLETION_RING, &slots, sizeof(slots))
        && !setsockopt(fd, SOL_XDP, XDP_TX_RING, &slots, sizeof(slots))
        && !getsockopt(fd, SOL_XDP, XDP_MMAP_OFFSETS, &off, &olen)) {
        txbytes = off.tx.desc + XSK_RING * sizeof(struct xdp_desc);
        cqbytes = off.cr.desc + XSK_RING * sizeof(u64);
        tx = mmap(NULL, txbytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, XDP_PGOFF_TX_RING);
        cq = mmap(NULL, cqbytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, XDP_UMEM_PGOFF_COMPLETION_RING);
    }
    struct sockaddr_xdp at = {.sxdp_family = AF_XDP, .sxdp_ifindex = (u32)me.sll_ifindex, .sxdp_flags = XDP_COPY};
    if (tx == MAP_FAILED || cq == MAP_FAILED || bind(fd, (struct sockaddr *)&at, sizeof(at))) {
        if (tx != MAP_FAILED) munmap(tx, txbytes);
        if (cq != MAP_FAILED) munmap(cq, cqbytes);
        if (umem != MAP_FAILED) munmap(umem, ubytes);
        close(fd);
        return -1;
    }
    xsk_t *x = &pt->xsk;
    x->umem = umem; x->txmap = tx; x->cqmap = cq; x->txbytes = txbytes; x->cqbytes = cqbytes; x->fd = fd;
    x->txprod = (u32 *)(tx + off.tx.producer); x->txcons = (u32 *)(tx + off.tx.consumer);
    x->txd = (struct xdp_desc *)(tx + off.tx.desc);
    x->cqprod = (u32 *)(cq + off.cr.producer); x->cqcons = (u32 *)(cq + off.cr.consumer);
    x->cqd = (u64 *)(cq + off.cr.desc);
    x->prod = *x->txprod;
    for (x->nfree = 0; x->nfree < XSK_FRAMES; x->nfree++) x->free[x->nfree] = (u64)x->nfree * XSK_FRAME;
    return 0;
}

/* The frames the kernel has sent, free again. */
static void xsk_reclaim(xsk_t *x) {
    u32 end = __atomic_load_n(x->cqprod, __ATOMIC_ACQUIRE), i = *x->cqcons;
    for (; i != end; i++) x->free[x->nfree++] = x->cqd[i & (XSK_RING - 1)];
    __atomic_store_n(x->cqcons, i, __ATOMIC_RELEASE);
}

/* Send what waits in the ring: the kernel takes up to 32 descriptors a call. A ring that stops moving (its
 * device went down) keeps its descriptors, which would leave when the device came back, long after: the ring is
 * closed instead, its frames counted as send errors, and the port sends through its socket until the loop's idle
 * wake opens a new ring (see xsk_open). */
static void xsk_flush(port_t *pt) {
    xsk_t *x = &pt->xsk;
    __atomic_store_n(x->txprod, x->prod, __ATOMIC_RELEASE);
    for (int stalls = 0;;) {
        u32 cons = __atomic_load_n(x->txcons, __ATOMIC_ACQUIRE);
        if (cons == x->prod) break;
        int r = (int)sendto(x->fd, NULL, 0, MSG_DONTWAIT, NULL, 0);
        xsk_reclaim(x);
        if (__atomic_load_n(x->txcons, __ATOMIC_ACQUIRE) != cons) { stalls = 0; continue; }
        int busy = r == 0 || errno == EAGAIN || errno == EBUSY || errno == ENOBUFS || errno == EINTR;
        if (busy && ++stalls < 10) {  /* the kernel is out of buffers for a moment: wait for room */
            struct pollfd pf = {x->fd, POLLOUT, 0};
            poll(&pf, 1, 1);
            continue;
        }
        pt->tx_errors += x->prod - cons;
        pt->tx_packets -= x->prod - cons;
        xsk_close(pt);
        return;
    }
    xsk_reclaim(x);
}

static void sendmmsg_flush(port_t *pt) {
    int done = 0;
    while (done < pt->ntx) {
        int r = sendmmsg(pt->fd, pt->tx + done, pt->ntx - done, MSG_DONTWAIT);
        if (r <= 0) {
            if (r < 0 && errno == EINTR) continue;
            if (r < 0 && (errno == EAGAIN || errno == ENOBUFS)) {  /* full: wait for room, as a blocking send would */
                struct pollfd pf = {pt->fd, POLLOUT, 0};
                if (poll(&pf, 1, 10) > 0) continue;
            }
            pt->tx_errors += pt->ntx - done;
            pt->tx_packets -= pt->ntx - done;
            break;
        }
        done += r;
    }
}

/* The port's pending frames (ntx of them) leave. */
static void tx_flush(port_t *pt) {
    if (pt->xsk.umem) xsk_flush(pt);
    else sendmmsg_flush(pt);
    pt->ntx = 0;
}

static void tx_frame(engine_t *E, u32 port, const u8 *data, u32 len) {
    port_t *pt = port < MAX_PORTS ? E->ports[port] : NULL;
    if (!pt) {
        if ((int)port == E->cpu_port) push_event(E, EV_PACKET_IN, (int)port, data, len);
        else E->dropped_no_port++;
        return;
    }
    pt->tx_packets++;
    pt->tx_bytes += len;
    pcap_write(pt->pout, &pt->pout_size, E->pcap_cap, data, len);
    xsk_t *x = &pt->xsk;
    if (x->umem && len <= XSK_FRAME) {
        if (!x->nfree) xsk_reclaim(x);
        if (!x->nfree) { pt->tx_errors++; pt->tx_packets--; return; }  /* every frame still on its way out */
        u64 at = x->free[--x->nfree];
        memcpy(x->umem + at, data, len);
        x->txd[x->prod++ & (XSK_RING - 1)] = (struct xdp_desc){.addr = at, .len = len};
    } else if (len > TX_FRAME || x->umem) {  /* too big for a batch slot: alone, after what waits */
        if (pt->ntx) tx_flush(pt);
        if (send(pt->fd, data, len, 0) < 0) { pt->tx_errors++; pt->tx_packets--; }
        return;
    } else {
        u8 *buf = pt->txbuf + (size_t)pt->ntx * TX_FRAME;
        memcpy(buf, data, len);
        pt->txv[pt->ntx].iov_base = buf;
        pt->txv[pt->ntx].iov_len = len;
        memset(&pt->tx[pt->ntx], 0, sizeof(pt->tx[0]));
        pt->tx[pt->ntx].msg_hdr.msg_iov = &pt->txv[pt->ntx];
        pt->tx[pt->ntx].msg_hdr.msg_iovlen = 1;
    }
    if (++pt->ntx == TX_BATCH) tx_flush(pt);
}

static void ingress_enqueue(engine_t *E, u32 port, const u8 *data, u32 len) {
    fifo_t items = {0};
    run_ingress(E, port, data, len, NORMAL, NULL, 0, &items);
    for (item_t *it; (it = fifo_pop(&items));) tm_enqueue(E, it);
}

/* A frame not yet through ingress (a PacketOut, or a frame held for its port's ingress delay): only data, dlen,
 * eport (the port it enters on) and t are used. */
static item_t *frame_item(u32 port, const u8 *data, u32 len) {
    item_t *it = malloc(sizeof(item_t) + len);
    if (!it) return NULL;
    it->next = NULL; it->eport = port; it->dlen = len; it->t = 0;
    memcpy(it->data, data, len);
    return it;
}

/* A frame received on `port`: into ingress now, or held for the port's ingress delay (the caller holds the lock). */
static void rx_frame(engine_t *E, u32 port, const u8 *data, u32 len) {
    tmq_t *q = E->tm[port];
    if (!q || !delay_holds(&q->arriving, q->idelay_s)) { ingress_enqueue(E, port, data, len); return; }
    item_t *it = frame_item(port, data, len);
    if (it) delay_push(&q->arriving, it, q->idelay_s);
}

void eng_inject(engine_t *E, u32 port, const u8 *data, u32 len) {
    item_t *it = frame_item(port, data, len);
    if (!it) return;
    pthread_mutex_lock(&E->injmu);
    if (E->injt) E->injt->next = it; else E->injh = it;
    E->injt = it;
    pthread_mutex_unlock(&E->injmu);
    ssize_t r = write(E->wake[1], "w", 1);
    (void)r;
}

void eng_stop(engine_t *E) {
    E->stopping = 1;
    ssize_t r = write(E->wake[1], "s", 1);
    (void)r;
}

void eng_set_cpu_port(engine_t *E, int port) { E->cpu_port = port; }

void eng_set_pcap_cap(engine_t *E, u64 bytes) { E->pcap_cap = bytes; }

/* One frame of a port, received: counted, captured, into ingress (the caller holds the lock). */
static void rx_take(engine_t *E, u32 port, port_t *pt, const u8 *d, u32 len) {
    pt->rx_packets++; pt->rx_bytes += len;
    pcap_write(pt->pin, &pt->pin_size, E->pcap_cap, d, len);
    rx_frame(E, port, d, len);
}

/* Up to RX_RING_BATCH frames from a port's receive ring, each handed back to the kernel once through ingress (which
 * copies what it keeps); an error the socket reports (link down, interface gone) is read, which clears it. */
static void rx_ring_read(engine_t *E, u32 port, port_t *pt, short revents, u8 *big) {
    if (revents & POLLERR) {  /* both sockets have it; a send would fail on the port socket's */
        int err = 0, also = 0;
        socklen_t elen = sizeof(err);
        if (getsockopt(pt->rx.fd, SOL_SOCKET, SO_ERROR, &err, &elen) == 0 && err) pt->rx_errors++;
        getsockopt(pt->fd, SOL_SOCKET, SO_ERROR, &also, &elen);
    }
    pthread_mutex_lock(&E->mu);
    for (int k = 0; k < RX_RING_BATCH; k++) {
        struct tpacket2_hdr *h = (struct tpacket2_hdr *)(pt->rx.map + (size_t)pt->rx.head * pt->rx.frame);
        u32 status = __atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE);
        if (!(status & TP_STATUS_USER)) break;
        const struct sockaddr_ll *from = (const struct sockaddr_ll *)((u8 *)h + TPACKET_ALIGN(sizeof(*h)));
        if (from->sll_pkttype != PACKET_OUTGOING) {
            if (status & TP_STATUS_COPY) {  /* bigger than a slot: its whole copy waits on the socket */
                ssize_t len = recv(pt->rx.fd, big, RX_BUF, MSG_DONTWAIT | MSG_TRUNC);
                if (len >= 0) rx_take(E, port, pt, big, len > RX_BUF ? RX_BUF : (u32)len);
                else pt->rx_errors++;
            } else if (h->tp_snaplen == h->tp_len) {
                rx_take(E, port, pt, (u8 *)h + h->tp_mac, h->tp_snaplen);
            } else {
                pt->rx_errors++;  /* cut short and no copy (the socket's buffer was full) */
            }
        }
        __atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
        pt->rx.head = pt->rx.head + 1 == pt->rx.frames ? 0 : pt->rx.head + 1;
    }
    tm_serve(E);
    pthread_mutex_unlock(&E->mu);
}

/* Buffers for reading a port's socket (recvmmsg). */
typedef struct rxbufs { u8 *data; struct mmsghdr msg[RX_BATCH]; struct iovec iov[RX_BATCH]; struct sockaddr_ll from[RX_BATCH]; } rxbufs_t;

/* Up to RX_BATCH frames waiting on a port's socket, into ingress; how many were read (-1: none). */
static int rx_socket_read(engine_t *E, u32 port, port_t *pt, rxbufs_t *b) {
    for (int k = 0; k < RX_BATCH; k++) {
        b->iov[k].iov_base = b->data + (size_t)k * RX_BUF; b->iov[k].iov_len = RX_BUF;
        memset(&b->msg[k], 0, sizeof(b->msg[k]));
        b->msg[k].msg_hdr.msg_iov = &b->iov[k]; b->msg[k].msg_hdr.msg_iovlen = 1;
        b->msg[k].msg_hdr.msg_name = &b->from[k]; b->msg[k].msg_hdr.msg_namelen = sizeof(b->from[k]);
    }
    int got = recvmmsg(pt->fd, b->msg, RX_BATCH, MSG_DONTWAIT, NULL);
    if (got < 0) { if (errno != EAGAIN && errno != EINTR) pt->rx_errors++; return -1; }
    pthread_mutex_lock(&E->mu);
    for (int k = 0; k < got; k++) {
        if (b->from[k].sll_pkttype == PACKET_OUTGOING) continue;
        u32 len = b->msg[k].msg_len;
        rx_take(E, port, pt, b->data + (size_t)k * RX_BUF, len > RX_BUF ? RX_BUF : len);
    }
    tm_serve(E);
    pthread_mutex_unlock(&E->mu);
    return got;
}

/* Under load the receive rings fill while the loop works: it reads them again with no poll() (a system call
 * whose cost would rival the frames'). How many rings have frames; 0 (none, or a port has no ring): poll. */
static int rx_rings_waiting(engine_t *E, struct pollfd *pfd, const int *pnum, int n) {
    int waiting = 0;
    for (int i = 0; i < n; i++) {
        const port_t *pt = E->ports[pnum[i]];
        if (!pt->rx.map) return 0;
        const struct tpacket2_hdr *h = (const struct tpacket2_hdr *)(pt->rx.map + (size_t)pt->rx.head * pt->rx.frame);
        pfd[i].revents = __atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER ? POLLIN : 0;
        waiting += pfd[i].revents != 0;
    }
    pfd[n].revents = 0;
    return waiting;
}

/* Move packets until eng_stop(): poll -> receive ring (or recvmmsg) -> (ingress delay) -> ingress -> traffic
 * manager -> egress -> send ring (or sendmmsg). The rings are set up here (see rx_ring_open, xsk_open). */
int eng_run(engine_t *E) {
    rxbufs_t *rxb = malloc(sizeof(rxbufs_t));
    rxb->data = malloc((size_t)RX_BATCH * RX_BUF);
    struct pollfd pfd[MAX_PORTS + 1];
    int pnum[MAX_PORTS + 1], n = 0;
    for (int i = 0; i < MAX_PORTS; i++) if (E->ports[i] && !E->ports[i]->xsk.umem) xsk_open(E->ports[i]);  /* before a frame is sent */
    for (int i = 0; i < MAX_PORTS; i++) {
        port_t *pt = E->ports[i];
        if (!pt) continue;
        if (!pt->rx.map && rx_ring_open(pt) == 0) {
            while (rx_socket_read(E, (u32)i, pt, rxb) > 0) {}  /* what arrived before the ring, first */
        }
        pfd[n].fd = pt->rx.map ? pt->rx.fd : pt->fd; pfd[n].events = POLLIN; pnum[n++] = i;
    }
    pfd[n].fd = E->wake[0]; pfd[n].events = POLLIN;
    for (int i = 0; i < n; i++) if (E->ports[pnum[i]]->ntx) tx_flush(E->ports[pnum[i]]);
    double last_flush = mono();
    while (!E->stopping) {
        pthread_mutex_lock(&E->mu);
        double when = tm_next_event(E);
        pthread_mutex_unlock(&E->mu);
        double wait = IDLE_WAKE_S;
        if (when >= 0) { double w = when - mono(); wait = w < 0 ? 0 : (w < wait ? w : wait); }
        int timeout = wait >= 0.001 ? (int)(wait * 1000) : (wait == 0 ? 0 : 1);
        int r = rx_rings_waiting(E, pfd, pnum, n);
        if (!r) r = poll(pfd, n + 1, timeout);
        if (r < 0 && errno != EINTR) break;
        for (int i = 0; r > 0 && i < n; i++) {
            if (pfd[i].revents & POLLNVAL) { pfd[i].fd = -1; continue; }  /* closed under us: stop polling it */
            /* POLLERR (link down, interface gone): reading the socket (or its error, for a ring) clears it */
            if (!(pfd[i].revents & (POLLIN | POLLERR | POLLHUP))) continue;
            port_t *pt = E->ports[pnum[i]];
            if (pt->rx.map) rx_ring_read(E, (u32)pnum[i], pt, pfd[i].revents, rxb->data);
            else rx_socket_read(E, (u32)pnum[i], pt, rxb);
        }
        if (pfd[n].revents & POLLIN) {
            char junk[256];
            while (read(E->wake[0], junk, sizeof(junk)) > 0) {}
        }
        pthread_mutex_lock(&E->injmu);
        item_t *inj = E->injh;
        E->injh = E->injt = NULL;
        pthread_mutex_unlock(&E->injmu);
        pthread_mutex_lock(&E->mu);
        for (item_t *it = inj, *next; it; it = next) {
            next = it->next;
            ingress_enqueue(E, it->eport, it->data, it->dlen);
            free(it);
        }
        tm_serve(E);
        pthread_mutex_unlock(&E->mu);
        for (int i = 0; i < n; i++) if (E->ports[pnum[i]]->ntx) tx_flush(E->ports[pnum[i]]);
        if (mono() - last_flush >= IDLE_WAKE_S) {
            last_flush = mono();
            for (int i = 0; i < n; i++) {
                port_t *pt = E->ports[pnum[i]];
                if (pt->pin) fflush(pt->pin);
                if (pt->pout) fflush(pt->pout);
                if (!pt->xsk.umem) xsk_open(pt);  /* nothing pending: tx_flush above */
            }
        }
    }
    free(rxb->data);
    free(rxb);
    for (int i = 0; i < n; i++) {
        port_t *pt = E->ports[pnum[i]];
        if (pt->ntx) tx_flush(pt);
        if (pt->pin) fflush(pt->pin);
        if (pt->pout) fflush(pt->pout);
    }
    E->stopping = 0;
    return 0;
}

/* ------------------------------------------------------------------ events, lock, life cycle */

int eng_event_fd(engine_t *E) { return E->evpipe[0]; }

/* Wake whoever blocks on eng_event_fd (to let it stop). */
void eng_event_wake(engine_t *E) { ssize_t r = write(E->evpipe[1], "w", 1); (void)r; }

/* The oldest event: its kind (0 = none), argument (port or digest id), bytes copied into buf. */
int eng_event(engine_t *E, int *arg, u8 *buf, u32 cap, u32 *len) {
    pthread_mutex_lock(&E->evmu);
    ev_t *ev = E->evh;
    if (ev) { E->evh = ev->next; if (!E->evh) E->evt = NULL; E->nev--; }
    pthread_mutex_unlock(&E->evmu);
    if (!ev) return 0;
    int kind = ev->kind;
    *arg = ev->arg;
    *len = ev->len < cap ? ev->len : cap;
    memcpy(buf, ev->data, *len);
    free(ev);
    return kind;
}

void eng_lock(engine_t *E) { pthread_mutex_lock(&E->mu); }
void eng_unlock(engine_t *E) { pthread_mutex_unlock(&E->mu); }
u64 eng_dropped_no_port(engine_t *E) { return E->dropped_no_port; }
u64 eng_pipeline_errors(engine_t *E) { return E->pipeline_errors; }

engine_t *eng_new(u64 seed) {
    engine_t *E = calloc(1, sizeof(engine_t));
    if (!E) return NULL;
    pthread_mutex_init(&E->mu, NULL);
    pthread_mutex_init(&E->evmu, NULL);
    pthread_mutex_init(&E->injmu, NULL);
    for (int i = 0; i < NTABLES; i++) {
        E->tables[i].nkeys = TABLE_KEYS[i];
        E->tables[i].lpm = -1;
        E->tables[i].def_args = calloc(1, sizeof(u64));
    }
    for (int i = 0; i < NREGS; i++) E->reg[i] = calloc(REG_SIZE[i] ? REG_SIZE[i] : 1, sizeof(u64));
    for (int i = 0; i < NCOUNTERS; i++) {
        E->cpk[i] = calloc(COUNTER_SIZE[i] ? COUNTER_SIZE[i] : 1, sizeof(u64));
        E->cby[i] = calloc(COUNTER_SIZE[i] ? COUNTER_SIZE[i] : 1, sizeof(u64));
    }
    for (int i = 0; i < NMETERS; i++) E->meters[i] = calloc(METER_SIZE[i] ? METER_SIZE[i] : 1, sizeof(meter_t));
    E->mc = calloc(65536, sizeof(rep_t *));
    E->mcn = calloc(65536, sizeof(u32));
    E->rng = seed * 0x9E3779B97F4A7C15ULL + 0x2545F4914F6CDD1DULL;
    E->cpu_port = 255;
    clock_gettime(CLOCK_MONOTONIC, &E->t0);
    if (pipe(E->evpipe) || pipe(E->wake)) { free(E); return NULL; }
    fcntl(E->evpipe[1], F_SETFL, O_NONBLOCK);  /* the reader (Python's pump thread) blocks */
    fcntl(E->wake[0], F_SETFL, O_NONBLOCK);
    fcntl(E->wake[1], F_SETFL, O_NONBLOCK);
    return E;
}

static void fifo_free(fifo_t *f) { for (item_t *it; (it = fifo_pop(f));) free(it); }

void eng_free(engine_t *E) {
    for (int i = 0; i < NTABLES; i++) {
        table_t *t = &E->tables[i];
        for (level_t *l = t->levels, *next; l; l = next) { next = l->next; free(l->b); free(l->mask); free(l); }
        free(t->sorted); free(t->def_args);
    }
    for (u32 h = 0; h < E->nhandles; h++) free(E->handles[h]);
    free(E->handles); free(E->freeh);
    for (int i = 0; i < NREGS; i++) free(E->reg[i]);
    for (int i = 0; i < NCOUNTERS; i++) { free(E->cpk[i]); free(E->cby[i]); }
    for (int i = 0; i < NMETERS; i++) free(E->meters[i]);
    for (int g = 0; g < 65536; g++) free(E->mc[g]);
    free(E->mc); free(E->mcn);
    for (u32 s = 0; s < E->nsessions; s++) free(E->sessions[s].reps);
    free(E->sessions);
    for (int p = 0; p < MAX_PORTS; p++) {
        if (E->tm[p]) {
            fifo_free(&E->tm[p]->q); fifo_free(&E->tm[p]->delayed); fifo_free(&E->tm[p]->arriving);
            free(E->tm[p]);
        }
        if (E->ports[p]) {
            if (E->ports[p]->pin) fclose(E->ports[p]->pin);
            if (E->ports[p]->pout) fclose(E->ports[p]->pout);
            if (E->ports[p]->rx.map) {  /* not released: its port socket may be closed already, left alone */
                munmap(E->ports[p]->rx.map, E->ports[p]->rx.bytes);
                close(E->ports[p]->rx.fd);
            }
            free(E->ports[p]->txbuf); free(E->ports[p]);
        }
    }
    eng_clear_outputs(E);
    free(E->outs);
    for (ev_t *ev = E->evh, *next; ev; ev = next) { next = ev->next; free(ev); }
    for (item_t *it = E->injh, *next; it; it = next) { next = it->next; free(it); }
    close(E->evpipe[0]); close(E->evpipe[1]); close(E->wake[0]); close(E->wake[1]);
    free(E);
}
