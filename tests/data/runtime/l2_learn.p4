// A learning L2 switch for the finsy end-to-end test, the shape of finsy's l2_switch example:
// unknown sources are reported in a digest and their `smac` entries age out (idle timeout);
// unknown destinations are flooded through a multicast group; per-port ingress/egress packet
// counters; a register with the last ingress port; frames of ethertype 0x88B5 go to the
// controller with their ingress port, and PacketOuts leave on the port they name.
#include <core.p4>
#include <v1model.p4>

const bit<9> CPU_PORT = 255;
const bit<16> TO_CONTROLLER = 0x88B5;

@controller_header("packet_in")
header packet_in_t {
    bit<9> ingress_port;
    bit<7> _pad;
}

@controller_header("packet_out")
header packet_out_t {
    bit<9> egress_port;
    bit<7> _pad;
}

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

struct headers {
    packet_out_t packet_out;
    packet_in_t  packet_in;
    ethernet_t   ethernet;
}

struct digest_t {
    bit<48> srcAddr;
    bit<9>  ingressPort;
}

struct metadata {
    digest_t learn;
}

parser L2Parser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        transition select(standard_metadata.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition parse_ethernet;
    }
    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition accept;
    }
}

control L2VerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control L2Ingress(inout headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {
    counter(512, CounterType.packets) igPortsCounts;
    register<bit<9>>(1) lastIngressPort;

    action learn() {
        meta.learn.srcAddr = hdr.ethernet.srcAddr;
        meta.learn.ingressPort = standard_metadata.ingress_port;
        digest<digest_t>(1, meta.learn);
    }
    action fwd(bit<9> eg_port) {
        standard_metadata.egress_spec = eg_port;
    }
    action broadcast(bit<16> mgrp) {
        standard_metadata.mcast_grp = mgrp;
    }

    table smac {
        key = { hdr.ethernet.srcAddr: exact; }
        actions = { learn; NoAction; }
        default_action = learn();
        support_timeout = true;
        size = 256;
    }

    table dmac {
        key = { hdr.ethernet.dstAddr: exact; }
        actions = { fwd; broadcast; NoAction; }
        default_action = NoAction();
        size = 256;
    }

    apply {
        igPortsCounts.count((bit<32>)standard_metadata.ingress_port);
        if (hdr.packet_out.isValid()) {
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
        } else if (hdr.ethernet.etherType == TO_CONTROLLER) {
            standard_metadata.egress_spec = CPU_PORT;
        } else {
            lastIngressPort.write(0, standard_metadata.ingress_port);
            smac.apply();
            dmac.apply();
        }
    }
}

control L2Egress(inout headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {
    counter(512, CounterType.packets) egPortsCounts;

    apply {
        if (standard_metadata.egress_port == standard_metadata.ingress_port) {
            mark_to_drop(standard_metadata);  // a flood does not go back where it came from
        } else {
            egPortsCounts.count((bit<32>)standard_metadata.egress_port);
            if (standard_metadata.egress_port == CPU_PORT) {
                hdr.packet_in.setValid();
                hdr.packet_in.ingress_port = standard_metadata.ingress_port;
                hdr.packet_in._pad = 0;
            }
        }
    }
}

control L2ComputeChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control L2Deparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
    }
}

V1Switch(L2Parser(), L2VerifyChecksum(), L2Ingress(), L2Egress(), L2ComputeChecksum(), L2Deparser()) main;
