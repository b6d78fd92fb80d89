/* bench_sender: blast frames out of one interface as fast as one core can (the switch benchmark's
 * sender, scripts/bench_switch.py). AF_PACKET + sendmmsg in batches, bypassing the qdisc, pinned
 * to one CPU. Frames come from FILE (each a 2-byte little-endian length, then the bytes) and are
 * sent round-robin.
 *
 *   bench_sender IFACE FILE SECONDS CPU   -> prints "sent N seconds S" */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH 256

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc != 5) { fprintf(stderr, "usage: bench_sender IFACE FILE SECONDS CPU\n"); return 2; }
    FILE *f = fopen(argv[2], "rb");
    if (!f) { perror(argv[2]); return 2; }
    size_t cap = 1024, n = 0;
    struct iovec *frames = malloc(cap * sizeof(*frames));
    uint8_t lenb[2];
    while (fread(lenb, 1, 2, f) == 2) {
        size_t len = lenb[0] | (lenb[1] << 8);
        if (n == cap) frames = realloc(frames, (cap *= 2) * sizeof(*frames));
        frames[n].iov_base = malloc(len);
        frames[n].iov_len = len;
        if (fread(frames[n].iov_base, 1, len, f) != len) { fprintf(stderr, "short frame file\n"); return 2; }
        n++;
    }
    fclose(f);
    if (!n) { fprintf(stderr, "no frames\n"); return 2; }
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(atoi(argv[4]), &set);
    sched_setaffinity(0, sizeof(set), &set);
    int fd = socket(AF_PACKET, SOCK_RAW, 0);
    if (fd < 0) { perror("socket"); return 2; }
    int one = 1, buf = 8 << 20;
    setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
    struct sockaddr_ll addr = {0};
    addr.sll_family = AF_PACKET;
    addr.sll_ifindex = (int)if_nametoindex(argv[1]);
    if (!addr.sll_ifindex || bind(fd, (struct sockaddr *)&addr, sizeof(addr))) { perror(argv[1]); return 2; }
    struct mmsghdr msgs[BATCH];
    memset(msgs, 0, sizeof(msgs));
    double seconds = atof(argv[3]), t0 = now(), t = t0;
    unsigned long long sent = 0;
    size_t next = 0;
    while (t - t0 < seconds) {
        for (int i = 0; i < BATCH; i++) {
            msgs[i].msg_hdr.msg_iov = &frames[next];
            msgs[i].msg_hdr.msg_iovlen = 1;
            next = next + 1 == n ? 0 : next + 1;
        }
        int r = sendmmsg(fd, msgs, BATCH, 0);
        if (r > 0) sent += (unsigned)r;
        else if (errno != ENOBUFS && errno != EAGAIN && errno != EINTR) { perror("sendmmsg"); return 1; }
        t = now();
    }
    printf("sent %llu seconds %.3f\n", sent, t - t0);
    return 0;
}
