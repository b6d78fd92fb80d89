// Parser errors: v1model sets parser_error and the packet still goes through ingress.
#include <core.p4>
#include <v1model.p4>

error { ZeroKind }

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header tag_t {
    bit<8> kind;
    bit<8> value;
}

struct headers_t {
    ethernet_t ethernet;
    tag_t      tag;
}
struct meta_t { }

parser PParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x1234: parse_tag;
            default: accept;
        }
    }
    state parse_tag {
        pkt.extract(hdr.tag);
        verify(hdr.tag.kind != 0, error.ZeroKind);
        transition select(hdr.tag.kind) {
            1: accept;
            2: accept;
        }
    }
}

control PVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control PIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (sm.parser_error == error.NoError) {
            sm.egress_spec = 2;
        } else if (sm.parser_error == error.NoMatch) {
            sm.egress_spec = 3;
        } else if (sm.parser_error == error.PacketTooShort) {
            sm.egress_spec = 4;
        } else if (sm.parser_error == error.ZeroKind) {
            sm.egress_spec = 5;
        } else {
            mark_to_drop(sm);
        }
    }
}

control PEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control PCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control PDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.tag);
    }
}

V1Switch(PParser(), PVerify(), PIngress(), PEgress(), PCompute(), PDeparser()) main;
