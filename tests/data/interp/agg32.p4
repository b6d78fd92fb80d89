/* Aggregation-shaped benchmark program: every packet adds its 32 int32 lanes into
 * register cells of its slot (read, add, write back) and carries the running sums on.
 * The 32 lanes are spelled out because P4 has no loops. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> totalLen;
    bit<16> identification;
    bit<3>  flags;
    bit<13> fragOffset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdrChecksum;
    bit<32> srcAddr;
    bit<32> dstAddr;
}

header udp_t {
    bit<16> srcPort;
    bit<16> dstPort;
    bit<16> length;
    bit<16> checksum;
}

header agg_t {
    bit<16> job;
    bit<16> slot;
    bit<32> v00;
    bit<32> v01;
    bit<32> v02;
    bit<32> v03;
    bit<32> v04;
    bit<32> v05;
    bit<32> v06;
    bit<32> v07;
    bit<32> v08;
    bit<32> v09;
    bit<32> v10;
    bit<32> v11;
    bit<32> v12;
    bit<32> v13;
    bit<32> v14;
    bit<32> v15;
    bit<32> v16;
    bit<32> v17;
    bit<32> v18;
    bit<32> v19;
    bit<32> v20;
    bit<32> v21;
    bit<32> v22;
    bit<32> v23;
    bit<32> v24;
    bit<32> v25;
    bit<32> v26;
    bit<32> v27;
    bit<32> v28;
    bit<32> v29;
    bit<32> v30;
    bit<32> v31;
}

struct metadata { }

struct headers {
    ethernet_t ethernet;
    ipv4_t     ipv4;
    udp_t      udp;
    agg_t      agg;
}

parser AggParser(packet_in packet, out headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
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
            9000: parse_agg;
            default: accept;
        }
    }
    state parse_agg {
        packet.extract(hdr.agg);
        transition accept;
    }
}

control AggVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control AggIngress(inout headers hdr, inout metadata meta,
                   inout standard_metadata_t standard_metadata) {
    register<bit<32>>(32768) lanes;

    apply {
        if (hdr.agg.isValid()) {
            bit<32> base = ((bit<32>)hdr.agg.slot & 1023) * 32;
            bit<32> acc;
        lanes.read(acc, base + 0);
        acc = acc + hdr.agg.v00;
        lanes.write(base + 0, acc);
        hdr.agg.v00 = acc;
        lanes.read(acc, base + 1);
        acc = acc + hdr.agg.v01;
        lanes.write(base + 1, acc);
        hdr.agg.v01 = acc;
        lanes.read(acc, base + 2);
        acc = acc + hdr.agg.v02;
        lanes.write(base + 2, acc);
        hdr.agg.v02 = acc;
        lanes.read(acc, base + 3);
        acc = acc + hdr.agg.v03;
        lanes.write(base + 3, acc);
        hdr.agg.v03 = acc;
        lanes.read(acc, base + 4);
        acc = acc + hdr.agg.v04;
        lanes.write(base + 4, acc);
        hdr.agg.v04 = acc;
        lanes.read(acc, base + 5);
        acc = acc + hdr.agg.v05;
        lanes.write(base + 5, acc);
        hdr.agg.v05 = acc;
        lanes.read(acc, base + 6);
        acc = acc + hdr.agg.v06;
        lanes.write(base + 6, acc);
        hdr.agg.v06 = acc;
        lanes.read(acc, base + 7);
        acc = acc + hdr.agg.v07;
        lanes.write(base + 7, acc);
        hdr.agg.v07 = acc;
        lanes.read(acc, base + 8);
        acc = acc + hdr.agg.v08;
        lanes.write(base + 8, acc);
        hdr.agg.v08 = acc;
        lanes.read(acc, base + 9);
        acc = acc + hdr.agg.v09;
        lanes.write(base + 9, acc);
        hdr.agg.v09 = acc;
        lanes.read(acc, base + 10);
        acc = acc + hdr.agg.v10;
        lanes.write(base + 10, acc);
        hdr.agg.v10 = acc;
        lanes.read(acc, base + 11);
        acc = acc + hdr.agg.v11;
        lanes.write(base + 11, acc);
        hdr.agg.v11 = acc;
        lanes.read(acc, base + 12);
        acc = acc + hdr.agg.v12;
        lanes.write(base + 12, acc);
        hdr.agg.v12 = acc;
        lanes.read(acc, base + 13);
        acc = acc + hdr.agg.v13;
        lanes.write(base + 13, acc);
        hdr.agg.v13 = acc;
        lanes.read(acc, base + 14);
        acc = acc + hdr.agg.v14;
        lanes.write(base + 14, acc);
        hdr.agg.v14 = acc;
        lanes.read(acc, base + 15);
        acc = acc + hdr.agg.v15;
        lanes.write(base + 15, acc);
        hdr.agg.v15 = acc;
        lanes.read(acc, base + 16);
        acc = acc + hdr.agg.v16;
        lanes.write(base + 16, acc);
        hdr.agg.v16 = acc;
        lanes.read(acc, base + 17);
        acc = acc + hdr.agg.v17;
        lanes.write(base + 17, acc);
        hdr.agg.v17 = acc;
        lanes.read(acc, base + 18);
        acc = acc + hdr.agg.v18;
        lanes.write(base + 18, acc);
        hdr.agg.v18 = acc;
        lanes.read(acc, base + 19);
        acc = acc + hdr.agg.v19;
        lanes.write(base + 19, acc);
        hdr.agg.v19 = acc;
        lanes.read(acc, base + 20);
        acc = acc + hdr.agg.v20;
        lanes.write(base + 20, acc);
        hdr.agg.v20 = acc;
        lanes.read(acc, base + 21);
        acc = acc + hdr.agg.v21;
        lanes.write(base + 21, acc);
        hdr.agg.v21 = acc;
        lanes.read(acc, base + 22);
        acc = acc + hdr.agg.v22;
        lanes.write(base + 22, acc);
        hdr.agg.v22 = acc;
        lanes.read(acc, base + 23);
        acc = acc + hdr.agg.v23;
        lanes.write(base + 23, acc);
        hdr.agg.v23 = acc;
        lanes.read(acc, base + 24);
        acc = acc + hdr.agg.v24;
        lanes.write(base + 24, acc);
        hdr.agg.v24 = acc;
        lanes.read(acc, base + 25);
        acc = acc + hdr.agg.v25;
        lanes.write(base + 25, acc);
        hdr.agg.v25 = acc;
        lanes.read(acc, base + 26);
        acc = acc + hdr.agg.v26;
        lanes.write(base + 26, acc);
        hdr.agg.v26 = acc;
        lanes.read(acc, base + 27);
        acc = acc + hdr.agg.v27;
        lanes.write(base + 27, acc);
        hdr.agg.v27 = acc;
        lanes.read(acc, base + 28);
        acc = acc + hdr.agg.v28;
        lanes.write(base + 28, acc);
        hdr.agg.v28 = acc;
        lanes.read(acc, base + 29);
        acc = acc + hdr.agg.v29;
        lanes.write(base + 29, acc);
        hdr.agg.v29 = acc;
        lanes.read(acc, base + 30);
        acc = acc + hdr.agg.v30;
        lanes.write(base + 30, acc);
        hdr.agg.v30 = acc;
        lanes.read(acc, base + 31);
        acc = acc + hdr.agg.v31;
        lanes.write(base + 31, acc);
        hdr.agg.v31 = acc;
            hdr.udp.checksum = 0;
        }
        standard_metadata.egress_spec = 2;
    }
}

control AggEgress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply { }
}

control AggComputeChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control AggDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.agg);
    }
}

V1Switch(AggParser(), AggVerifyChecksum(), AggIngress(), AggEgress(), AggComputeChecksum(), AggDeparser()) main;
