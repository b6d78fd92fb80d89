/* Aggregation-shaped program: 32 int32 lanes summed in registers (front-end test data). */
#include <core.p4>
#include <v1model.p4>

#define SLOTS 256
const bit<16> AGG_UDP_PORT = 16w47000;

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etherType; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> totalLen; bit<16> identification;
    bit<3> flags; bit<13> fragOffset; bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum;
    bit<32> srcAddr; bit<32> dstAddr;
}
header udp_t { bit<16> srcPort; bit<16> dstPort; bit<16> len; bit<16> csum; }
header agg_t {
    bit<16> job;
    bit<16> slot;
    bit<1>  pool;
    bit<1>  result;
    bit<6>  flags;
    bit<8>  exponent;
    bit<32> seq;
    int<32> v0;
    int<32> v1;
    int<32> v2;
    int<32> v3;
    int<32> v4;
    int<32> v5;
    int<32> v6;
    int<32> v7;
    int<32> v8;
    int<32> v9;
    int<32> v10;
    int<32> v11;
    int<32> v12;
    int<32> v13;
    int<32> v14;
    int<32> v15;
    int<32> v16;
    int<32> v17;
    int<32> v18;
    int<32> v19;
    int<32> v20;
    int<32> v21;
    int<32> v22;
    int<32> v23;
    int<32> v24;
    int<32> v25;
    int<32> v26;
    int<32> v27;
    int<32> v28;
    int<32> v29;
    int<32> v30;
    int<32> v31;
}

struct headers { ethernet_t eth; ipv4_t ipv4; udp_t udp; agg_t agg; }
struct metadata { bit<32> child_mask; bit<32> expected; bit<16> mgid; }

parser AggParser(packet_in packet, out headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.eth);
        transition select(hdr.eth.etherType) {
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) {
            17: parse_udp;
            default: accept;
        }
    }
    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dstPort) {
            AGG_UDP_PORT: parse_agg;
            default: accept;
        }
    }
    state parse_agg {
        packet.extract(hdr.agg);
        transition accept;
    }
}

control AggVerify(inout headers hdr, inout metadata meta) { apply { } }

control AggIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {
    register<int<32>>(SLOTS) lane0;
    register<int<32>>(SLOTS) lane1;
    register<int<32>>(SLOTS) lane2;
    register<int<32>>(SLOTS) lane3;
    register<int<32>>(SLOTS) lane4;
    register<int<32>>(SLOTS) lane5;
    register<int<32>>(SLOTS) lane6;
    register<int<32>>(SLOTS) lane7;
    register<int<32>>(SLOTS) lane8;
    register<int<32>>(SLOTS) lane9;
    register<int<32>>(SLOTS) lane10;
    register<int<32>>(SLOTS) lane11;
    register<int<32>>(SLOTS) lane12;
    register<int<32>>(SLOTS) lane13;
    register<int<32>>(SLOTS) lane14;
    register<int<32>>(SLOTS) lane15;
    register<int<32>>(SLOTS) lane16;
    register<int<32>>(SLOTS) lane17;
    register<int<32>>(SLOTS) lane18;
    register<int<32>>(SLOTS) lane19;
    register<int<32>>(SLOTS) lane20;
    register<int<32>>(SLOTS) lane21;
    register<int<32>>(SLOTS) lane22;
    register<int<32>>(SLOTS) lane23;
    register<int<32>>(SLOTS) lane24;
    register<int<32>>(SLOTS) lane25;
    register<int<32>>(SLOTS) lane26;
    register<int<32>>(SLOTS) lane27;
    register<int<32>>(SLOTS) lane28;
    register<int<32>>(SLOTS) lane29;
    register<int<32>>(SLOTS) lane30;
    register<int<32>>(SLOTS) lane31;
    register<bit<32>>(SLOTS) bitmap;
    register<bit<32>>(SLOTS) count;
    counter(64, CounterType.packets_and_bytes) agg_packets;

    action drop() { mark_to_drop(standard_metadata); }
    action set_child(bit<32> mask, bit<32> expected, bit<16> mgid) {
        meta.child_mask = mask;
        meta.expected = expected;
        meta.mgid = mgid;
    }
    action forward(bit<9> port) { standard_metadata.egress_spec = port; }

    table agg_children {
        key = {
            hdr.agg.job: exact;
            standard_metadata.ingress_port: exact;
        }
        actions = { set_child; drop; }
        default_action = drop();
        size = 1024;
    }
    table l2 {
        key = { hdr.eth.dst: exact; }
        actions = { forward; drop; NoAction; }
        default_action = NoAction();
    }

    apply {
        if (!hdr.agg.isValid()) {
            l2.apply();
            return;
        }
        if (agg_children.apply().miss) {
            return;
        }
        agg_packets.count((bit<32>)hdr.agg.job);
        bit<32> idx = (bit<32>)hdr.agg.slot;
        bit<32> seen;
        bitmap.read(seen, idx);
        if (seen & meta.child_mask != 0) {
            drop();
            return;
        }
        bitmap.write(idx, seen | meta.child_mask);
        bit<32> n;
        count.read(n, idx);
        n = n + 1;
        count.write(idx, n);
        int<32> acc;
        lane0.read(acc, idx);
        acc = acc |+| hdr.agg.v0;
        lane0.write(idx, acc);
        hdr.agg.v0 = acc;
        lane1.read(acc, idx);
        acc = acc |+| hdr.agg.v1;
        lane1.write(idx, acc);
        hdr.agg.v1 = acc;
        lane2.read(acc, idx);
        acc = acc |+| hdr.agg.v2;
        lane2.write(idx, acc);
        hdr.agg.v2 = acc;
        lane3.read(acc, idx);
        acc = acc |+| hdr.agg.v3;
        lane3.write(idx, acc);
        hdr.agg.v3 = acc;
        lane4.read(acc, idx);
        acc = acc |+| hdr.agg.v4;
        lane4.write(idx, acc);
        hdr.agg.v4 = acc;
        lane5.read(acc, idx);
        acc = acc |+| hdr.agg.v5;
        lane5.write(idx, acc);
        hdr.agg.v5 = acc;
        lane6.read(acc, idx);
        acc = acc |+| hdr.agg.v6;
        lane6.write(idx, acc);
        hdr.agg.v6 = acc;
        lane7.read(acc, idx);
        acc = acc |+| hdr.agg.v7;
        lane7.write(idx, acc);
        hdr.agg.v7 = acc;
        lane8.read(acc, idx);
        acc = acc |+| hdr.agg.v8;
        lane8.write(idx, acc);
        hdr.agg.v8 = acc;
        lane9.read(acc, idx);
        acc = acc |+| hdr.agg.v9;
        lane9.write(idx, acc);
        hdr.agg.v9 = acc;
        lane10.read(acc, idx);
        acc = acc |+| hdr.agg.v10;
        lane10.write(idx, acc);
        hdr.agg.v10 = acc;
        lane11.read(acc, idx);
        acc = acc |+| hdr.agg.v11;
        lane11.write(idx, acc);
        hdr.agg.v11 = acc;
        lane12.read(acc, idx);
        acc = acc |+| hdr.agg.v12;
        lane12.write(idx, acc);
        hdr.agg.v12 = acc;
        lane13.read(acc, idx);
        acc = acc |+| hdr.agg.v13;
        lane13.write(idx, acc);
        hdr.agg.v13 = acc;
        lane14.read(acc, idx);
        acc = acc |+| hdr.agg.v14;
        lane14.write(idx, acc);
        hdr.agg.v14 = acc;
        lane15.read(acc, idx);
        acc = acc |+| hdr.agg.v15;
        lane15.write(idx, acc);
        hdr.agg.v15 = acc;
        lane16.read(acc, idx);
        acc = acc |+| hdr.agg.v16;
        lane16.write(idx, acc);
        hdr.agg.v16 = acc;
        lane17.read(acc, idx);
        acc = acc |+| hdr.agg.v17;
        lane17.write(idx, acc);
        hdr.agg.v17 = acc;
        lane18.read(acc, idx);
        acc = acc |+| hdr.agg.v18;
        lane18.write(idx, acc);
        hdr.agg.v18 = acc;
        lane19.read(acc, idx);
        acc = acc |+| hdr.agg.v19;
        lane19.write(idx, acc);
        hdr.agg.v19 = acc;
        lane20.read(acc, idx);
        acc = acc |+| hdr.agg.v20;
        lane20.write(idx, acc);
        hdr.agg.v20 = acc;
        lane21.read(acc, idx);
        acc = acc |+| hdr.agg.v21;
        lane21.write(idx, acc);
        hdr.agg.v21 = acc;
        lane22.read(acc, idx);
        acc = acc |+| hdr.agg.v22;
        lane22.write(idx, acc);
        hdr.agg.v22 = acc;
        lane23.read(acc, idx);
        acc = acc |+| hdr.agg.v23;
        lane23.write(idx, acc);
        hdr.agg.v23 = acc;
        lane24.read(acc, idx);
        acc = acc |+| hdr.agg.v24;
        lane24.write(idx, acc);
        hdr.agg.v24 = acc;
        lane25.read(acc, idx);
        acc = acc |+| hdr.agg.v25;
        lane25.write(idx, acc);
        hdr.agg.v25 = acc;
        lane26.read(acc, idx);
        acc = acc |+| hdr.agg.v26;
        lane26.write(idx, acc);
        hdr.agg.v26 = acc;
        lane27.read(acc, idx);
        acc = acc |+| hdr.agg.v27;
        lane27.write(idx, acc);
        hdr.agg.v27 = acc;
        lane28.read(acc, idx);
        acc = acc |+| hdr.agg.v28;
        lane28.write(idx, acc);
        hdr.agg.v28 = acc;
        lane29.read(acc, idx);
        acc = acc |+| hdr.agg.v29;
        lane29.write(idx, acc);
        hdr.agg.v29 = acc;
        lane30.read(acc, idx);
        acc = acc |+| hdr.agg.v30;
        lane30.write(idx, acc);
        hdr.agg.v30 = acc;
        lane31.read(acc, idx);
        acc = acc |+| hdr.agg.v31;
        lane31.write(idx, acc);
        hdr.agg.v31 = acc;
        if (n == meta.expected) {
            hdr.agg.result = 1;
            standard_metadata.mcast_grp = meta.mgid;
            bitmap.write(idx, 0);
            count.write(idx, 0);
        } else {
            drop();
        }
    }
}

control AggEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {
    apply {
        if (standard_metadata.egress_rid != 0) {
            hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        }
    }
}

control AggCompute(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control AggDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.eth);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.agg);
    }
}

V1Switch(AggParser(), AggVerify(), AggIngress(), AggEgress(), AggCompute(), AggDeparser()) main;
