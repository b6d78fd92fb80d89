/* internal.h: the engine library's own types and the functions its files share. */
#ifndef AGGNET_INTERNAL_H
#define AGGNET_INTERNAL_H
#include "api.h"
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <net/if.h>
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/filter.h>
#include <linux/if_packet.h>
#include <linux/if_xdp.h>

#define MAX_PORTS 512
#define MAX_EVENTS 65536
#define RX_RING_BATCH 256  /* frames read from one port's ring per turn of the loop (no system call each) */
#define TX_BATCH 64
#define RX_BUF 65536
#define TX_FRAME 9216
#define RX_RING_BYTES (2u << 20)   /* per port: 1024 frames of 2048 bytes at a 1500-byte MTU */
#define XSK_RING 512               /* per port: send ring slots (AF_XDP) */
#define XSK_FRAMES 1024            /* per port: its frames of XSK_FRAME bytes (2 MB, pinned) */
#define XSK_FRAME 2048             /* a bigger frame goes out through the port's socket */
#define MC_GROUPS 65536
#define PROG aggnet_prog

typedef struct rep { u32 port, rid; } rep_t;
typedef struct session { u64 id; u32 n, pktlen; rep_t *reps; } session_t;

/* One packet copy between replication and egress (queued in the traffic manager). */
typedef struct item {
    struct item *next;
    u64 gen;
    u32 eport, qlen;     /* egress port; bytes for queue accounting */
    u32 dlen, poff;      /* the parsed packet and where its payload starts */
    u64 enq_qdepth;
    u64 packet_id;       /* the event log's id of the packet it came from (--nanolog) */
    double t;            /* delay line: when it may join the queue (or, held on arrival, enter ingress) */
    u8 *data;            /* the packet, after the frame */
    u64 F[];             /* PROG.nslots slots (none in a bare item, see frame_item) */
} item_t;

typedef struct { item_t *head, *tail; u32 n; } fifo_t;

typedef struct mt { u32 s[624]; int i; } mt_t;

typedef struct bucket { int on; double rate, tokens, stamp; } bucket_t;

typedef struct tmq {
    u32 depth;
    double burst_s, delay_s, idelay_s, loss;  /* idelay_s: ingress delay of frames arriving on the port */
    mt_t rng;
    bucket_t pps, bps;
    fifo_t delayed, q, arriving;              /* arriving: frames held for idelay_s (bare, see frame_item) */
    u64 enqueued, dequeued, tail_drops, loss_drops;
} tmq_t;

/* A port's receive ring (PACKET_RX_RING, TPACKET_V2, on a socket of its own): the kernel copies each frame into
 * the next free slot in softirq context and the loop reads it in place, with no system call per frame. */
typedef struct ring { u8 *map; size_t bytes; u32 frames, frame, head; int fd; } ring_t;

/* A port's send ring (an AF_XDP socket in copy mode, sending only): the loop writes each frame into a frame of
 * its own memory (umem) and a descriptor into the ring, and one system call sends up to 32 of them, with none of
 * sendmmsg's per-message header copying. The kernel hands a frame back through the completion ring once its
 * copy is sent (at once on a veth). */
typedef struct xsk {
    u8 *umem, *txmap, *cqmap;  /* umem NULL: none (not running, no AF_XDP), sendmmsg on the port's socket */
    size_t txbytes, cqbytes;
    int fd;
    u32 *txprod, *txcons, *cqprod, *cqcons;
    struct xdp_desc *txd;
    u64 *cqd;
    u32 prod, nfree;           /* the ring's producer (ours); frames free for sending */
    u64 free[XSK_FRAMES];      /* their addresses in umem */
} xsk_t;

typedef struct port {
    int fd;              /* the port's socket (Python's): sends, and receives while there is no ring */
    ring_t rx;           /* map NULL: no ring (not running, or an old kernel), recvmmsg on fd instead */
    xsk_t xsk;           /* umem NULL: no send ring, sendmmsg on fd */
    FILE *pin, *pout;
    u64 pin_size, pout_size;  /* bytes in the pcap files: capture stops at the engine's pcap_cap */
    u64 rx_packets, rx_bytes, tx_packets, tx_bytes, tx_errors, rx_errors;
    int ntx;
    struct mmsghdr tx[TX_BATCH];
    struct iovec txv[TX_BATCH];
    u8 *txbuf;
} port_t;

