// An action profile shared by two tables (lpm on the IPv4 destination, exact on the Ethernet source):
// entries name members; a miss runs no action (there is no default action), and the program tells hit
// from miss. Run natively and against the Python engine and simple_switch by tests/test_native_selectors.py.
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

struct headers {
    ethernet_t ethernet;
    ipv4_t     ipv4;
}

struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action_profile(32w8) nhops;

    action forward(bit<48> dmac, bit<9> port) {
        hdr.ethernet.dstAddr = dmac;
        sm.egress_spec = port;
    }
    action drop() {
        mark_to_drop(sm);
    }

    table routes {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { forward; drop; }
        implementation = nhops;
    }

    table by_source {
        key = { hdr.ethernet.srcAddr: exact; }
        actions = { forward; drop; }
        implementation = nhops;
    }

    apply {
        sm.egress_spec = 7;
        if (hdr.ipv4.isValid()) {
            if (!routes.apply().hit) {
                hdr.ipv4.ttl = 0;  // a miss: no action ran, the packet leaves on port 7 marked
            }
        } else {
            by_source.apply();
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply { }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
