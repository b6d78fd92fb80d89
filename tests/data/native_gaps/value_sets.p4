// Parser value sets (a 16-bit one and a 96-bit one) for tests/test_native_lowered_gaps.py: the
// control plane decides which EtherTypes carry a tag and which tag ids are marked.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header tag_t { bit<96> id; bit<8> mark; }
struct headers_t { ethernet_t eth; tag_t tag; }
struct meta_t { bit<8> path; }

parser VsParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    value_set<bit<16>>(4) tag_types;
    value_set<bit<96>>(2) marked_ids;
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) {
            tag_types: parse_tag;
            default: accept;
        }
    }
    state parse_tag {
        pkt.extract(hdr.tag);
        transition select(hdr.tag.id) {
            marked_ids: marked;
            default: accept;
        }
    }
    state marked {
        meta.path = 1;
        transition accept;
    }
}

control NoVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control VsIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (hdr.tag.isValid()) {
            sm.egress_spec = 2;
            if (meta.path == 1) {
                hdr.tag.mark = 0xee;
            }
        }
    }
}

control NoEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control NoCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control VsDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.eth);
        pkt.emit(hdr.tag);
    }
}

V1Switch(VsParser(), NoVerify(), VsIngress(), NoEgress(), NoCompute(), VsDeparser()) main;
