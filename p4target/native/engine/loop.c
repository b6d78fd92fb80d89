/* loop.c: the packet loop of p4target/switch.py: poll -> receive ring (or recvmmsg) -> (ingress delay) ->
 * ingress -> traffic manager -> egress -> send ring (or sendmmsg), and what Python hands it meanwhile. */
#include "internal.h"

/* A PacketOut, into ingress on the loop's next turn: 0, or 1 when `max_frames` or `max_bytes` would be passed (it is
 * dropped), -1 out of memory. */
int eng_inject(engine_t *E, u32 port, const u8 *data, u32 len, u32 max_frames, u64 max_bytes) {
    pthread_mutex_lock(&E->injmu);
    int full = E->injn >= max_frames || E->injbytes + len > max_bytes;
    pthread_mutex_unlock(&E->injmu);
    if (full) return 1;
    item_t *it = frame_item(port, data, len);
    if (!it) return -1;
    pthread_mutex_lock(&E->injmu);
    if (E->injt) E->injt->next = it; else E->injh = it;
    E->injt = it;
    E->injn++;
    E->injbytes += len;
    pthread_mutex_unlock(&E->injmu);
    ssize_t r = write(E->wake[1], "w", 1);
    (void)r;
    return 0;
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
    if (rxb && !(rxb->data = malloc((size_t)RX_BATCH * RX_BUF))) { free(rxb); rxb = NULL; }
    if (!rxb) return -1;
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
    double last_idle = mono();
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
        E->injn = 0;
        E->injbytes = 0;
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
        if (mono() - last_idle >= IDLE_WAKE_S) {
            last_idle = mono();
            for (int i = 0; i < n; i++) {
                port_t *pt = E->ports[pnum[i]];
                if (!pt->xsk.umem) xsk_open(pt);  /* nothing pending: tx_flush above */
            }
        }
    }
    free(rxb->data);
    free(rxb);
    for (int i = 0; i < n; i++) {
        port_t *pt = E->ports[pnum[i]];
        if (pt->ntx) tx_flush(pt);
    }
    E->stopping = 0;
    return 0;
}