typedef struct ev { struct ev *next; int kind, arg; u32 len; u8 data[]; } ev_t;

typedef struct out { u32 port, len; u8 *data; } out_t;

struct engine {
    prog_state_t st;       /* first: the program's code reaches it as pk_t.E */
    pthread_mutex_t mu;
    entry_t **handles;
    u32 nhandles, caphandles;
    int32_t *freeh;
    u32 nfree;
    u32 capmembers, capgroups;  /* st.members, st.groups */
    rep_t **mc;
    u32 *mcn;
    session_t *sessions;
    u32 nsessions;
    u64 rng;
    struct timespec t0;
    /* events for Python */
    pthread_mutex_t evmu;
    ev_t *evh, *evt;
    u32 nev;
    int evpipe[2];
    /* process(): outputs collected in order */
    out_t *outs;
    u32 nouts, capouts;
    /* the switch */
    tmq_t *tm[MAX_PORTS];
    int tmorder[MAX_PORTS];
    int ntm;
    port_t *ports[MAX_PORTS];
    int cpu_port;
    u64 pcap_cap;          /* most bytes per pcap file, 0: no cap (aggnet switch --pcap-max-mb) */
    volatile int stopping;
    int wake[2];
    pthread_mutex_t injmu;
    item_t *injh, *injt;   /* PacketOuts (bare, see frame_item) */
    u32 injn;              /* ... how many, and their bytes: eng_inject refuses past its caller's caps */
    u64 injbytes;
    u64 dropped_no_port, pipeline_errors;
    /* BMv2's event log (--nanolog): nn_send of libnanomsg on a bound PUB socket; send NULL: off */
    int (*elog_send)(int sock, const void *buf, size_t len, int flags);
    int elog_sock;
    u64 elog_device, elog_next_id, elog_packet;  /* the next packet's id; the packet being processed */
};

#pragma GCC visibility push(hidden)

/* The engine behind the program's view of it (its first member). */
static inline engine_t *engine_of(prog_state_t *S) { return (engine_t *)S; }

/* rng.c */
u64 now_us(engine_t *E);
void mt_seed(mt_t *m, const u32 *key, int n);
double mt_random(mt_t *m);

/* events.c */
void push_event(engine_t *E, int kind, int arg, const void *data, u32 len);
void packet_error(engine_t *E, const char *stage, const char *msg);

/* tables.c */
void entry_free(entry_t *e);
void table_free(table_t *t);
void profiles_free(engine_t *E);

/* externs.c */
session_t *session_find(engine_t *E, u64 id);

/* flow.c: the v1model flow; a sink takes each packet leaving egress */
struct carry;
typedef void (*sink_fn)(engine_t *E, u32 port, const u8 *data, u32 len);
void fifo_push(fifo_t *f, item_t *it);
item_t *fifo_pop(fifo_t *f);
void fifo_free(fifo_t *f);
item_t *frame_item(u32 port, const u8 *data, u32 len);
void run_ingress(engine_t *E, u32 port, const u8 *data, u32 len, u64 itype, const struct carry *c, u64 gen,
                 fifo_t *out);
void run_egress(engine_t *E, u64 *F, const u8 *data, u32 dlen, u32 poff, u64 gen, u64 enq, u64 deq, sink_fn sink);

/* tm.c */
void ingress_enqueue(engine_t *E, u32 port, const u8 *data, u32 len);
void rx_frame(engine_t *E, u32 port, const u8 *data, u32 len);
enum { ELOG_PACKET_IN = 0, ELOG_PACKET_OUT = 1 };  /* BMv2's event types (p4target/nanolog.py) */
void elog_port(engine_t *E, int type, u32 port);
void tm_serve(engine_t *E);
double tm_next_event(engine_t *E);
void tm_free(tmq_t *q);

/* ports.c */
void tx_frame(engine_t *E, u32 port, const u8 *data, u32 len);
void tx_flush(port_t *pt);
void pcap_write(FILE *f, u64 *size, u64 cap, const u8 *data, u32 len);
int rx_ring_open(port_t *pt);
int xsk_open(port_t *pt);
void port_free(port_t *pt);

#pragma GCC visibility pop
#endif
