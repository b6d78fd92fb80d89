/* engine.h: the engine's types (they depend on the program's constants, see cgen.py's prelude). */
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

#define NORMAL 0
#define I2E_CLONE 1
#define E2E_CLONE 2
#define RECIRCULATED 4
#define REPLICATED 5
#define RESUBMITTED 6
#define MAX_LOOPS 16
#define MAX_PORTS 512
#define MAX_EVENTS 65536
#define RX_BATCH 32
#define RX_RING_BATCH 256  /* frames read from one port's ring per turn of the loop (no system call each) */
#define TX_BATCH 64
#define RX_BUF 65536
#define TX_FRAME 9216
#define RX_RING_BYTES (2u << 20)   /* per port: 1024 frames of 2048 bytes at a 1500-byte MTU */
#define XSK_RING 512               /* per port: send ring slots (AF_XDP) */
#define XSK_FRAMES 1024            /* per port: its frames of XSK_FRAME bytes (2 MB, pinned) */
#define XSK_FRAME 2048             /* a bigger frame goes out through the port's socket */
#define DEFAULT_DEPTH 64
#define DEFAULT_BURST_S 0.005
#define IDLE_WAKE_S 1.0
#define EV_PACKET_IN 1
#define EV_LOG 2
#define EV_DIGEST 3

typedef struct rep { u32 port, rid; } rep_t;
typedef struct session { u64 id; u32 n, pktlen; rep_t *reps; } session_t;

/* One packet copy between replication and egress (queued in the traffic manager). */
typedef struct item {
    struct item *next;
    u64 gen;
    u32 eport, qlen;     /* egress port; bytes for queue accounting */
    u32 dlen, poff;      /* the parsed packet and where its payload starts */
    u64 enq_qdepth;
    double t;            /* delay line: when it may join the queue (or, held on arrival, enter ingress) */
    u64 F[NSLOTS];
    u8 data[];
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

typedef struct engine {
    pthread_mutex_t mu;
    table_t tables[NTABLES ? NTABLES : 1];
    u64 *reg[NREGS ? NREGS : 1];
    u64 *cpk[NCOUNTERS ? NCOUNTERS : 1], *cby[NCOUNTERS ? NCOUNTERS : 1];
    meter_t *meters[NMETERS ? NMETERS : 1];
    entry_t **handles;
    u32 nhandles, caphandles;
    int32_t *freeh;
    u32 nfree;
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
    int collect;
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
    u64 dropped_no_port, pipeline_errors;
    u8 *scratch;           /* deparser output */
} engine_t;

