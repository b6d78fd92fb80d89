/* engine.c: an engine's life cycle and lock. */
#include "internal.h"

void eng_lock(engine_t *E) { pthread_mutex_lock(&E->mu); }
void eng_unlock(engine_t *E) { pthread_mutex_unlock(&E->mu); }
u64 eng_dropped_no_port(engine_t *E) { return E->dropped_no_port; }
u64 eng_pipeline_errors(engine_t *E) { return E->pipeline_errors; }

/* n zeroed cells of `size` bytes each (at least one), NULL without memory. */
static void *cells(u64 n, size_t size) { return calloc(n ? n : 1, size); }

/* The state of the program linked in (aggnet_prog), empty; NULL without memory or pipes. */
engine_t *eng_new(u64 seed) {
    engine_t *E = calloc(1, sizeof(engine_t));
    if (!E) return NULL;
    E->evpipe[0] = E->evpipe[1] = E->wake[0] = E->wake[1] = -1;
    pthread_mutex_init(&E->mu, NULL);
    pthread_mutex_init(&E->evmu, NULL);
    pthread_mutex_init(&E->injmu, NULL);
    prog_state_t *S = &E->st;
    int fail = !(S->tables = calloc(PROG.ntables ? (size_t)PROG.ntables : 1, sizeof(table_t)))
               || !(S->reg = calloc(PROG.nregs ? (size_t)PROG.nregs : 1, sizeof(u64 *)))
               || !(S->cpk = calloc(PROG.ncounters ? (size_t)PROG.ncounters : 1, sizeof(u64 *)))
               || !(S->cby = calloc(PROG.ncounters ? (size_t)PROG.ncounters : 1, sizeof(u64 *)))
               || !(S->meters = calloc(PROG.nmeters ? (size_t)PROG.nmeters : 1, sizeof(meter_t *)))
               || !(S->looped = calloc(PROG.nloops ? (size_t)PROG.nloops : 1, 1))
               || !(E->mc = calloc(MC_GROUPS, sizeof(rep_t *))) || !(E->mcn = calloc(MC_GROUPS, sizeof(u32)))
               || pipe(E->evpipe) || pipe(E->wake);
    for (int i = 0; !fail && i < PROG.ntables; i++) {
        S->tables[i].nkeys = PROG.table_keys[i];
        S->tables[i].lpm = -1;
        fail = !(S->tables[i].def_args = calloc(1, sizeof(u64)));
    }
    for (int i = 0; !fail && i < PROG.nregs; i++) fail = !(S->reg[i] = cells(PROG.reg_size[i], sizeof(u64)));
    for (int i = 0; !fail && i < PROG.ncounters; i++)
        fail = !(S->cpk[i] = cells(PROG.counter_size[i], sizeof(u64)))
               || !(S->cby[i] = cells(PROG.counter_size[i], sizeof(u64)));
    for (int i = 0; !fail && i < PROG.nmeters; i++) fail = !(S->meters[i] = cells(PROG.meter_size[i], sizeof(meter_t)));
    if (fail) { eng_free(E); return NULL; }
    E->rng = seed * 0x9E3779B97F4A7C15ULL + 0x2545F4914F6CDD1DULL;
    E->cpu_port = DEFAULT_CPU_PORT;
    clock_gettime(CLOCK_MONOTONIC, &E->t0);
    fcntl(E->evpipe[1], F_SETFL, O_NONBLOCK);  /* the reader (Python's pump thread) blocks */
    fcntl(E->wake[0], F_SETFL, O_NONBLOCK);
    fcntl(E->wake[1], F_SETFL, O_NONBLOCK);
    return E;
}

/* Everything the engine holds, also of one eng_new gave up on half-way. */
void eng_free(engine_t *E) {
    prog_state_t *S = &E->st;
    for (int i = 0; S->tables && i < PROG.ntables; i++) table_free(&S->tables[i]);
    for (u32 h = 0; h < E->nhandles; h++) entry_free(E->handles[h]);
    free(E->handles); free(E->freeh);
    profiles_free(E);
    for (int i = 0; S->reg && i < PROG.nregs; i++) free(S->reg[i]);
    for (int i = 0; S->cpk && S->cby && i < PROG.ncounters; i++) { free(S->cpk[i]); free(S->cby[i]); }
    for (int i = 0; S->meters && i < PROG.nmeters; i++) free(S->meters[i]);
    free(S->tables); free(S->reg); free(S->cpk); free(S->cby); free(S->meters); free(S->looped);
    for (int g = 0; E->mc && g < MC_GROUPS; g++) free(E->mc[g]);
    free(E->mc); free(E->mcn);
    for (u32 s = 0; s < E->nsessions; s++) free(E->sessions[s].reps);
    free(E->sessions);
    for (int p = 0; p < MAX_PORTS; p++) {
        if (E->tm[p]) tm_free(E->tm[p]);
        if (E->ports[p]) port_free(E->ports[p]);
    }
    eng_clear_outputs(E);
    free(E->outs);
    for (ev_t *ev = E->evh, *next; ev; ev = next) { next = ev->next; free(ev); }
    for (item_t *it = E->injh, *next; it; it = next) { next = it->next; free(it); }
    for (int i = 0; i < 2; i++) {
        if (E->evpipe[i] >= 0) close(E->evpipe[i]);
        if (E->wake[i] >= 0) close(E->wake[i]);
    }
    pthread_mutex_destroy(&E->mu); pthread_mutex_destroy(&E->evmu); pthread_mutex_destroy(&E->injmu);
    free(E);
}
