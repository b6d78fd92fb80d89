// ECMP-style forwarding for the P4Runtime tests of indirect tables and meters:
// an action selector (groups picked by a crc16 hash of the 5-tuple), a plain action
// profile shared by two tables, an idle-timeout table, an indirect meter and a direct meter.
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

struct headers {
    ethernet_t ethernet;
    ipv4_t     ipv4;
    udp_t      udp;
}

struct metadata {
    bit<32> color;
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
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
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action_selector(HashAlgorithm.crc16, 32w64, 32w16) ecmp_selector;
    action_profile(32w16) nhop_profile;
    meter(32w8, MeterType.packets) port_meter;
    direct_meter<bit<32>>(MeterType.bytes) flow_meter;

    action drop() {
        mark_to_drop(standard_metadata);
    }
    action set_nhop(bit<48> dmac, bit<9> port) {
        hdr.ethernet.dstAddr = dmac;
        standard_metadata.egress_spec = port;
    }
    action set_port(bit<9> port) {
        standard_metadata.egress_spec = port;
    }
    action read_flow_meter() {
        flow_meter.read(meta.color);
    }

    table ecmp {
        key = {
            hdr.ipv4.dstAddr: lpm;
            hdr.ipv4.srcAddr: selector;
            hdr.ipv4.dstAddr: selector;
            hdr.ipv4.protocol: selector;
            hdr.udp.srcPort: selector;
            hdr.udp.dstPort: selector;
        }
        actions = {
            set_nhop;
            drop;
        }
        implementation = ecmp_selector;
        size = 256;
    }

    table mac_a {
        key = {
            hdr.ethernet.dstAddr: exact;
        }
        actions = {
            set_port;
            drop;
        }
        implementation = nhop_profile;
    }

    table mac_b {
        key = {
            hdr.ethernet.srcAddr: exact;
        }
        actions = {
            set_port;
            drop;
        }
        implementation = nhop_profile;
    }

    table flows {
        key = {
            hdr.ipv4.srcAddr: exact;
        }
        actions = {
            read_flow_meter;
            NoAction;
        }
        meters = flow_meter;
        support_timeout = true;
        default_action = NoAction();
    }

    apply {
        if (hdr.ipv4.isValid()) {
            ecmp.apply();
            flows.apply();
        } else if (!mac_a.apply().hit) {
            mac_b.apply();
        }
        port_meter.execute_meter((bit<32>)standard_metadata.ingress_port, meta.color);
        if (meta.color == V1MODEL_METER_COLOR_RED) {
            mark_to_drop(standard_metadata);
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
