/* events.c: PacketIns, digests and log lines for Python, queued under their own lock and announced on a
 * pipe. */
#include "internal.h"

void push_event(engine_t *E, int kind, int arg, const void *data, u32 len) {
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

void push_digest(prog_state_t *S, int id, const u64 *vals, int n) {
    push_event(engine_of(S), EV_DIGEST, id, vals, (u32)n * 8);
}

void push_log(prog_state_t *S, const char *fmt, u32 len, const u64 *vals, int n) {
    char buf[4096];
    size_t o = 0;
    int k = 0;
    for (const char *c = fmt; c < fmt + len && o < sizeof(buf) - 24; c++) {
        if (c + 1 < fmt + len && c[0] == '{' && c[1] == '}' && k < n) {
            o += snprintf(buf + o, sizeof(buf) - o, "%llu", (unsigned long long)vals[k++]);
            c++;
        } else {
            buf[o++] = *c;
        }
    }
    push_event(engine_of(S), EV_LOG, 0, buf, (u32)o);
}

void packet_error(engine_t *E, const char *stage, const char *msg) {
    if (msg && !*msg) { E->pipeline_errors++; return; }  /* logged before (l_jump_limit) */
    char buf[512];
    int n = snprintf(buf, sizeof(buf), "packet dropped in %s: %s", stage, msg ? msg : "error");
    E->pipeline_errors++;
    push_event(E, EV_LOG, 0, buf, (u32)(n < (int)sizeof(buf) ? n : (int)sizeof(buf) - 1));
}


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

/* ------------------------------------------------------------------ BMv2's event log (--nanolog) */

void eng_set_event_log(engine_t *E, void *send, int sock, u64 device_id, u64 first_id) {
    E->elog_send = (int (*)(int, const void *, size_t, int))send;
    E->elog_sock = sock; E->elog_device = device_id; E->elog_next_id = first_id;
}

u64 eng_event_log_next_id(engine_t *E) { return E->elog_next_id; }

/* A packet event of the packet being processed, in BMv2's packed layout: int type, u64 switch id, u32 context,
 * u64 signature, u64 packet id, u64 copy id, then the port (int); nanomsg's PUB drops it if no reader keeps up. */
void elog_port(engine_t *E, int type, u32 port) {
    if (!E->elog_send) return;
    u8 msg[44] = {0};
    int32_t t = type, p = (int32_t)port;
    memcpy(msg, &t, 4);
    memcpy(msg + 4, &E->elog_device, 8);
    memcpy(msg + 24, &E->elog_packet, 8);
    memcpy(msg + 40, &p, 4);
    E->elog_send(E->elog_sock, msg, sizeof(msg), 1 /* NN_DONTWAIT */);
}
