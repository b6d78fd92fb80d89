// Multicast groups with (port, rid) replicas, and an ingress-to-egress clone.
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

struct headers_t { ethernet_t ethernet; }
struct meta_t { }

const bit<32> INSTANCE_INGRESS_CLONE = 1;

parser MParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition accept;
    }
}

control MVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control MIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.ethernet.etherType == 0x1111) {
            sm.mcast_grp = 1;
        } else if (hdr.ethernet.etherType == 0x2222) {
            sm.egress_spec = 2;
            clone(CloneType.I2E, 5);
        } else {
            mark_to_drop(sm);
        }
    }
}

control MEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        // the replica id shows up in the source MAC, clones get a marker EtherType
        hdr.ethernet.srcAddr = (bit<48>) sm.egress_rid;
        if (sm.instance_type == INSTANCE_INGRESS_CLONE) {
            hdr.ethernet.etherType = 0xC10E;
        }
    }
}

control MCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control MDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.ethernet); }
}

V1Switch(MParser(), MVerify(), MIngress(), MEgress(), MCompute(), MDeparser()) main;
