/* tm.c: the traffic manager of p4target/tm.py (loss with Python's Mersenne Twister, delay, tail-drop queue,
 * token buckets in packets/s and bits/s, the ingress delay of received frames). */
#include "internal.h"

static tmq_t *tm_queue(engine_t *E, int port) {
    if (port < 0 || port >= MAX_PORTS) return NULL;
    if (!E->tm[port]) {
        tmq_t *q = calloc(1, sizeof(tmq_t));
        if (!q) return NULL;
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

/* The held frames whose ingress delay is over go through ingress, then every packet allowed to leave now goes
 * through egress (the caller holds the lock). */
void tm_serve(engine_t *E) {
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
            E->elog_packet = it->packet_id;
            run_egress(E, it->F, it->data, it->dlen, it->poff, it->gen, it->enq_qdepth, q->q.n, tx_frame);
            free(it);
        }
    }
}

double tm_next_event(engine_t *E) {
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

void ingress_enqueue(engine_t *E, u32 port, const u8 *data, u32 len) {
    fifo_t items = {0};
    E->elog_packet = E->elog_next_id++;
    elog_port(E, ELOG_PACKET_IN, port);
    run_ingress(E, port, data, len, NORMAL, NULL, 0, &items);
    for (item_t *it; (it = fifo_pop(&items));) tm_enqueue(E, it);
}

/* A frame received on `port`: into ingress now, or held for the port's ingress delay (the caller holds the lock). */
void rx_frame(engine_t *E, u32 port, const u8 *data, u32 len) {
    tmq_t *q = E->tm[port];
    if (!q || !delay_holds(&q->arriving, q->idelay_s)) { ingress_enqueue(E, port, data, len); return; }
    item_t *it = frame_item(port, data, len);
    if (it) delay_push(&q->arriving, it, q->idelay_s);
}

void tm_free(tmq_t *q) {
    fifo_free(&q->q); fifo_free(&q->delayed); fifo_free(&q->arriving);
    free(q);
}
