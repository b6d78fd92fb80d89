/* aggnet.p4: IPv4 forwarding for all traffic plus in-network aggregation of int32 chunks.
 *
 * Packet format, tables, counters and the slot/pool protocol: docs/protocol.md.
 * v1model; the same source runs on the embedded target and on BMv2 (p4c --target bmv2).
 * AGG_LANES int32 values per packet: 32 here; aggnet_l64.p4 and aggnet_l128.p4 build the 64- and 128-lane variants.
 */
#include <core.p4>
#include <v1model.p4>

#ifndef AGG_LANES
#define AGG_LANES 32
#define AGG_VALUE_BITS 1024      /* AGG_LANES * 32 */
#endif

#define AGG_SLOTS 1024           /* slots per switch; every job gets a region [base, base + count) */
#define AGG_MAX_JOBS 1024        /* per-job counters are indexed by job id: ids 0 .. AGG_MAX_JOBS - 1 */
#define AGG_PORTS 512            /* per-port counters are indexed by port number */

const bit<16> TYPE_IPV4 = 0x0800;
const bit<8> PROTO_UDP = 17;
const bit<16> AGG_PORT = 48864;  /* 0xBEE0 */

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header ipv4_t {
    bit<4> version;
    bit<4> ihl;
    bit<8> diffserv;
    bit<16> totalLen;
    bit<16> identification;
    bit<3> flags;
    bit<13> fragOffset;
    bit<8> ttl;
    bit<8> protocol;
    bit<16> hdrChecksum;
    bit<32> srcAddr;
    bit<32> dstAddr;
}

header udp_t {
    bit<16> srcPort;
    bit<16> dstPort;
    bit<16> length_;
    bit<16> checksum;
}

/* 16 bytes; docs/protocol.md says who writes each field. */
header agg_t {
    bit<16> job_id;
    bit<16> slot;       /* relative to the job's region */
    bit<32> seq;        /* chunk number, mod 2^32 */
    bit<1> pool;
    bit<1> result;
    bit<1> retx;
    bit<1> overflow;
    bit<4> flags_reserved;
    bit<8> lanes;       /* must equal AGG_LANES, else the packet is dropped */
    bit<16> workers;    /* contributions contained in the values */
    bit<16> scale;      /* fractional bits (int16), copied unchanged */
    bit<16> reserved;
}

/* The lanes as one wide field: lane 0 is the most significant (first on the wire) 32 bits. */
header agg_values_t {
    bit<AGG_VALUE_BITS> v;
}

struct headers_t {
    ethernet_t ethernet;
    ipv4_t ipv4;
    udp_t udp;
    agg_t agg;
    agg_values_t agg_values;
}

struct agg_meta_t {
    bit<32> slot_base;
    bit<16> slot_count;
    bit<8> children;
    bit<1> aggregate;
    bit<1> is_root;
    bit<9> parent_port;
    bit<16> mcast_grp;
    bit<32> child_mask;
    bit<32> idx;            /* (slot_base + slot) * 2 + pool: index into the per-slot registers */
    bit<1> lane_overflow;
}

struct metadata_t {
    agg_meta_t agg;
}

parser AggParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            TYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.protocol) {
            (5, PROTO_UDP): parse_udp;
            default: accept;
        }
    }
    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dstPort) {
            AGG_PORT: parse_agg;
            default: accept;
        }
    }
    state parse_agg {
        packet.extract(hdr.agg);
        transition select(hdr.agg.lanes) {
            AGG_LANES: parse_agg_values;
            default: accept;
        }
    }
    state parse_agg_values {
        packet.extract(hdr.agg_values);
        transition accept;
    }
}

control AggVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control AggIngress(inout headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    counter(AGG_PORTS, CounterType.packets_and_bytes) port_rx;
    /* Per job (index = job id). */
    counter(AGG_MAX_JOBS, CounterType.packets) agg_received;      /* agg packets of a known job */
    counter(AGG_MAX_JOBS, CounterType.packets) agg_aggregated;    /* contributions added to a slot */
    counter(AGG_MAX_JOBS, CounterType.packets) agg_completed;     /* slot rounds completed here */
    counter(AGG_MAX_JOBS, CounterType.packets) agg_duplicates;    /* contributions already counted, stale results */
    counter(AGG_MAX_JOBS, CounterType.packets) agg_retx_answered; /* duplicates answered with the stored result */
    counter(AGG_MAX_JOBS, CounterType.packets) agg_overflows;     /* contributions whose sum saturated */

    /* Per slot and pool (index meta.agg.idx). */
    register<bit<32>>(AGG_SLOTS * 2) agg_bitmap;     /* children whose contribution is in */
    register<bit<8>>(AGG_SLOTS * 2) agg_count;       /* popcount of agg_bitmap for the current round */
    register<bit<1>>(AGG_SLOTS * 2) agg_done;        /* the lanes hold the final result */
    register<bit<1>>(AGG_SLOTS * 2) agg_overflow;    /* some lane saturated this round */
    register<bit<16>>(AGG_SLOTS * 2) agg_workers;    /* sum of the contributions' workers fields */

#if AGG_LANES == 128
#include "aggnet_lanes128.p4"
#elif AGG_LANES == 64
#include "aggnet_lanes64.p4"
#else
#include "aggnet_lanes32.p4"
#endif

    action drop() {
        mark_to_drop(standard_metadata);
    }

    action ipv4_forward(bit<48> dstAddr, bit<9> port) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.srcAddr = hdr.ethernet.dstAddr;
        hdr.ethernet.dstAddr = dstAddr;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { ipv4_forward; drop; NoAction; }
        size = 1024;
        default_action = drop();
    }

    /* This switch's role in the job's tree. children: bits expected in a slot's bitmap
     * (1..32); aggregate = 0: forward contributions to parent_port, results to mcast_grp. */
    action set_job(bit<32> slot_base, bit<16> slot_count, bit<8> children, bit<1> aggregate,
                   bit<1> is_root, bit<9> parent_port, bit<16> mcast_grp) {
        meta.agg.slot_base = slot_base;
        meta.agg.slot_count = slot_count;
        meta.agg.children = children;
        meta.agg.aggregate = aggregate;
        meta.agg.is_root = is_root;
        meta.agg.parent_port = parent_port;
        meta.agg.mcast_grp = mcast_grp;
    }

    table agg_job {
        key = { hdr.agg.job_id: exact; }
        actions = { set_job; NoAction; }
        size = AGG_MAX_JOBS;
        default_action = NoAction();
    }

    action set_child(bit<8> index) {
        meta.agg.child_mask = (bit<32>)1 << index;
    }

    /* Which child (bitmap bit) a contribution comes from, by ingress port. The source address
     * is matched only where one port carries several children (workers behind a switch that
     * does not aggregate); elsewhere its mask is 0. */
    table agg_child {
        key = {
            hdr.agg.job_id: exact;
            standard_metadata.ingress_port: exact;
            hdr.ipv4.srcAddr: ternary;
        }
        actions = { set_child; NoAction; }
        size = 4096;
        default_action = NoAction();
    }

    apply {
        port_rx.count((bit<32>)standard_metadata.ingress_port);
        bool on_tree = false;
        if (hdr.agg.isValid()) {
            if (agg_job.apply().hit) {
                on_tree = true;
            }
        }
        if (!on_tree) {
            if (hdr.ipv4.isValid()) {
                ipv4_lpm.apply();
            } else {
                drop();
            }
        } else {
            bit<32> job = (bit<32>)hdr.agg.job_id;
            agg_received.count(job);
            /* Contributions enter the tree only from a child port, results only from the parent
             * port, on forwarding switches too: a host of another job gets nothing in. */
            bool from_child = false;
            if (hdr.agg.result == 0) {
                if (agg_child.apply().hit) {
                    from_child = true;
                }
            }
            if (!hdr.agg_values.isValid() || hdr.agg.slot >= meta.agg.slot_count) {
                drop();
            } else if (meta.agg.aggregate == 0) {
                if (hdr.agg.result == 1 && standard_metadata.ingress_port == meta.agg.parent_port) {
                    standard_metadata.mcast_grp = meta.agg.mcast_grp;
                } else if (from_child) {
                    standard_metadata.egress_spec = meta.agg.parent_port;
                } else {
                    drop();
                }
            } else {
                meta.agg.idx = ((meta.agg.slot_base + (bit<32>)hdr.agg.slot) << 1) | (bit<32>)hdr.agg.pool;
                bit<32> bitmap;
                bit<8> count;
                bit<16> workers;
                bit<1> overflow;
                bit<1> done;
                agg_bitmap.read(bitmap, meta.agg.idx);
                agg_count.read(count, meta.agg.idx);
                agg_workers.read(workers, meta.agg.idx);
                agg_overflow.read(overflow, meta.agg.idx);
                agg_done.read(done, meta.agg.idx);
                if (hdr.agg.result == 1) {
                    /* The result coming down from the parent: keep it for retransmissions, pass it on. */
                    if (meta.agg.is_root == 0 && standard_metadata.ingress_port == meta.agg.parent_port
                            && count == meta.agg.children) {
                        lanes_write();
                        agg_done.write(meta.agg.idx, 1);
                        agg_workers.write(meta.agg.idx, hdr.agg.workers);
                        agg_overflow.write(meta.agg.idx, hdr.agg.overflow);
                        standard_metadata.mcast_grp = meta.agg.mcast_grp;
                    } else {
                        agg_duplicates.count(job);
                        drop();
                    }
                } else if (from_child) {
                    /* Contributing to this pool means the child has the other pool's result:
                     * clear its bit there, so its next contribution to that pool is new. */
                    bit<32> other;
                    agg_bitmap.read(other, meta.agg.idx ^ 1);
                    agg_bitmap.write(meta.agg.idx ^ 1, other & ~meta.agg.child_mask);
                    if ((bitmap & meta.agg.child_mask) == 0) {
                        agg_aggregated.count(job);
                        if (bitmap == 0) {
                            /* First contribution of a round: overwrite whatever the slot held. */
                            lanes_write();
                            count = 1;
                            workers = hdr.agg.workers;
                            overflow = hdr.agg.overflow;
                            agg_done.write(meta.agg.idx, 0);
                        } else {
                            meta.agg.lane_overflow = 0;
                            lanes_add();
                            count = count + 1;
                            workers = workers + hdr.agg.workers;
                            overflow = overflow | hdr.agg.overflow | meta.agg.lane_overflow;
                            if (meta.agg.lane_overflow == 1) {
                                agg_overflows.count(job);
                            }
                        }
                        agg_bitmap.write(meta.agg.idx, bitmap | meta.agg.child_mask);
                        agg_count.write(meta.agg.idx, count);
                        agg_workers.write(meta.agg.idx, workers);
                        agg_overflow.write(meta.agg.idx, overflow);
                        hdr.agg.workers = workers;
                        hdr.agg.overflow = overflow;
                        hdr.agg.retx = 0;
                        if (count == meta.agg.children) {
                            agg_completed.count(job);
                            if (meta.agg.is_root == 1) {
                                agg_done.write(meta.agg.idx, 1);
                                hdr.agg.result = 1;
                                standard_metadata.mcast_grp = meta.agg.mcast_grp;
                            } else {
                                standard_metadata.egress_spec = meta.agg.parent_port;
                            }
                        } else {
                            drop();
                        }
                    } else {
                        /* A duplicate: still collecting -> drop; complete -> re-send what we have. */
                        agg_duplicates.count(job);
                        if (count != meta.agg.children) {
                            drop();
                        } else {
                            lanes_read();
                            hdr.agg.workers = workers;
                            hdr.agg.overflow = overflow;
                            hdr.agg.retx = 1;
                            if (done == 1) {
                                agg_retx_answered.count(job);
                                hdr.agg.result = 1;
                                standard_metadata.egress_spec = standard_metadata.ingress_port;
                            } else {
                                /* Our partial may have been lost on the way up: send it again. */
                                standard_metadata.egress_spec = meta.agg.parent_port;
                            }
                        }
                    }
                } else {
                    drop();
                }
            }
        }
    }
}

