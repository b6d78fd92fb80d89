/* ports.c: a port's pcap capture, receive ring (AF_PACKET) and send ring (AF_XDP), or recvmmsg/sendmmsg where the
 * kernel has neither. */
#include "internal.h"

/* One record, flushed: a switch killed with SIGKILL right after traffic leaves every frame in the file. */
void pcap_write(FILE *f, u64 *size, u64 cap, const u8 *data, u32 len) {
    if (!f || (cap && *size + 16 + len > cap)) return;
    *size += 16 + len;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    u32 rec[4] = {(u32)ts.tv_sec, (u32)((ts.tv_nsec + 500) / 1000), len, len};
    if (rec[1] >= 1000000) { rec[0]++; rec[1] -= 1000000; }
    fwrite(rec, sizeof(rec), 1, f);
    fwrite(data, 1, len, f);
    fflush(f);
}

static FILE *pcap_open(const char *path, u64 *size) {
    if (!path || !*path) return NULL;
    FILE *f = fopen(path, "ab");
    if (f && fseek(f, 0, SEEK_END) == 0 && ftell(f) == 0) {
        u32 hdr[6] = {0xA1B2C3D4u, 2 | (4u << 16), 0, 0, 65535, 1};
        fwrite(hdr, sizeof(hdr), 1, f);
    }
    if (f) {
        fflush(f);
        long at = ftell(f);
        *size = at > 0 ? (u64)at : 0;
    }
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
int rx_ring_open(port_t *pt) {
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
    if (!pt) return -1;
    pt->fd = fd;
    pt->txbuf = malloc((size_t)TX_BATCH * TX_FRAME);
    pt->pin = pcap_open(pcap_in, &pt->pin_size);
    pt->pout = pcap_open(pcap_out, &pt->pout_size);
    if (!pt->txbuf) { port_free(pt); return -1; }
    E->ports[number] = pt;
    return 0;
}

/* A port's engine side: its pcap files closed, a receive ring left open unmapped and closed (its port socket may
 * be closed already, so it is not released: see rx_ring_close). */
void port_free(port_t *pt) {
    if (pt->pin) fclose(pt->pin);
    if (pt->pout) fclose(pt->pout);
    if (pt->rx.map) {
        munmap(pt->rx.map, pt->rx.bytes);
        close(pt->rx.fd);
    }
    xsk_close(pt);
    free(pt->txbuf);
    free(pt);
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
int xsk_open(port_t *pt) {
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
void tx_flush(port_t *pt) {
    if (pt->xsk.umem) xsk_flush(pt);
    else sendmmsg_flush(pt);
    pt->ntx = 0;
}

void tx_frame(engine_t *E, u32 port, const u8 *data, u32 len) {
    port_t *pt = port < MAX_PORTS ? E->ports[port] : NULL;
    elog_port(E, ELOG_PACKET_OUT, port);  /* as BMv2's transmit thread logs it: every packet leaving egress */
    if (!pt) {
        if ((int)port == E->cpu_port) push_event(E, EV_PACKET_IN, (int)port, data, len);
        else E->dropped_no_port++;
        return;
    }
    pt->tx_packets++;
    pt->tx_bytes += len;
    pcap_write(pt->pout, &pt->pout_size, E->pcap_cap, data, len);
    if (pt->fd < 0) return;  /* a pcap-file port (--use-files): its output file is all it has */
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
