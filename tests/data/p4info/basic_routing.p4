// The control-plane surface of p4c's testdata/p4_16_samples/basic_routing-bmv2.p4 (same
// control, table, action, key and parameter names), written for AggNet's P4Info tests:
// basic_routing.p4info.txtpb is the P4Info p4c publishes for that program.
#include <core.p4>
#include <v1model.p4>

struct ingress_metadata_t {
    bit<12> vrf;
    bit<16> bd;
    bit<16> nexthop_index;
}

struct metadata {
    ingress_metadata_t ingress_metadata;
}

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

struct headers {
    ethernet_t ethernet;
    ipv4_t     ipv4;
}

parser ParserImpl(packet_in packet, out headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition accept;
    }
}

control egress(inout headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {
    action on_miss() { }
    action rewrite_src_dst_mac(bit<48> smac, bit<48> dmac) {
        hdr.ethernet.srcAddr = smac;
        hdr.ethernet.dstAddr = dmac;
    }
    table rewrite_mac {
        key = { meta.ingress_metadata.nexthop_index: exact; }
        actions = { on_miss; rewrite_src_dst_mac; }
        size = 32768;
    }
    apply {
        rewrite_mac.apply();
    }
}

control ingress(inout headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {
    action set_vrf(bit<12> vrf) {
        meta.ingress_metadata.vrf = vrf;
    }
    action on_miss() { }
    action fib_hit_nexthop(bit<16> nexthop_index) {
        meta.ingress_metadata.nexthop_index = nexthop_index;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    action set_egress_details(bit<9> egress_spec) {
        standard_metadata.egress_spec = egress_spec;
    }
    action set_bd(bit<16> bd) {
        meta.ingress_metadata.bd = bd;
    }
    table bd {
        key = { meta.ingress_metadata.bd: exact; }
        actions = { set_vrf; }
        size = 65536;
    }
    table ipv4_fib {
        key = {
            meta.ingress_metadata.vrf: exact;
            hdr.ipv4.dstAddr: exact;
        }
        actions = { on_miss; fib_hit_nexthop; }
        size = 131072;
    }
    table ipv4_fib_lpm {
        key = {
            meta.ingress_metadata.vrf: exact;
            hdr.ipv4.dstAddr: lpm;
        }
        actions = { on_miss; fib_hit_nexthop; }
        size = 16384;
    }
    table nexthop {
        key = { meta.ingress_metadata.nexthop_index: exact; }
        actions = { on_miss; set_egress_details; }
        size = 32768;
    }
    table port_mapping {
        key = { standard_metadata.ingress_port: exact; }
        actions = { set_bd; }
        size = 32768;
    }
    apply {
        if (hdr.ipv4.isValid()) {
            port_mapping.apply();
            bd.apply();
            switch (ipv4_fib.apply().action_run) {
                on_miss: { ipv4_fib_lpm.apply(); }
            }
            nexthop.apply();
        }
    }
}

control DeparserImpl(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
    }
}

control verifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control computeChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

V1Switch(ParserImpl(), verifyChecksum(), ingress(), egress(), computeChecksum(), DeparserImpl()) main;