control AggEgress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    counter(AGG_PORTS, CounterType.packets_and_bytes) port_tx;

    /* Results leave towards a host addressed to it, so its UDP socket accepts them. They come
     * from the aggregation address: every result descends from a contribution a worker sent
     * to the job's agg_ip and the switch MAC it resolves to, and the tree never rewrites those,
     * so the destination becomes the source. Kept, the source would be the worker whose
     * contribution completed the chunk, and that worker would drop its result as martian. */
    action set_host(bit<48> mac, bit<32> ip, bit<16> udp_port) {
        hdr.ethernet.srcAddr = hdr.ethernet.dstAddr;
        hdr.ethernet.dstAddr = mac;
        hdr.ipv4.srcAddr = hdr.ipv4.dstAddr;
        hdr.ipv4.dstAddr = ip;
        hdr.udp.dstPort = udp_port;
    }

    table agg_host {
        key = { standard_metadata.egress_port: exact; }
        actions = { set_host; NoAction; }
        size = AGG_PORTS;
        default_action = NoAction();
    }

    apply {
        if (hdr.agg.isValid()) {
            if (hdr.agg.result == 1) {
                agg_host.apply();
            }
            hdr.udp.checksum = 0;  /* the payload may have changed; 0 = no UDP checksum */
        }
        port_tx.count((bit<32>)standard_metadata.egress_port);
    }
}

control AggComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control AggDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.agg);
        packet.emit(hdr.agg_values);
    }
}

V1Switch(AggParser(), AggVerifyChecksum(), AggIngress(), AggEgress(), AggComputeChecksum(),
         AggDeparser()) main;
