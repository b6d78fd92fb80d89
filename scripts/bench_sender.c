/* bench_sender: blast frames out of one interface as fast as one core can (the switch benchmark's
 * sender, scripts/bench_switch.py), pinned to one CPU. An AF_XDP socket in copy mode (a descriptor
 * ring, one system call per 32 frames), or AF_PACKET + sendmmsg bypassing the qdisc where the
 * kernel has no AF_XDP. Frames come from FILE (each a 2-byte little-endian length, then the
 * bytes, at most 2,048) and are sent round-robin.
 *
 *   bench_sender IFACE FILE SECONDS CPU   -> prints "sent N seconds S via af_xdp|sendmmsg" */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/if_packet.h>
#include <linux/if_xdp.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH 256
#define RING 2048      /* send and completion ring slots */
#define FRAME 2048     /* umem bytes a frame: the biggest frame sent */

typedef struct { uint8_t *data; uint32_t len; } frame_t;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* AF_XDP: the umem holds every frame to send, written once; only descriptors go in the ring, round-robin
 * over the frames. -1: no AF_XDP here. */
static long long send_af_xdp(int ifindex, const frame_t *frames, size_t n, double seconds, double *took) {
    int fd = socket(AF_XDP, SOCK_RAW, 0);
    if (fd < 0) return -1;
    size_t bytes = n * FRAME;
    uint8_t *umem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (umem == MAP_FAILED) { close(fd); return -1; }
    for (size_t i = 0; i < n; i++) memcpy(umem + i * FRAME, frames[i].data, frames[i].len);
    struct xdp_umem_reg reg = {.addr = (uint64_t)(uintptr_t)umem, .len = bytes, .chunk_size = FRAME};
    struct xdp_mmap_offsets off;
    socklen_t olen = sizeof(off);
    int slots = RING;
    if (setsockopt(fd, SOL_XDP, XDP_UMEM_REG, &reg, sizeof(reg))
        || setsockopt(fd, SOL_XDP, XDP_UMEM_FILL_RING, &slots, sizeof(slots))
        || setsockopt(fd, SOL_XDP, XDP_UMEM_COMPLETION_RING, &slots, sizeof(slots))
        || setsockopt(fd, SOL_XDP, XDP_TX_RING, &slots, sizeof(slots))
        || getsockopt(fd, SOL_XDP, XDP_MMAP_OFFSETS, &off, &olen)) { close(fd); return -1; }
    uint8_t *tx = mmap(NULL, off.tx.desc + RING * sizeof(struct xdp_desc), PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_POPULATE, fd, XDP_PGOFF_TX_RING);
    uint8_t *cq = mmap(NULL, off.cr.desc + RING * sizeof(uint64_t), PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_POPULATE, fd, XDP_UMEM_PGOFF_COMPLETION_RING);
    struct sockaddr_xdp at = {.sxdp_family = AF_XDP, .sxdp_ifindex = (uint32_t)ifindex, .sxdp_flags = XDP_COPY};
    int bound = -1;  /* EBUSY: the last run's socket still holds the queue (its release is deferred) */
    for (int tries = 0; tx != MAP_FAILED && cq != MAP_FAILED && bound && tries < 200; tries++) {
        bound = bind(fd, (struct sockaddr *)&at, sizeof(at));
        if (bound && errno != EBUSY) break;
        if (bound) usleep(10000);
    }
    if (bound) { close(fd); return -1; }
    uint32_t *txprod = (uint32_t *)(tx + off.tx.producer);
    uint32_t *cqprod = (uint32_t *)(cq + off.cr.producer), *cqcons = (uint32_t *)(cq + off.cr.consumer);
    struct xdp_desc *desc = (struct xdp_desc *)(tx + off.tx.desc);
    uint32_t prod = *txprod, done = *cqcons;
    size_t next = 0;
    long long sent = 0;
    double t0 = now(), t = t0;
    while (t - t0 < seconds) {
        uint32_t end = __atomic_load_n(cqprod, __ATOMIC_ACQUIRE);  /* sent: its slot is free again */
        sent += end - done;
        __atomic_store_n(cqcons, done = end, __ATOMIC_RELEASE);
        for (int k = 0; k < BATCH && prod - done < RING; k++, prod++, next = (next + 1) % n)
            desc[prod % RING] = (struct xdp_desc){.addr = (uint64_t)next * FRAME, .len = frames[next].len};
        __atomic_store_n(txprod, prod, __ATOMIC_RELEASE);
        if (sendto(fd, NULL, 0, MSG_DONTWAIT, NULL, 0) < 0 && errno != EAGAIN && errno != EBUSY && errno != ENOBUFS) {
            perror("sendto");
            exit(1);
        }
        t = now();
    }
    *took = t - t0;
    return sent;
}

static long long send_sendmmsg(int ifindex, frame_t *frames, size_t n, double seconds, double *took) {
    int fd = socket(AF_PACKET, SOCK_RAW, 0);
    if (fd < 0) { perror("socket"); exit(2); }
    int one = 1, buf = 8 << 20;
    setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
    struct sockaddr_ll addr = {.sll_family = AF_PACKET, .sll_ifindex = ifindex};
    if (bind(fd, (struct sockaddr *)&addr, sizeof(addr))) { perror("bind"); exit(2); }
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    memset(msgs, 0, sizeof(msgs));
    long long sent = 0;
    size_t next = 0;
    double t0 = now(), t = t0;
    while (t - t0 < seconds) {
        for (int i = 0; i < BATCH; i++, next = (next + 1) % n) {
            iov[i] = (struct iovec){frames[next].data, frames[next].len};
            msgs[i].msg_hdr.msg_iov = &iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
        }
        int r = sendmmsg(fd, msgs, BATCH, 0);
        if (r > 0) sent += r;
        else if (errno != ENOBUFS && errno != EAGAIN && errno != EINTR) { perror("sendmmsg"); exit(1); }
        t = now();
    }
    *took = t - t0;
    return sent;
}

int main(int argc, char **argv) {
    if (argc != 5) { fprintf(stderr, "usage: bench_sender IFACE FILE SECONDS CPU\n"); return 2; }
    FILE *f = fopen(argv[2], "rb");
    if (!f) { perror(argv[2]); return 2; }
    size_t cap = 1024, n = 0;
    frame_t *frames = malloc(cap * sizeof(*frames));
    uint8_t lenb[2];
    while (fread(lenb, 1, 2, f) == 2) {
        uint32_t len = lenb[0] | (lenb[1] << 8);
        if (len > FRAME) { fprintf(stderr, "a frame of %u bytes: at most %d\n", len, FRAME); return 2; }
        if (n == cap) frames = realloc(frames, (cap *= 2) * sizeof(*frames));
        frames[n] = (frame_t){malloc(len), len};
        if (fread(frames[n].data, 1, len, f) != len) { fprintf(stderr, "short frame file\n"); return 2; }
        n++;
    }
    fclose(f);
    if (!n) { fprintf(stderr, "no frames\n"); return 2; }
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(atoi(argv[4]), &set);
    sched_setaffinity(0, sizeof(set), &set);
    int ifindex = (int)if_nametoindex(argv[1]);
    if (!ifindex) { perror(argv[1]); return 2; }
    double seconds = atof(argv[3]), took = 0;
    const char *via = "af_xdp";
    long long sent = send_af_xdp(ifindex, frames, n, seconds, &took);
    if (sent < 0) {
        via = "sendmmsg";
        sent = send_sendmmsg(ifindex, frames, n, seconds, &took);
    }
    printf("sent %lld seconds %.3f via %s\n", sent, took, via);
    return 0;
}
